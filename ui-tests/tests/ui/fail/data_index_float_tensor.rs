use et_core::prelude::*;
#[megakernel(schedule = "dynamic")]
fn k(topk: &Tensor<f32, { [T, 2] }>, counts: &Tensor<u32, { [E] }>) {
    let arrived = event!([E], count = dyn(counts));
    tile!(route[t, k] in [T, 2] {
        signal!(arrived[topk[t, k]]);
    });
}

fn main() {}
