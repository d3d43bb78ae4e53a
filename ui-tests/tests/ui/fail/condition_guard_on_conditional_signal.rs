// `fin` shares `up`'s condition, but its guard `d[e]` is waited before that condition is
// read: an inactive `up[e]` signals nothing, and `fin[e]` waits forever to learn that it
// is inactive too.
use et_core::prelude::*;
#[megakernel]
fn k(counts: &Tensor<i32, { [E] }>, x: &Tensor<f32, { [E, 8] }>) {
    let g = event!([E]);
    let d = event!([E]);
    tile!(s[e] in [E] {
        signal!(g[e]);
    });
    tile!(up[e] in [E] if e < counts[e] {
        wait!(g[e]);
        signal!(d[e]);
    });
    tile!(fin[e] in [E] if e < counts[e] {
        wait!(d[e]);
    });
}

fn main() {}
