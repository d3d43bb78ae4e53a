// `tokens` is written by `group[e]` in this launch; `down[e]` signals through it without
// waiting for `group[e]`'s signal first: a compile error at the data index.
use et_core::prelude::*;
#[megakernel(dims(T = 8, E = 4, K = 2))]
fn k(topk: &Tensor<i32, { [T, K] }>, counts: &mut Tensor<i32, { [E] }>, tokens: &mut Tensor<i32, { [E, T] }>) {
    let grouped = event!([E]);
    let done = event!([T], count = K);
    tile!(group[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, T]));
        signal!(grouped[e]);
    });
    tile!(down[e] in [E] {
        signal!(done[tokens[e, 0 .. T]]);
    });
    tile!(combine[t] in [T] {
        wait!(done[t]);
    });
}

fn main() {}
