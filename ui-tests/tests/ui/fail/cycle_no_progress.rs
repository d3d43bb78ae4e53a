// A layer loop whose layer index does not advance: mlp[l] signals h[l], which attn[l]
// waits on, so attn[l] -> mlp[l] -> attn[l] is a real cycle of tasks.
use et_core::prelude::*;
#[megakernel]
fn k(x: &Tensor<f32, { [L, B] }>) {
    let h = event!([L, B]);
    let a = event!([L, B]);
    tile!(attn[l, b] in [L, B] {
        wait!(h[l, b]);
        signal!(a[l, b]);
    });
    tile!(mlp[l, b] in [L, B] {
        wait!(a[l, b]);
        signal!(h[l, b]);
    });
}

fn main() {}
