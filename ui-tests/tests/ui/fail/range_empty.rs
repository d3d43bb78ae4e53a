// A range that is empty for every task waits on nothing; a run of routing positions
// that is empty signals nothing, so the waiters of `done` would wait forever.
use et_core::prelude::*;
#[megakernel]
fn k(tokens: &mut Tensor<i32, { [E, 16] }>, x: &Tensor<f32, { [T] }>) {
    let ready = event!([E]);
    let done = event!([T], count = 1);
    tile!(route[e] in [E] {
        signal!(ready[e]);
    });
    tile!(d[e] in [E] {
        wait!(ready[e .. e]);
        signal!(done[tokens[e, 4 .. 4]]);
    });
    tile!(c[t] in [T] {
        wait!(done[t]);
    });
}

fn main() {}
