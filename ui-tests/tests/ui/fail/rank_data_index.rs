use et_core::prelude::*;
#[megakernel(schedule = "dynamic")]
fn k(topk: &Tensor<u32, { [T, 2] }>, counts: &Tensor<u32, { [E] }>) {
    let e = event!([E], count = dyn(counts));
    tile!(route[t, k] in [T, 2] {
        signal!(e[topk[t]]);
    });
}

fn main() {}
