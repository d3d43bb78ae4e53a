// Input nested too deeply for the macro's parser is an error at the bracket, before the
// parser's recursion could overflow the compiler's stack.
use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let e = event!([N]);
    tile!(p[i] in [N] {
        signal!(e[((((((((((((((((((((((((((((((((((((((((i))))))))))))))))))))))))))))))))))))))))]);
    });
    tile!(q[i] in [N] {
        wait!(e[i]);
    });
}

fn main() {}
