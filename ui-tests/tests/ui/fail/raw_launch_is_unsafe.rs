// A hand-made `RawTensor` may hold any address: launching with one is `unsafe`, so safe
// code cannot reach it (the generated `launch` is the safe path).
use et_core::prelude::*;
use et_core::RawTensor;

#[megakernel]
fn double(x: &Tensor<f32, { [N * 8] }>, y: &mut Tensor<f32, { [N * 8] }>) {
    tile!(t[i] in [N] {
        add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
    });
}

fn main() {
    let x = RawTensor::new(0xdead_0000, DType::F32, &[8]);
    let y = RawTensor::new(0xbeef_0000, DType::F32, &[8]);
    let _ = Cpu::new().launch(&double::ENTRY, &[x, y], &LaunchOptions::default());
}
