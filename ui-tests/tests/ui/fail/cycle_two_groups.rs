use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let ping = event!([N]);
    let pong = event!([N]);
    tile!(left[i] in [N] {
        wait!(pong[i]);
        signal!(ping[i]);
    });
    tile!(right[i] in [N] {
        wait!(ping[i]);
        signal!(pong[i]);
    });
}

fn main() {}
