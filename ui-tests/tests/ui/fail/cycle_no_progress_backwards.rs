// The layer index goes back around the loop (attn[l] waits h[l + 1], mlp[l] signals
// h[l]): no tile index advances, so the ranking proof fails and the cycle is rejected.
use et_core::prelude::*;
#[megakernel]
fn k(x: &Tensor<f32, { [L, B] }>) {
    let h = event!([L + 1, B]);
    let a = event!([L, B]);
    tile!(attn[l, b] in [L, B] {
        wait!(h[l + 1, b]);
        signal!(a[l, b]);
    });
    tile!(mlp[l, b] in [L, B] {
        wait!(a[l, b]);
        signal!(h[l, b]);
    });
}

fn main() {}
