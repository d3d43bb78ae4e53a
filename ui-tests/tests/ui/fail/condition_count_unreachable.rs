// `d[e]` is signalled once, by `up[e]`, and only when `e < counts[e]`; its declared count
// of 2 cannot be reached even when every `up` task runs, so `fin` would never run.
use et_core::prelude::*;
#[megakernel]
fn k(counts: &Tensor<i32, { [E] }>) {
    let g = event!([E]);
    let d = event!([E], count = 2);
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
