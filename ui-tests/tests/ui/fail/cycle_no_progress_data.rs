// mlp signals the layer read from a tensor: a data-dependent coordinate says nothing
// about the layer, so the loop cannot be proved to advance.
use et_core::prelude::*;
#[megakernel]
fn k(next: &Tensor<u32, { [L, B] }>, counts: &Tensor<u32, { [L + 1, B] }>) {
    let h = event!([L + 1, B], count = dyn(counts));
    let a = event!([L, B]);
    tile!(attn[l, b] in [L, B] {
        wait!(h[l, b]);
        signal!(a[l, b]);
    });
    tile!(mlp[l, b] in [L, B] {
        wait!(a[l, b]);
        signal!(h[next[l, b], b]);
    });
}

fn main() {}
