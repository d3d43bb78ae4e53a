// A megakernel with an error still has `launch`, `launch_with` and `KERNEL`, so code that
// uses them reports only the real error (and IDEs keep completing them).
use et_core::prelude::*;
#[megakernel]
pub fn k(a: &Tensor<f32, { [R * 8] }>, out: &mut Tensor<f32, { [R * 8] }>) {
    tile!(p[i] in [R] {
        wait!(nope[i]);
        add(a.tile([i], [8]), a.tile([i], [8]), out.tile([i], [8]));
    });
}

fn main() {
    let a = Tensor::<f32>::random(&[16], 1);
    let mut out = Tensor::<f32>::zeros(&[16]);
    let _ = k::launch(&Cpu::new(), &a, &mut out);
    let _ = k::launch_with(&Cpu::new(), &LaunchOptions::default(), &a, &mut out);
    let _: &str = k::KERNEL.name();
}
