use et_core::prelude::*;

// `n = 4` was meant to fix the shapes' `N`: a fixed dim that nothing names, beside a shape
// dim of the same word in another case, is an error at the misspelt name. (A fixed dim
// that nothing names is otherwise accepted: macros stamp several kernels from one config.)
#[megakernel(dims(n = 4, UNUSED = 2))]
pub fn typo(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {
    tile!(p[i] in [N] {
        add(x.tile([i], [1]), x.tile([i], [1]), y.tile([i], [1]));
    });
}

fn main() {}
