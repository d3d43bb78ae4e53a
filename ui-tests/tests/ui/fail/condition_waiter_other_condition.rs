// `fin[e]` is guarded by `g[e]`, which every task signals, but its condition is not
// `up`'s: where `e < other[e]` holds and `e < counts[e]` does not, `fin[e]` is active and
// waits on a `d[e]` that an inactive `up[e]` never signals. The same condition over
// another element (`fin2` waits `d[e + 1]` under `e < counts[e]`) is no better.
use et_core::prelude::*;
#[megakernel]
fn k(counts: &Tensor<i32, { [E + 1] }>, other: &Tensor<i32, { [E] }>) {
    let g = event!([E + 1]);
    let d = event!([E + 1]);
    tile!(s[e] in [E + 1] {
        signal!(g[e]);
    });
    tile!(up[e] in [E + 1] if e < counts[e] {
        wait!(g[e]);
        signal!(d[e]);
    });
    tile!(fin[e] in [E] if e < other[e] {
        wait!(g[e]);
        wait!(d[e]);
    });
    tile!(fin2[e] in [E] if e < counts[e] {
        wait!(g[e]);
        wait!(d[e + 1]);
    });
}

fn main() {}
