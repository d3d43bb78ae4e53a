//! A layer loop written once: the layer index `l` is in the tile domain, the weights are
//! stacked `[L, ..]`, and the activations of layer `l` are `hs[l, ..]`, ready when the
//! event `h[l, ..]` is. `attn[l, b]` waits `h[l, b]`, `mlp[l, b]` signals `h[l + 1, b]`:
//! the groups form the cycle `attn` -> `mlp` -> `attn`, which the macro accepts because
//! `l` strictly advances around it (et-graph's ranking proof). `L` is a dim, so the
//! generated CUDA is the same for 2 layers or 32.
use et_core::prelude::*;

et_core::tile_op! { cuda = r#"
template <int RX, int RO>
__device__ void residual_gemv(et::Tile<float, 3> w, et::Tile<float, RX> x, et::Tile<float, RO> out) {
    // out = x + w[0] x / 4, one thread per output row
    const int n = w.shape[1], k = w.shape[2];
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
        float acc = 0.0f;
        for (int c = 0; c < k; ++c) acc += w(0, r, c) * x.flat(c);
        out.flat(r) = x.flat(r) + 0.25f * acc;
    }
}
"#;
    contract {
        numel(x) == w[2] => "x must hold as many elements as w has columns",
        numel(out) == w[1] => "out must hold as many elements as w has rows",
        w[0] == 1 => "w must be one layer of the stacked weights",
    }
    /// `out = x + w[0] · x / 4`: one residual layer; `w` is one `[1, n, k]` layer of
    /// stacked weights, `x` holds `k` elements and `out` `n` (rank-free, row-major).
    pub fn residual_gemv<const RX: usize, const RO: usize>(
        w: TileRef<'_, f32, 3>,
        x: TileRef<'_, f32, RX>,
        mut out: TileMut<'_, f32, RO>,
    ) {
        let [_, n, k] = w.shape();
        for r in 0..n {
            let acc: f32 = (0..k).map(|c| w.get([0, r, c]) * x.get_flat(c)).sum();
            out.set_flat(r, x.get_flat(r) + 0.25 * acc);
        }
    }
}

et_core::tile_op! { cuda = r#"
template <int RX, int RO>
__device__ void copy_flat(et::Tile<float, RX> x, et::Tile<float, RO> out) {
    for (int k = threadIdx.x; k < out.numel(); k += blockDim.x) out.flat(k) = x.flat(k);
}
"#;
    contract { numel(x) == numel(out) => "x and out must hold as many elements" }
    /// `out = x`, element by element in row-major order.
    pub fn copy_flat<const RX: usize, const RO: usize>(x: TileRef<'_, f32, RX>, mut out: TileMut<'_, f32, RO>) {
        for k in 0..out.len() {
            out.set_flat(k, x.get_flat(k));
        }
    }
}

/// Width of a layer.
pub const WIDTH: usize = 16;

#[megakernel(dims(D = 16))]
pub fn layer_loop(
    x: &Tensor<f32, { [B, D] }>,
    wa: &Tensor<f32, { [L, D, D] }>,
    wm: &Tensor<f32, { [L, D, D] }>,
    hs: &mut Tensor<f32, { [L + 1, B, D] }>,
    mid: &mut Tensor<f32, { [L, B, D] }>,
    y: &mut Tensor<f32, { [B, D] }>,
) {
    let h = event!([L + 1, B]);
    let a = event!([L, B]);
    tile!(embed[b] in [B] {
        copy_flat(x.tile([b, 0], [1, 16]), hs.tile([0, b, 0], [1, 1, 16]));
        signal!(h[0, b]);
    });
    tile!(attn[l, b] in [L, B] {
        wait!(h[l, b]);
        residual_gemv(wa.tile([l, 0, 0], [1, 16, 16]), hs.tile([l, b, 0], [1, 1, 16]), mid.tile([l, b, 0], [1, 1, 16]));
        signal!(a[l, b]);
    });
    tile!(mlp[l, b] in [L, B] {
        wait!(a[l, b]);
        residual_gemv(wm.tile([l, 0, 0], [1, 16, 16]), mid.tile([l, b, 0], [1, 1, 16]), hs.tile([l + 1, b, 0], [1, 1, 16]));
        signal!(h[l + 1, b]);
    });
    tile!(head[b] in [B] {
        wait!(h[L, b]);
        copy_flat(hs.tile([L, b, 0], [1, 1, 16]), y.tile([b, 0], [1, 16]));
    });
}

/// The same loop with `L` fixed at compile time, to compare the generated CUDA.
#[megakernel(dims(D = 16, L = 2))]
pub fn layer_loop_2(w: &Tensor<f32, { [L, D, D] }>, hs: &mut Tensor<f32, { [L + 1, B, D] }>) {
    let h = event!([L + 1, B]);
    tile!(layer[l, b] in [L, B] {
        wait!(h[l, b]);
        residual_gemv(w.tile([l, 0, 0], [1, 16, 16]), hs.tile([l, b, 0], [1, 1, 16]), hs.tile([l + 1, b, 0], [1, 1, 16]));
        signal!(h[l + 1, b]);
    });
    tile!(seed[b] in [B] {
        signal!(h[0, b]);
    });
}

