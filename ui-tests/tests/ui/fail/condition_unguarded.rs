// The guard of `expert`'s condition (`ready[0]`) does not order the read of `counts[e]`
// after `group[e]` writes it: a compile error at the condition.
use et_core::prelude::*;
#[megakernel(dims(T = 8, E = 4, K = 2))]
fn k(topk: &Tensor<i32, { [T, K] }>, counts: &mut Tensor<i32, { [E] }>, tokens: &mut Tensor<i32, { [E, T] }>) {
    let ready = event!([1]);
    let grouped = event!([E]);
    tile!(start[i] in [1] {
        signal!(ready[i]);
    });
    tile!(group[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, T]));
        signal!(grouped[e]);
    });
    tile!(expert[e, m] in [E, T] if m < counts[e] {
        wait!(ready[0]);
        wait!(grouped[e]);
    });
}

fn main() {}
