// A signalled event that nothing waits on is a warning at the event (the megakernel
// still compiles); `main` fails on purpose so that trybuild records the warning.
use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let done = event!([N]);
    tile!(p[i] in [N] {
        signal!(done[i]);
    });
}

fn main() {
    let _: () = 0;
}
