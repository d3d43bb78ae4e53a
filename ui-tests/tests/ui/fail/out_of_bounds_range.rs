use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [K * 8] }>) {
    let parts = event!([K * 8]);
    tile!(p[x] in [K * 8] {
        signal!(parts[x]);
    });
    tile!(s[k] in [K] {
        wait!(parts[k * 8 .. k * 8 + 9]);
    });
}

fn main() {}
