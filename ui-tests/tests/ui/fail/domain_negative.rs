// A domain extent that can be negative: `[N - 5]` has no tasks up to N = 5, which every
// compile-time sample hid, and a waiter on nothing from N = 6. A constant 0 never runs.
use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let e = event!([N]);
    tile!(p[i] in [0] {
        signal!(e[i]);
    });
    tile!(q[i] in [N - 5] {
        wait!(e[i]);
    });
}

fn main() {}
