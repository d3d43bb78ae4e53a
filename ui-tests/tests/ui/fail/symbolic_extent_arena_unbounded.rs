use et_core::prelude::*;
// the arena is sized when the kernel compiles: a symbolic extent of an op with shared
// memory needs a maximum
#[megakernel]
fn k(w: &Tensor<bf16, { [R, 256] }>) {
    tile!(t[i] in [1] {
        gemv_prefetch(w.tile([0, 0], [R, 256]));
    });
}

fn main() {}
