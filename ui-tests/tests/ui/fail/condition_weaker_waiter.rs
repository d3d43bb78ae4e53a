// `fin[e]` runs where `e <= counts[e]`, which does not imply `up`'s `e < counts[e]`: at
// `e == counts[e]` it is active and waits on a `d[e]` that the inactive `up[e]` never
// signals. `ne[e]`'s `e != counts[e]` does not imply it either (`e > counts[e]`).
use et_core::prelude::*;
#[megakernel]
fn k(counts: &Tensor<i32, { [E] }>) {
    let g = event!([E]);
    let d = event!([E]);
    tile!(s[e] in [E] {
        signal!(g[e]);
    });
    tile!(up[e] in [E] if e < counts[e] {
        wait!(g[e]);
        signal!(d[e]);
    });
    tile!(fin[e] in [E] if e <= counts[e] {
        wait!(g[e]);
        wait!(d[e]);
    });
    tile!(ne[e] in [E] if e != counts[e] {
        wait!(g[e]);
        wait!(d[e]);
    });
}

fn main() {}
