//! Groups whose domain is empty at the smallest size: `pairs` and `last` over `[N - 1]`
//! have no task at `N = 1`, where `e` has no element. `last` waits on `e[N - 2]`, an
//! index that is negative only where `last` has no task; `first` waits on all of `e`,
//! which at `N = 1` is no element. `some` is conditional, its cost written after the
//! condition.
use et_core::prelude::*;

#[megakernel]
pub fn tail_sums(
    x: &Tensor<f32, { [N] }>,
    n: &Tensor<i32, { [1] }>,
    y: &mut Tensor<f32, { [N - 1] }>,
    z: &mut Tensor<f32, { [N - 1] }>,
    w: &mut Tensor<f32, { [1] }>,
    v: &mut Tensor<f32, { [N] }>,
) {
    let e = event!([N - 1]);
    let ready = event!([1]);
    tile!(pairs[i] in [N - 1] {
        add(x.tile([i], [1]), x.tile([i + 1], [1]), y.tile([i], [1]));
        signal!(e[i]);
    });
    tile!(last[i] in [N - 1] {
        wait!(e[N - 2]);
        add(y.tile([N - 2], [1]), x.tile([i], [1]), z.tile([i], [1]));
    });
    tile!(first[k] in [1] {
        wait!(e[..]);
        add(x.tile([0], [1]), x.tile([0], [1]), w.tile([0], [1]));
        signal!(ready[0]);
    });
    tile!(some[i] in [N] if i < n[0], cost = 2 {
        wait!(ready[0]);
        add(x.tile([i], [1]), w.tile([0], [1]), v.tile([i], [1]));
    });
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, size: usize, active: i32, chaos: Option<u64>) {
    let x = Tensor::<f32>::random(&[size], size as u64);
    let n = Tensor::from_vec(&[1], vec![active]).unwrap();
    let (dx, dn) = (backend.upload(&x).unwrap(), backend.upload(&n).unwrap());
    let mut dy = backend.upload(&Tensor::<f32>::poisoned(&[size - 1])).unwrap();
    let mut dz = backend.upload(&Tensor::<f32>::poisoned(&[size - 1])).unwrap();
    let mut dw = backend.upload(&Tensor::<f32>::poisoned(&[1])).unwrap();
    let mut dv = backend.upload(&Tensor::<f32>::poisoned(&[size])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    tail_sums::launch_with(backend, &opts, &dx, &dn, &mut dy, &mut dz, &mut dw, &mut dv)
        .unwrap_or_else(|e| panic!("N = {size}: {e}"));
    let (y, z, w, v) =
        (backend.download(&dy).unwrap(), backend.download(&dz).unwrap(), backend.download(&dw).unwrap(), backend.download(&dv).unwrap());
    let xs = |i: usize| x.get(&[i]);
    for i in 0..size - 1 {
        assert_eq!(y.get(&[i]), xs(i) + xs(i + 1), "y[{i}] at N = {size}");
        assert_eq!(z.get(&[i]), (xs(size - 2) + xs(size - 1)) + xs(i), "z[{i}] at N = {size}");
    }
    assert_eq!(w.get(&[0]), xs(0) + xs(0));
    for i in 0..size.min(active.max(0) as usize) {
        assert_eq!(v.get(&[i]), xs(i) + (xs(0) + xs(0)), "v[{i}] at N = {size}");
    }
}

#[allow(dead_code)]
fn main() {
    for size in [1, 2, 7] {
        for active in [0, 1, 5] {
            for chaos in [None, Some(size as u64 + 3)] {
                check(&Cpu::new(), size, active, chaos);
            }
        }
    }
}
