//! Static dims and bounds (`dims(H = 64, B <= 16)`), an explicit trigger count, and a
//! 2-D event accessed with a row range `e[b, ..]`.
use et_core::prelude::*;

#[megakernel(dims(H = 64, B <= 16), threads = 256)]
pub fn gemv_rows(
    w: &Tensor<bf16, { [H, H] }>,
    x: &Tensor<bf16, { [B, H] }>,
    y: &mut Tensor<f32, { [B, H] }>,
    s: &mut Tensor<f32, { [B] }>,
) {
    let rows = event!([B, 4], count = 1);
    tile!(mv[b, r] in [B, 4] {
        gemv(w.tile([r, 0], [16, 64]), x.tile([b, 0], [1, 64]), y.tile([b, r], [1, 16]));
        signal!(rows[b, r]);
    });
    tile!(norm[b] in [B] {
        wait!(rows[b, ..]);
        row_sum(y.tile([b, 0], [1, 64]), s.tile([b], [1]));
    });
}

pub fn reference(w: &Tensor<bf16>, x: &Tensor<bf16>) -> Vec<f32> {
    let batch = x.shape()[0];
    (0..batch)
        .map(|b| (0..64).map(|r| (0..64).map(|k| w.get(&[r, k]).to_f32() * x.get(&[b, k]).to_f32()).sum::<f32>()).sum())
        .collect()
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, batch: usize, chaos: Option<u64>) {
    let w = Tensor::<bf16>::random(&[64, 64], 1);
    let x = Tensor::<bf16>::random(&[batch, 64], batch as u64);
    let (dw, dx) = (backend.upload(&w).unwrap(), backend.upload(&x).unwrap());
    let mut y = backend.upload(&Tensor::<f32>::poisoned(&[batch, 64])).unwrap();
    let mut ds = backend.upload(&Tensor::<f32>::poisoned(&[batch])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    gemv_rows::launch_with(backend, &opts, &dw, &dx, &mut y, &mut ds).unwrap();
    let s = backend.download(&ds).unwrap();
    let want = reference(&w, &x);
    for (b, &want) in want.iter().enumerate() {
        let got = s.get(&[b]);
        assert!((got - want).abs() <= 1e-3 * (1.0 + want.abs()), "batch {b}: {got} vs {want}");
    }
}

#[allow(dead_code)]
fn main() {
    for batch in [1, 4, 16] {
        check(&Cpu::new(), batch, None);
        check(&Cpu::new(), batch, Some(batch as u64));
    }
    // above the declared bound: a clear error, not a wrong answer
    let w = Tensor::<bf16>::zeros(&[64, 64]);
    let x = Tensor::<bf16>::zeros(&[17, 64]);
    let (mut y, mut s) = (Tensor::zeros(&[17, 64]), Tensor::zeros(&[17]));
    let err = gemv_rows::launch(&Cpu::new(), &w, &x, &mut y, &mut s).unwrap_err();
    assert!(err.to_string().contains("above its declared bound 16"), "{err}");
}
