//! Two tile ops of the same name (`bump`) from two modules in one megakernel, each
//! compiled in its own CUDA namespace; and one op (`add`) called through two paths,
//! compiled once.
use et_core::prelude::*;

pub mod a {
    use et_core::prelude::*;

    et_core::tile_op! { cuda = r#"
__device__ void bump(et::Tile<float, 1> src, et::Tile<float, 1> dst) {
    for (int k = threadIdx.x; k < dst.shape[0] && k < src.shape[0]; k += blockDim.x) dst(k) = 2.0f * src(k);
}
"#;
        contract { src[0] == dst[0] => "src and dst must have the same length" }
        /// `dst = 2 src`.
        pub fn bump(src: TileRef<'_, f32, 1>, mut dst: TileMut<'_, f32, 1>) {
            et_core::tile::for_each_index(dst.shape(), |i| dst.set(i, 2.0 * src.get(i)));
        }
    }
}

pub mod b {
    use et_core::prelude::*;

    et_core::tile_op! { cuda = r#"
__device__ void bump(et::Tile<float, 1> src, et::Tile<float, 1> dst) {
    for (int k = threadIdx.x; k < dst.shape[0] && k < src.shape[0]; k += blockDim.x) dst(k) = src(k) + 1.0f;
}
"#;
        contract { src[0] == dst[0] => "src and dst must have the same length" }
        /// `dst = src + 1`.
        pub fn bump(src: TileRef<'_, f32, 1>, mut dst: TileMut<'_, f32, 1>) {
            et_core::tile::for_each_index(dst.shape(), |i| dst.set(i, src.get(i) + 1.0));
        }
    }
}

#[megakernel]
pub fn same_name_ops(
    x: &Tensor<f32, { [N * 8] }>,
    y: &mut Tensor<f32, { [N * 8] }>,
    z: &mut Tensor<f32, { [N * 8] }>,
    w: &mut Tensor<f32, { [N * 8] }>,
    v: &mut Tensor<f32, { [N * 8] }>,
) {
    tile!(t[i] in [N] {
        a::bump(x.tile([i], [8]), y.tile([i], [8]));
        b::bump(x.tile([i], [8]), z.tile([i], [8]));
        add(y.tile([i], [8]), z.tile([i], [8]), w.tile([i], [8]));
        et_core::ops::add(w.tile([i], [8]), x.tile([i], [8]), v.tile([i], [8]));
    });
}

/// Runs on any backend and checks against a sequential reference: `v = 4x + 1`.
pub fn check<B: Backend>(backend: &B, n: usize) {
    let x = Tensor::<f32>::random(&[n * 8], n as u64);
    let dx = backend.upload(&x).unwrap();
    let mut outs: Vec<_> = (0..4).map(|_| backend.upload(&Tensor::<f32>::poisoned(&[n * 8])).unwrap()).collect();
    let [y, z, w, v] = &mut outs[..] else { unreachable!() };
    same_name_ops::launch(backend, &dx, y, z, w, v).unwrap();
    let v = backend.download(v).unwrap();
    for k in 0..n * 8 {
        let want = 4.0 * x.get(&[k]) + 1.0;
        assert!((v.get(&[k]) - want).abs() <= 1e-5 * (1.0 + want.abs()), "element {k}: {} vs {want}", v.get(&[k]));
    }
}

#[allow(dead_code)]
fn main() {
    for n in [1, 3] {
        check(&Cpu::new(), n);
    }
}
