//! Dims, tile indices and tile groups named by raw identifiers (`r#loop`, `r#in`,
//! `r#x`) or non-ASCII ones (`Ñ`, `ï`): valid Rust, so valid names; the CUDA names
//! its values by position.
use et_core::prelude::*;

#[megakernel]
pub fn raw_names(x: &Tensor<f32, { [r#loop] }>, y: &mut Tensor<f32, { [r#loop] }>) {
    tile!(r#x[r#in] in [r#loop] {
        add(x.tile([r#in], [1]), x.tile([r#in], [1]), y.tile([r#in], [1]));
    });
}

#[megakernel]
pub fn non_ascii_names(x: &Tensor<f32, { [Ñ * 2] }>, y: &mut Tensor<f32, { [Ñ * 2] }>) {
    tile!(grupo_ü[ï] in [Ñ] {
        add(x.tile([ï], [2]), x.tile([ï], [2]), y.tile([ï], [2]));
    });
}

pub fn main() {
    for n in [1usize, 3, 5] {
        let x = Tensor::<f32>::random(&[2 * n], n as u64);
        let mut y = Tensor::<f32>::poisoned(&[2 * n]);
        non_ascii_names::launch(&Cpu::new(), &x, &mut y).unwrap();
        for e in 0..2 * n {
            assert_eq!(y.get(&[e]), 2.0 * x.get(&[e]));
        }
        let mut y = Tensor::<f32>::poisoned(&[2 * n]);
        raw_names::launch(&Cpu::new(), &x, &mut y).unwrap();
        for e in 0..2 * n {
            assert_eq!(y.get(&[e]), 2.0 * x.get(&[e]));
        }
    }
    for k in [&raw_names::KERNEL, &non_ascii_names::KERNEL] {
        assert!(k.cuda.body.is_ascii() || k.cuda.body.lines().all(|l| l.is_ascii() || l.contains("//")));
    }
}
