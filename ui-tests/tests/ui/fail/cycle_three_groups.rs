use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let e1 = event!([N]);
    let e2 = event!([N]);
    let e3 = event!([N]);
    tile!(first[i] in [N] {
        wait!(e3[i]);
        signal!(e1[i]);
    });
    tile!(second[i] in [N] {
        wait!(e1[i]);
        signal!(e2[i]);
    });
    tile!(third[i] in [N] {
        wait!(e2[i]);
        signal!(e3[i]);
    });
}

fn main() {}
