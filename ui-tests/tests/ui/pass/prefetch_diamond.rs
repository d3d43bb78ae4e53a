//! Prefetch before wait (a statement ahead of the first `wait!` runs before it) and a
//! diamond: left and right both wait on top; bottom waits on both.
use et_core::prelude::*;

#[megakernel(schedule = "static")]
pub fn diamond(
    x: &Tensor<f32, { [B * 16] }>,
    s: &mut Tensor<f32, { [B * 16] }>,
    l: &mut Tensor<f32, { [B * 16] }>,
    r: &mut Tensor<f32, { [B * 16] }>,
    y: &mut Tensor<f32, { [B * 16] }>,
) {
    let top = event!([B]);
    let left = event!([B]);
    let right = event!([B]);
    tile!(t[b] in [B] {
        add(x.tile([b], [16]), x.tile([b], [16]), s.tile([b], [16]));
        signal!(top[b]);
    });
    tile!(lt[b] in [B] {
        wait!(top[b]);
        add(s.tile([b], [16]), s.tile([b], [16]), l.tile([b], [16]));
        signal!(left[b]);
    });
    tile!(rt[b] in [B] {
        // independent of `top`: runs before the wait
        add(x.tile([b], [16]), x.tile([b], [16]), r.tile([b], [16]));
        wait!(top[b]);
        add(r.tile([b], [16]), s.tile([b], [16]), r.tile([b], [16]));
        signal!(right[b]);
    });
    tile!(bottom[b] in [B] {
        wait!(left[b]);
        wait!(right[b]);
        add(l.tile([b], [16]), r.tile([b], [16]), y.tile([b], [16]));
    });
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, blocks: usize, chaos: Option<u64>) {
    let x = Tensor::<f32>::random(&[blocks * 16], 4);
    let dx = backend.upload(&x).unwrap();
    let poisoned = || backend.upload(&Tensor::<f32>::poisoned(&[blocks * 16])).unwrap();
    let (mut s, mut l, mut r, mut dy) = (poisoned(), poisoned(), poisoned(), poisoned());
    let opts = LaunchOptions { chaos, ..Default::default() };
    diamond::launch_with(backend, &opts, &dx, &mut s, &mut l, &mut r, &mut dy).unwrap();
    let y = backend.download(&dy).unwrap();
    for (i, &v) in x.as_slice().iter().enumerate() {
        let s = v + v;
        assert_eq!(y.as_slice()[i], (s + s) + ((v + v) + s));
    }
}

#[allow(dead_code)]
fn main() {
    for blocks in [1, 2, 9] {
        for chaos in [None, Some(3), Some(blocks as u64)] {
            check(&Cpu::new(), blocks, chaos);
        }
    }
}
