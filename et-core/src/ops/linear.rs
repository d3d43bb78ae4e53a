use crate::dtype::Element;
use crate::tile::{TileMut, TileRef};

crate::tile_op! {
    cuda = r#"
template <class A, class B>
__device__ void matmul(et::Tile<A, 2> a, et::Tile<B, 2> b, et::Tile<float, 2> c) {
    const int m = c.shape[0], n = c.shape[1], kk = a.shape[1];
    for (int e = threadIdx.x; e < m * n; e += blockDim.x) {
        const int i = e / n, j = e % n;
        float acc = 0.0f;
        for (int k = 0; k < kk; ++k) acc += et::to_float(a(i, k)) * et::to_float(b(k, j));
        c(i, j) = acc;
    }
}
"#;
    /// `c = a · b` with f32 accumulation: `a` is `m x k`, `b` is `k x n`, `c` is `m x n`
    /// (overwritten).
    pub fn matmul<A: Element, B: Element>(a: TileRef<'_, A, 2>, b: TileRef<'_, B, 2>, mut c: TileMut<'_, f32, 2>) {
        let [m, k] = a.shape();
        let [k2, n] = b.shape();
        assert_eq!(k, k2, "matmul: inner extents differ");
        assert_eq!(c.shape(), [m, n], "matmul: c shape");
        for i in 0..m {
            for j in 0..n {
                let acc: f32 = (0..k).map(|p| a.get([i, p]).to_f32() * b.get([p, j]).to_f32()).sum();
                c.set([i, j], acc);
            }
        }
    }
}

crate::tile_op! {
    cuda = r#"
template <class W, class X, int RX, int RY>
__device__ void gemv(et::Tile<W, 2> w, et::Tile<X, RX> x, et::Tile<float, RY> y) {
    // one warp per output row
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int r = warp; r < w.shape[0]; r += warps) {
        float acc = 0.0f;
        for (int k = lane; k < w.shape[1]; k += 32) acc += et::to_float(w(r, k)) * et::to_float(x.flat(k));
        acc = et::warp_sum(acc);
        if (lane == 0) y.flat(r) = acc;
    }
}
"#;
    /// `y = w · x` with f32 accumulation: `w` is `n x k` (row-major weights); `x` holds
    /// `k` elements and `y` holds `n`, each as a tile of any rank read row-major (a row of
    /// a batch, `[1, k]`, or a vector, `[k]`). `y` is overwritten.
    pub fn gemv<W: Element, X: Element, const RX: usize, const RY: usize>(
        w: TileRef<'_, W, 2>,
        x: TileRef<'_, X, RX>,
        mut y: TileMut<'_, f32, RY>,
    ) {
        let [n, k] = w.shape();
        assert_eq!(x.len(), k, "gemv: x holds {} elements, w has {k} columns", x.len());
        assert_eq!(y.len(), n, "gemv: y holds {} elements, w has {n} rows", y.len());
        for r in 0..n {
            let acc: f32 = (0..k).map(|p| w.get([r, p]).to_f32() * x.get_flat(p).to_f32()).sum();
            y.set_flat(r, acc);
        }
    }
}
