//! Prefetch before wait with the shared-memory arena: a chain of dependent GEMVs
//! `h[l + 1] = W[l] · h[l]`, each step cut into 16 tasks of 16 output rows. A task starts
//! the bulk copy of its 16 x 256 weight tile (`gemv_prefetch`), then waits for the whole
//! previous step (a range wait), then computes from shared memory (`gemv_consume`).
use et_core::prelude::*;
use et_core::relative_error;

#[megakernel]
pub fn gemv_chain(
    w: &Tensor<bf16, { [S * 256, 256] }>,
    x: &Tensor<bf16, { [4, 256] }>,
    h: &mut Tensor<bf16, { [S * 4, 256] }>,
) {
    let done = event!([S, 16]);
    tile!(first[n] in [16] {
        gemv_prefetch(w.tile([n, 0], [16, 256]));
        gemv_consume(w.tile([n, 0], [16, 256]), x.tile([0, 0], [4, 256]), h.tile([0, n], [4, 16]));
        signal!(done[0, n]);
    });
    tile!(step[l, n] in [S - 1, 16] {
        gemv_prefetch(w.tile([(l + 1) * 16 + n, 0], [16, 256]));
        wait!(done[l, ..]);
        gemv_consume(w.tile([(l + 1) * 16 + n, 0], [16, 256]), h.tile([l, 0], [4, 256]), h.tile([l + 1, n], [4, 16]));
        signal!(done[l + 1, n]);
    });
}

/// The chain computed step by step on the host, rounding to bf16 after each step as the
/// ops do.
pub fn reference(w: &Tensor<bf16>, x: &Tensor<bf16>, steps: usize) -> Tensor<bf16> {
    let (w, mut cur) = (w.as_slice(), x.as_slice().to_vec());
    let mut out = Vec::new();
    for l in 0..steps {
        let next: Vec<bf16> = (0..4 * 256)
            .map(|e| {
                let (b, r) = (e / 256, e % 256);
                let acc: f32 = (0..256).map(|c| cur[b * 256 + c].to_f32() * w[(l * 256 + r) * 256 + c].to_f32()).sum();
                bf16::from_f32(acc)
            })
            .collect();
        out.extend_from_slice(&next);
        cur = next;
    }
    Tensor::from_vec(&[steps * 4, 256], out).unwrap()
}

/// Weights scaled so that the activations stay near 1 over the chain.
pub fn weights(steps: usize, seed: u64) -> Tensor<bf16> {
    let w = Tensor::<f32>::random(&[steps * 256, 256], seed);
    let scale = (3.0f32 / 256.0).sqrt();
    Tensor::from_vec(&[steps * 256, 256], w.as_slice().iter().map(|&v| bf16::from_f32(v * scale)).collect()).unwrap()
}

/// Runs on any backend and returns the relative error against [`reference()`] (the CPU
/// backend computes in the reference's order: exactly 0 there).
pub fn check<B: Backend>(backend: &B, steps: usize, seed: u64, options: &LaunchOptions) -> f64 {
    let (w, x) = (weights(steps, seed), Tensor::<bf16>::random(&[4, 256], seed + 1));
    let (dw, dx) = (backend.upload(&w).unwrap(), backend.upload(&x).unwrap());
    let mut dh = backend.upload(&Tensor::<bf16>::poisoned(&[steps * 4, 256])).unwrap();
    gemv_chain::launch_with(backend, options, &dw, &dx, &mut dh).unwrap();
    relative_error(&backend.download(&dh).unwrap(), &reference(&w, &x, steps))
}

#[allow(dead_code)]
fn main() {
    for steps in [1, 2, 5] {
        for chaos in [None, Some(7)] {
            for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
                let options = LaunchOptions { chaos, schedule: Some(schedule), ..Default::default() };
                let err = check(&Cpu::new(), steps, steps as u64, &options);
                assert_eq!(err, 0.0, "{steps} steps, chaos {chaos:?}, {schedule:?}");
            }
        }
    }
}
