//! Elementwise add and scale of bf16 tiles, 8 elements per thread step (16-byte loads
//! and stores where the tiles are contiguous rows).

use super::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

crate::tile_op! { cuda = decode_cuda!(r#"
template <class A, class B, class Y>
__device__ void elementwise_add(A a, B b, Y out) {
    const int R = a.shape[0], D = a.shape[1], per = (D + 7) / 8;
    const bool vec = vec_rows(a.ptr, a.stride[0], a.stride[1]) && vec_rows(b.ptr, b.stride[0], b.stride[1]) &&
                     vec_rows(out.ptr, out.stride[0], out.stride[1]);
    for (int e = threadIdx.x; e < R * per; e += blockDim.x) {
        const int r = e / per, k = (e % per) * 8;
        float x[8], y[8];
        unpack8(load8<false>(a.ptr + r * a.stride[0], k, D, a.stride[1], vec), x);
        unpack8(load8<false>(b.ptr + r * b.stride[0], k, D, b.stride[1], vec), y);
#pragma unroll
        for (int i = 0; i < 8; ++i) x[i] += y[i];
        store8(out.ptr + r * out.stride[0], k, D, out.stride[1], vec, pack8(x));
    }
}
"#);
    contract { a[0] == out[0] && a[1] == out[1] && b[0] == out[0] && b[1] == out[1] => "a, b and out must have the same extents" }
    /// `out = a + b` on `R x D` bf16 tiles, in f32, rounded once.
    pub fn elementwise_add(a: TileRef<'_, bf16, 2>, b: TileRef<'_, bf16, 2>, mut out: TileMut<'_, bf16, 2>) {
        let [r, d] = out.shape();
        for i in 0..r {
            for k in 0..d {
                out.set([i, k], bf16::from_f32(a.get([i, k]).to_f32() + b.get([i, k]).to_f32()));
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class X, class Y>
__device__ void elementwise_scale(X x, float alpha, Y out) {
    const int R = x.shape[0], D = x.shape[1], per = (D + 7) / 8;
    const bool vec = vec_rows(x.ptr, x.stride[0], x.stride[1]) && vec_rows(out.ptr, out.stride[0], out.stride[1]);
    for (int e = threadIdx.x; e < R * per; e += blockDim.x) {
        const int r = e / per, k = (e % per) * 8;
        float f[8];
        unpack8(load8<false>(x.ptr + r * x.stride[0], k, D, x.stride[1], vec), f);
#pragma unroll
        for (int i = 0; i < 8; ++i) f[i] *= alpha;
        store8(out.ptr + r * out.stride[0], k, D, out.stride[1], vec, pack8(f));
    }
}
"#);
    contract { x[0] == out[0] && x[1] == out[1] => "x and out must have the same extents" }
    /// `out = alpha · x` on `R x D` bf16 tiles, in f32, rounded once.
    pub fn elementwise_scale(x: TileRef<'_, bf16, 2>, alpha: f32, mut out: TileMut<'_, bf16, 2>) {
        let [r, d] = out.shape();
        for i in 0..r {
            for k in 0..d {
                out.set([i, k], bf16::from_f32(alpha * x.get([i, k]).to_f32()));
            }
        }
    }
}
