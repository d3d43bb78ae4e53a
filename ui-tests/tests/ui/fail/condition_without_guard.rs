// A group condition is judged when the group's first `wait!` completes: a body that does
// not begin with one is an error.
use et_core::prelude::*;
#[megakernel(dims(T = 8, E = 4, K = 2))]
fn k(topk: &Tensor<i32, { [T, K] }>, counts: &mut Tensor<i32, { [E] }>, tokens: &mut Tensor<i32, { [E, T] }>) {
    let grouped = event!([E]);
    tile!(group[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, T]));
        signal!(grouped[e]);
    });
    tile!(expert[e, m] in [E, T] if m < counts[e] {
        signal!(grouped[e]);
    });
}

fn main() {}
