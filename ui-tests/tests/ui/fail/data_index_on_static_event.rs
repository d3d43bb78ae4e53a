use et_core::prelude::*;
#[megakernel(schedule = "dynamic")]
fn k(topk: &Tensor<u32, { [T, 2] }>, x: &Tensor<f32, { [E] }>) {
    let arrived = event!([E]);
    tile!(route[t, k] in [T, 2] {
        signal!(arrived[topk[t, k]]);
    });
}

fn main() {}