/// `layer_loop_2` with 32 layers.
#[megakernel(dims(D = 16, L = 32))]
pub fn layer_loop_32(w: &Tensor<f32, { [L, D, D] }>, hs: &mut Tensor<f32, { [L + 1, B, D] }>) {
    let h = event!([L + 1, B]);
    tile!(layer[l, b] in [L, B] {
        wait!(h[l, b]);
        residual_gemv(w.tile([l, 0, 0], [1, 16, 16]), hs.tile([l, b, 0], [1, 1, 16]), hs.tile([l + 1, b, 0], [1, 1, 16]));
        signal!(h[l + 1, b]);
    });
    tile!(seed[b] in [B] {
        signal!(h[0, b]);
    });
}

/// The loop as plain sequential Rust: `h = h + wa[l] h / 4`, then `h = h + wm[l] h / 4`.
pub fn reference(x: &Tensor<f32>, wa: &Tensor<f32>, wm: &Tensor<f32>) -> Vec<Vec<f32>> {
    let (layers, batch) = (wa.shape()[0], x.shape()[0]);
    let step = |w: &Tensor<f32>, l: usize, h: &[f32]| -> Vec<f32> {
        (0..WIDTH).map(|r| h[r] + 0.25 * (0..WIDTH).map(|c| w.get(&[l, r, c]) * h[c]).sum::<f32>()).collect()
    };
    (0..batch)
        .map(|b| {
            let mut h: Vec<f32> = (0..WIDTH).map(|c| x.get(&[b, c])).collect();
            for l in 0..layers {
                h = step(wa, l, &h);
                h = step(wm, l, &h);
            }
            h
        })
        .collect()
}

/// Runs on any backend and checks against the sequential reference.
pub fn check<Bk: Backend>(backend: &Bk, layers: usize, batch: usize, chaos: Option<u64>) {
    let seed = (layers * 100 + batch) as u64;
    let x = Tensor::<f32>::random(&[batch, WIDTH], seed);
    let wa = Tensor::<f32>::random(&[layers, WIDTH, WIDTH], seed + 1);
    let wm = Tensor::<f32>::random(&[layers, WIDTH, WIDTH], seed + 2);
    let (dx, dwa, dwm) = (backend.upload(&x).unwrap(), backend.upload(&wa).unwrap(), backend.upload(&wm).unwrap());
    let mut hs = backend.upload(&Tensor::<f32>::poisoned(&[layers + 1, batch, WIDTH])).unwrap();
    let mut mid = backend.upload(&Tensor::<f32>::poisoned(&[layers, batch, WIDTH])).unwrap();
    let mut dy = backend.upload(&Tensor::<f32>::poisoned(&[batch, WIDTH])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    layer_loop::launch_with(backend, &opts, &dx, &dwa, &dwm, &mut hs, &mut mid, &mut dy).unwrap();
    let y = backend.download(&dy).unwrap();
    for (b, want) in reference(&x, &wa, &wm).iter().enumerate() {
        let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
        for (c, &want) in want.iter().enumerate() {
            let got = y.get(&[b, c]);
            assert!((got - want).abs() <= 1e-4 * scale, "L = {layers}, B = {batch}, y[{b}, {c}]: {got} vs {want}");
        }
    }
}

/// The generated CUDA of the two static loops is the same text up to its numerals (the
/// value of `L` in event extents, source line numbers, the kernel's name): it does not
/// grow with the number of layers, because `L` is a dim, not an unrolled loop.
pub fn cuda_does_not_grow_with_layers() {
    let (two, many) = (layer_loop_2::KERNEL.cuda_source(), layer_loop_32::KERNEL.cuda_source());
    let numerals_as_hash = |src: &str| {
        let mut out = String::with_capacity(src.len());
        for c in src.chars() {
            match (c.is_ascii_digit(), out.ends_with('#')) {
                (true, true) => {}
                (true, false) => out.push('#'),
                (false, _) => out.push(c),
            }
        }
        out
    };
    assert!(two.contains("* (3LL)") && many.contains("* (33LL)"), "the event extent L + 1 is written as a number");
    assert_eq!(numerals_as_hash(&two), numerals_as_hash(&many));
    assert!(many.len() <= two.len() + 64, "{} bytes for 32 layers, {} for 2", many.len(), two.len());
}

#[allow(dead_code)]
fn main() {
    for layers in [1, 3, 8] {
        for batch in [1, 2, 5] {
            check(&Cpu::new(), layers, batch, None);
            check(&Cpu::new(), layers, batch, Some((layers * batch) as u64));
        }
    }
    cuda_does_not_grow_with_layers();
}
