//! Integer scalar arguments that name tile indices and dims take the op parameter's
//! type: `i` and `N - i` into an `i32` parameter, converted from the `i64` the task
//! computes them in. A value that does not fit the parameter stops the launch with an
//! error naming the task and the argument, instead of wrapping (on the GPU too, where
//! the CUDA parameter's type decides: et-device's `gpu` tests).
use et_core::Error;
use et_core::prelude::*;

et_core::tile_op! { cuda = r#"
template <int R> __device__ void shifted(et::Tile<float, R> a, et::Tile<float, R> out, int by) {
    for (int k = threadIdx.x; k < out.numel(); k += blockDim.x) out.flat(k) = a.flat(k) + (float)by;
}"#;
    contract { same(a, out) => "same extents" }
    /// `out = a + by`.
    pub fn shifted<const R: usize>(a: TileRef<'_, f32, R>, mut out: TileMut<'_, f32, R>, by: i32) {
        et_core::tile::for_each_index(out.shape(), |i| out.set(i, a.get(i) + by as f32));
    }
}

#[megakernel]
pub fn shift_by_index(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>, z: &mut Tensor<f32, { [N] }>) {
    tile!(p[i] in [N] {
        shifted(x.tile([i], [1]), y.tile([i], [1]), i);
        shifted(x.tile([i], [1]), z.tile([i], [1]), N - i);
    });
}

#[megakernel]
pub fn shift_far(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {
    tile!(p[i] in [N] {
        shifted(x.tile([i], [1]), y.tile([i], [1]), i * 3000000000);
    });
}

/// Runs `shift_by_index` on any backend against a sequential reference.
pub fn check<B: Backend>(backend: &B, n: usize, chaos: Option<u64>) {
    let x = Tensor::<f32>::random(&[n], n as u64);
    let dx = backend.upload(&x).unwrap();
    let mut y = backend.upload(&Tensor::<f32>::poisoned(&[n])).unwrap();
    let mut z = backend.upload(&Tensor::<f32>::poisoned(&[n])).unwrap();
    let options = LaunchOptions { chaos, ..Default::default() };
    shift_by_index::launch_with(backend, &options, &dx, &mut y, &mut z).unwrap();
    let (y, z) = (backend.download(&y).unwrap(), backend.download(&z).unwrap());
    for i in 0..n {
        assert_eq!(y.as_slice()[i], x.as_slice()[i] + i as f32, "y[{i}]");
        assert_eq!(z.as_slice()[i], x.as_slice()[i] + (n - i) as f32, "z[{i}]");
    }
}

/// Launches `shift_far` on any backend, whose task `p[1]` passes 3000000000 to an `i32`
/// (`p[0]` passes 0, which fits), and returns the message of the error that names `p[1]`.
pub fn too_far<B: Backend>(backend: &B, options: &LaunchOptions) -> String {
    let x = backend.upload(&Tensor::<f32>::random(&[2], 1)).unwrap();
    let mut y = backend.upload(&Tensor::<f32>::poisoned(&[2])).unwrap();
    let err = shift_far::launch_with(backend, options, &x, &mut y).unwrap_err();
    let Error::TaskPanic { task, message } = &err else { panic!("{err}") };
    assert_eq!(task, "p[1]", "{err}");
    assert!(message.contains("= 3000000000 does not fit the op's"), "{message}");
    message.clone()
}

#[allow(dead_code)]
fn main() {
    for n in [1, 5, 64] {
        for chaos in [None, Some(n as u64)] {
            check(&Cpu::new(), n, chaos);
        }
    }
    // the CPU backend names the argument as written
    let message = too_far(&Cpu::new(), &LaunchOptions::default());
    assert!(message.contains("scalar argument `i * 3000000000` = 3000000000 does not fit"), "{message}");
}
