// `fin[e]` waits on `d[e]`, which `up[e]` signals only when `e < counts[e]`: an inactive
// `up` task signals nothing, so `fin` would wait forever (the inferred count assumes
// every task signals).
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
    tile!(fin[e] in [E] {
        wait!(d[e]);
    });
}

fn main() {}
