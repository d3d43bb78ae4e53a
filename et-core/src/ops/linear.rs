use crate::dtype::Element;
use crate::tile::{TileMut, TileRef};

crate::tile_op! { cuda = r#"
template <class A, class B>
__device__ void matmul(et::Tile<A, 2> a, et::Tile<B, 2> b, et::Tile<float, 2> c) {
    const int m = min(c.shape[0], a.shape[0]), n = min(c.shape[1], b.shape[1]), kk = min(a.shape[1], b.shape[0]);
    for (int e = threadIdx.x; e < m * n; e += blockDim.x) {
        const int i = e / n, j = e % n;
        float acc = 0.0f;
        for (int k = 0; k < kk; ++k) acc += et::to_float(a(i, k)) * et::to_float(b(k, j));
        c(i, j) = acc;
    }
}
"#;
    contract {
        a[1] == b[0] => "the inner extents differ: a's columns must equal b's rows",
        c[0] == a[0] && c[1] == b[1] => "c must have a's rows and b's columns",
    }
    /// `c = a · b` with f32 accumulation: `a` is `m x k`, `b` is `k x n`, `c` is `m x n`
    /// (overwritten).
    pub fn matmul<A: Element, B: Element>(a: TileRef<'_, A, 2>, b: TileRef<'_, B, 2>, mut c: TileMut<'_, f32, 2>) {
        let ([m, k], [_, n]) = (a.shape(), b.shape());
        for i in 0..m {
            for j in 0..n {
                let acc: f32 = (0..k).map(|p| a.get([i, p]).to_f32() * b.get([p, j]).to_f32()).sum();
                c.set([i, j], acc);
            }
        }
    }
}

crate::tile_op! { cuda = r#"
template <class W, class X, int RX, int RY>
__device__ void gemv(et::Tile<W, 2> w, et::Tile<X, RX> x, et::Tile<float, RY> y) {
    // one warp per output row
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const int n = min(w.shape[0], y.numel()), k = min(w.shape[1], x.numel());
    for (int r = warp; r < n; r += warps) {
        float acc = 0.0f;
        for (int c = lane; c < k; c += 32) acc += et::to_float(w(r, c)) * et::to_float(x.flat(c));
        acc = et::warp_sum(acc);
        if (lane == 0) y.flat(r) = acc;
    }
}
"#;
    contract {
        numel(x) == w[1] => "x must hold as many elements as w has columns",
        numel(y) == w[0] => "y must hold as many elements as w has rows",
    }
    /// `y = w · x` with f32 accumulation: `w` is `n x k` (row-major weights); `x` holds
    /// `k` elements and `y` holds `n`, each as a tile of any rank read row-major (a row of
    /// a batch, `[1, k]`, or a vector, `[k]`). `y` is overwritten.
    pub fn gemv<W: Element, X: Element, const RX: usize, const RY: usize>(
        w: TileRef<'_, W, 2>,
        x: TileRef<'_, X, RX>,
        mut y: TileMut<'_, f32, RY>,
    ) {
        let [n, k] = w.shape();
        for r in 0..n {
            let acc: f32 = (0..k).map(|p| w.get([r, p]).to_f32() * x.get_flat(p).to_f32()).sum();
            y.set_flat(r, acc);
        }
    }
}
