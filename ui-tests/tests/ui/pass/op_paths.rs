//! Tile ops called through `super::` and `self::` paths from a megakernel in a
//! submodule, with explicit generic arguments (`add::<f32, 1>`), and with a negative
//! float literal as a scalar argument.
use et_core::prelude::*;

et_core::tile_op! { cuda = r#"
template <int R> __device__ void scaled(et::Tile<float, R> a, et::Tile<float, R> out, float s) {
    for (int k = threadIdx.x; k < out.numel(); k += blockDim.x) out.flat(k) = s * a.flat(k);
}"#;
    contract { same(a, out) => "same extents" }
    /// `out = s a`.
    pub fn scaled<const R: usize>(a: TileRef<'_, f32, R>, mut out: TileMut<'_, f32, R>, s: f32) {
        et_core::tile::for_each_index(out.shape(), |i| out.set(i, s * a.get(i)));
    }
}

pub mod inner {
    use et_core::prelude::*;

    et_core::tile_op! { cuda = r#"
template <int R> __device__ void plus_one(et::Tile<float, R> a, et::Tile<float, R> out) {
    for (int k = threadIdx.x; k < out.numel(); k += blockDim.x) out.flat(k) = a.flat(k) + 1.0f;
}"#;
        contract { same(a, out) => "same extents" }
        /// `out = a + 1`.
        pub fn plus_one<const R: usize>(a: TileRef<'_, f32, R>, mut out: TileMut<'_, f32, R>) {
            et_core::tile::for_each_index(out.shape(), |i| out.set(i, a.get(i) + 1.0));
        }
    }

    #[megakernel]
    pub fn paths(
        x: &Tensor<f32, { [N] }>,
        y: &mut Tensor<f32, { [N] }>,
        z: &mut Tensor<f32, { [N] }>,
        w: &mut Tensor<f32, { [N] }>,
    ) {
        tile!(p[i] in [N] {
            super::scaled(x.tile([i], [1]), y.tile([i], [1]), -2.0);
            self::plus_one::<1>(y.tile([i], [1]), z.tile([i], [1]));
            add::<f32, 1>(z.tile([i], [1]), x.tile([i], [1]), w.tile([i], [1]));
        });
    }
}

pub fn main() {
    for n in [1usize, 4] {
        let x = Tensor::<f32>::random(&[n], 3);
        let (mut y, mut z, mut w) =
            (Tensor::<f32>::poisoned(&[n]), Tensor::<f32>::poisoned(&[n]), Tensor::<f32>::poisoned(&[n]));
        inner::paths::launch(&Cpu::new(), &x, &mut y, &mut z, &mut w).unwrap();
        for e in 0..n {
            assert_eq!(y.get(&[e]), -2.0 * x.get(&[e]));
            assert_eq!(z.get(&[e]), -2.0 * x.get(&[e]) + 1.0);
            assert_eq!(w.get(&[e]), -2.0 * x.get(&[e]) + 1.0 + x.get(&[e]));
        }
    }
    // the CUDA passes the negative value too
    assert!(inner::paths::KERNEL.cuda.body.contains("-2.0f"));
}
