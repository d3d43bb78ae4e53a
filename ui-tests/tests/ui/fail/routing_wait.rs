// A `wait!` cannot be indexed by data the launch writes: route through the signal.
use et_core::prelude::*;
#[megakernel(dims(T = 8, E = 4, K = 2))]
fn k(topk: &Tensor<i32, { [T, K] }>, counts: &mut Tensor<i32, { [E] }>, tokens: &mut Tensor<i32, { [E, T] }>) {
    let grouped = event!([E]);
    tile!(group[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, T]));
        signal!(grouped[e]);
    });
    tile!(use_it[e] in [E] {
        wait!(grouped[e]);
        wait!(grouped[tokens[e, 0]]);
    });
}

fn main() {}
