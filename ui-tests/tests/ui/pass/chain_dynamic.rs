//! Offset point accesses (`e[i + 1]`) and the dynamic schedule: a chain where step `i`
//! waits for step `i - 1`, `out[i + 1] = out[i] + x[i]`.
use et_core::prelude::*;

#[megakernel(schedule = "dynamic")]
pub fn prefix_chain(x: &Tensor<f32, { [N] }>, out: &mut Tensor<f32, { [N + 1] }>, zero: &Tensor<f32, { [1] }>) {
    let e = event!([N + 1]);
    tile!(seed[z] in [1] {
        add(zero.tile([0], [1]), zero.tile([0], [1]), out.tile([0], [1]));
        signal!(e[0]);
    });
    tile!(step[i] in [N] {
        wait!(e[i]);
        add(out.tile([i], [1]), x.tile([i], [1]), out.tile([i + 1], [1]));
        signal!(e[i + 1]);
    });
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, n: usize, chaos: Option<u64>) {
    let x = Tensor::<f32>::random(&[n], n as u64);
    let dx = backend.upload(&x).unwrap();
    let zero = backend.upload(&Tensor::<f32>::zeros(&[1])).unwrap();
    let mut dout = backend.upload(&Tensor::<f32>::poisoned(&[n + 1])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    let report = prefix_chain::launch_with(backend, &opts, &dx, &mut dout, &zero).unwrap();
    assert_eq!(report.schedule, ScheduleKind::Dynamic);
    let out = backend.download(&dout).unwrap();
    let mut acc = 0f32;
    for i in 0..n {
        acc += x.as_slice()[i];
        assert_eq!(out.get(&[i + 1]), acc, "prefix {i}");
    }
}

#[allow(dead_code)]
fn main() {
    for n in [1, 5, 64] {
        for chaos in [None, Some(n as u64)] {
            check(&Cpu::new(), n, chaos);
        }
    }
}
