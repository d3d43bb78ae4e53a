//! The decode operators' CPU references against independent naive f64 computations on
//! fresh random inputs, at several shapes including tails, with outputs poisoned first;
//! and their contracts: a shape an op cannot take is an error naming the op and extents.
//! (The ops inside multi-task megakernels: ui-tests' `decode_ops`; on the GPU:
//! et-device's `gpu_ops`.)

use et_core::ops::decode::*;
use et_core::tile::{InTensor, OutTensor, TileMut, TileRef};
use et_core::{Element, RawTensor, Tensor, bf16};

/// The whole of a host tensor as a read tile.
fn rd<T: Element, const R: usize>(raw: &RawTensor) -> TileRef<'_, T, R> {
    let shape: [usize; R] = std::array::from_fn(|d| raw.shape[d] as usize);
    // SAFETY: `raw` describes a live host tensor of the test that nothing writes meanwhile.
    unsafe { InTensor::<T>::bind(raw) }.tile([0; R], shape)
}

/// The whole of a host tensor as a written tile.
fn wr<T: Element, const R: usize>(raw: &RawTensor) -> TileMut<'_, T, R> {
    let shape: [usize; R] = std::array::from_fn(|d| raw.shape[d] as usize);
    // SAFETY: `raw` is from `raw_mut` of a tensor that the test touches only through it.
    unsafe { OutTensor::<T>::bind(raw) }.tile_mut([0; R], shape)
}

fn f(t: &Tensor<bf16>, i: &[usize]) -> f64 {
    t.get(i).to_f32() as f64
}

/// Every element within `tol` of the f64 reference, relative to the largest reference
/// magnitude (bf16 outputs round at 2^-9 of their own magnitude); NaN (a poisoned element
/// left unwritten) fails.
fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1e-6f64, |m, v| m.max(v.abs()));
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            !g.is_nan() && ((g as f64) - w).abs() <= tol * scale,
            "{what}: element {k}: {g} vs {w} (scale {scale})"
        );
    }
}

fn as_f32<T: Element>(t: &Tensor<T>) -> Vec<f32> {
    t.as_slice().iter().map(|v| v.to_f32()).collect()
}

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

#[test]
fn gemv_family_matches_f64_at_tails_and_batches() {
    // (rows, k, batch): 4096 + 8 rows, k with tails of 8 and 1 and 2052 (not a multiple of
    // 64), row counts that 16 does not divide, the batch 1 to 64
    let shapes = [(4104, 24, 1), (8, 4104, 3), (72, 33, 16), (17, 9, 64), (4104, 15, 2), (24, 2052, 7), (40, 2052, 33)];
    for (seed, (n, k, b)) in shapes.into_iter().enumerate() {
        let seed = seed as u64 * 10;
        let w = Tensor::<bf16>::random(&[n, k], seed);
        let u = Tensor::<bf16>::random(&[n, k], seed + 1);
        let x = Tensor::<bf16>::random(&[b, k], seed + 2);
        let r = Tensor::<bf16>::random(&[b, n], seed + 3);
        let dot =
            |m: &Tensor<bf16>, bi: usize, ni: usize| (0..k).map(|p| f(m, &[ni, p]) * f(&x, &[bi, p])).sum::<f64>();
        let mut want = (Vec::new(), Vec::new(), Vec::new());
        for bi in 0..b {
            for ni in 0..n {
                want.0.push(dot(&w, bi, ni));
                want.1.push(f(&r, &[bi, ni]) + dot(&w, bi, ni));
                want.2.push(silu(dot(&w, bi, ni)) * dot(&u, bi, ni));
            }
        }
        let what = format!("n {n}, k {k}, batch {b}");
        let (rw, ru, rx, rr) = (w.raw(), u.raw(), x.raw(), r.raw());

        let mut y = Tensor::<f32>::poisoned(&[b, n]);
        matvec::<f32>(rd(&rw), rd(&rx), wr(&y.raw_mut()));
        assert_close(&format!("matvec f32, {what}"), y.as_slice(), &want.0, 1e-5);
        let mut y = Tensor::<bf16>::poisoned(&[b, n]);
        matvec::<bf16>(rd(&rw), rd(&rx), wr(&y.raw_mut()));
        assert_close(&format!("matvec bf16, {what}"), &as_f32(&y), &want.0, 1e-2);
        let mut y = Tensor::<bf16>::poisoned(&[b, n]);
        matvec_residual::<bf16>(rd(&rw), rd(&rx), rd(&rr), wr(&y.raw_mut()));
        assert_close(&format!("matvec_residual, {what}"), &as_f32(&y), &want.1, 1e-2);
        let mut y = Tensor::<bf16>::poisoned(&[b, n]);
        matvec_silu::<bf16>(rd(&rw), rd(&ru), rd(&rx), wr(&y.raw_mut()));
        assert_close(&format!("matvec_silu, {what}"), &as_f32(&y), &want.2, 1e-2);

        // split-K: 3 splits of k, each into its slice of [S, B, N], then the reducers
        let cuts = [0, k / 3, 2 * k / 3, k];
        let mut part = Tensor::<f32>::poisoned(&[3, b, n]);
        {
            let raw = part.raw_mut();
            // SAFETY: live host tensors of this test; `part` is touched only through `out`.
            let out = unsafe { OutTensor::<f32>::bind(&raw) };
            // SAFETY: live host tensors that nothing writes meanwhile.
            let (win, xin) = unsafe { (InTensor::<bf16>::bind(&rw), InTensor::<bf16>::bind(&rx)) };
            for s in 0..3 {
                let (lo, hi) = (cuts[s], cuts[s + 1]);
                let wt = slice_cols(&win, n, lo, hi);
                let xt = slice_cols(&xin, b, lo, hi);
                matvec_split(wt, xt, out.tile_mut([s as i64, 0, 0], [1, b, n]));
            }
        }
        let mut want_part = Vec::new();
        for s in 0..3 {
            for bi in 0..b {
                for ni in 0..n {
                    want_part.push((cuts[s]..cuts[s + 1]).map(|p| f(&w, &[ni, p]) * f(&x, &[bi, p])).sum::<f64>());
                }
            }
        }
        assert_close(&format!("matvec_split, {what}"), part.as_slice(), &want_part, 1e-5);
        let rp = part.raw();
        let mut y = Tensor::<f32>::poisoned(&[b, n]);
        reduce_split::<f32>(rd(&rp), wr(&y.raw_mut()));
        assert_close(&format!("reduce_split, {what}"), y.as_slice(), &want.0, 1e-5);
        let mut y = Tensor::<bf16>::poisoned(&[b, n]);
        reduce_split_residual::<bf16>(rd(&rp), rd(&rr), wr(&y.raw_mut()));
        assert_close(&format!("reduce_split_residual, {what}"), &as_f32(&y), &want.1, 1e-2);
    }
}

/// Columns `lo .. hi` of the `rows x _` tensor as a tile (the split's width must divide `lo`).
fn slice_cols<'a>(t: &InTensor<'a, bf16>, rows: usize, lo: usize, hi: usize) -> TileRef<'a, bf16, 2> {
    let width = hi - lo;
    assert!(width > 0 && lo.is_multiple_of(width), "split [{lo}, {hi}) is not a whole tile");
    t.tile([0, (lo / width) as i64], [rows, width])
}

#[test]
fn norms_match_f64_with_tails() {
    for (seed, (b, d)) in [(1, 4104), (5, 4096), (3, 13)].into_iter().enumerate() {
        let seed = 100 + seed as u64 * 10;
        let x = Tensor::<bf16>::random(&[b, d], seed);
        let r = Tensor::<bf16>::random(&[b, d], seed + 1);
        let w = Tensor::<bf16>::random(&[d], seed + 2);
        let eps = 1e-5;
        let norm = |row: &[f64]| {
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps as f64).sqrt();
            row.iter().enumerate().map(|(k, v)| v * inv * f(&w, &[k])).collect::<Vec<f64>>()
        };
        let (mut want, mut want_h, mut want_res) = (Vec::new(), Vec::new(), Vec::new());
        for bi in 0..b {
            let row: Vec<f64> = (0..d).map(|k| f(&x, &[bi, k])).collect();
            want.extend(norm(&row));
            // the sum is stored in bf16 and normalised as stored
            let h: Vec<f64> = (0..d).map(|k| bf16::from_f64(f(&x, &[bi, k]) + f(&r, &[bi, k])).to_f64()).collect();
            want_res.extend(norm(&h));
            want_h.extend(h);
        }
        let (rx, rr, rw) = (x.raw(), r.raw(), w.raw());
        let mut y = Tensor::<bf16>::poisoned(&[b, d]);
        rms_norm(rd(&rx), rd(&rw), eps, wr(&y.raw_mut()));
        assert_close(&format!("rms_norm {b} x {d}"), &as_f32(&y), &want, 1e-2);
        let mut h = x.clone();
        let mut y = Tensor::<bf16>::poisoned(&[b, d]);
        rms_norm_residual(wr(&h.raw_mut()), rd(&rr), rd(&rw), eps, wr(&y.raw_mut()));
        assert_close(&format!("rms_norm_residual h {b} x {d}"), &as_f32(&h), &want_h, 0.0);
        assert_close(&format!("rms_norm_residual y {b} x {d}"), &as_f32(&y), &want_res, 1e-2);
        // three f32 splits of a projection summed with the residual r, then normalised
        let part = Tensor::<f32>::random(&[3, b, d], seed + 3);
        let (mut want_h, mut want_y) = (Vec::new(), Vec::new());
        for bi in 0..b {
            let sum = |k: usize| (0..3).map(|s| part.get(&[s, bi, k]) as f64).sum::<f64>();
            let h: Vec<f64> = (0..d).map(|k| bf16::from_f64(f(&r, &[bi, k]) + sum(k)).to_f64()).collect();
            want_y.extend(norm(&h));
            want_h.extend(h);
        }
        let rp = part.raw();
        let (mut h, mut y) = (Tensor::<bf16>::poisoned(&[b, d]), Tensor::<bf16>::poisoned(&[b, d]));
        rms_norm_split_residual(rd(&rp), rd(&rr), rd(&rw), eps, wr(&h.raw_mut()), wr(&y.raw_mut()));
        // the f32 sum of the splits may round differently from f64's at a bf16 boundary
        assert_close(&format!("rms_norm_split_residual h {b} x {d}"), &as_f32(&h), &want_h, 1e-2);
        assert_close(&format!("rms_norm_split_residual y {b} x {d}"), &as_f32(&y), &want_y, 1e-2);
    }
}

/// Hugging Face's `_compute_llama3_parameters`, written as there (vectorised `where`s).
fn hf_llama3_inv_freq(dim: usize, theta: f64, factor: f64, low: f64, high: f64, old: f64) -> Vec<f64> {
    let (low_wavelen, high_wavelen) = (old / low, old / high);
    (0..dim / 2)
        .map(|i| {
            let inv = 1.0 / theta.powf((2 * i) as f64 / dim as f64);
            let wavelen = 2.0 * std::f64::consts::PI / inv;
            let llama = if wavelen > low_wavelen { inv / factor } else { inv };
            let smooth = (old / wavelen - low) / (high - low);
            let smoothed = (1.0 - smooth) * llama / factor + smooth * llama;
            // HF: `~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)`
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            let medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
            if medium { smoothed } else { llama }
        })
        .collect()
}

#[test]
fn rope_llama3_matches_hf_and_kv_append_writes_one_row() {
    for (seed, (heads, d, pos)) in [(8, 128, 0), (4, 128, 17), (2, 64, 1000), (3, 128, 32767)].into_iter().enumerate() {
        let x = Tensor::<bf16>::random(&[heads, d], 200 + seed as u64);
        let inv = hf_llama3_inv_freq(d, 500000.0, 8.0, 1.0, 4.0, 8192.0);
        let mut want = Vec::new();
        for h in 0..heads {
            for e in 0..d {
                // rotate_half: (x1, x2) -> (-x2, x1) over the two halves
                let i = e % (d / 2);
                let (c, s) = ((pos as f64 * inv[i]).cos(), (pos as f64 * inv[i]).sin());
                let rot = if e < d / 2 { -f(&x, &[h, e + d / 2]) } else { f(&x, &[h, e - d / 2]) };
                want.push(f(&x, &[h, e]) * c + rot * s);
            }
        }
        let p = Tensor::from_vec(&[1], vec![pos as i32]).unwrap();
        let mut y = x.clone();
        rope_llama3(wr(&y.raw_mut()), rd(&p.raw()), 500000.0, 8.0, 1.0, 4.0, 8192.0);
        assert_close(&format!("rope_llama3 {heads} x {d} at {pos}"), &as_f32(&y), &want, 1e-2);

        let len = 1024.max(pos + 1);
        let mut cache = Tensor::<bf16>::random(&[heads, len, d], 300 + seed as u64);
        let before = cache.clone();
        kv_append(rd(&y.raw()), rd(&p.raw()), wr(&cache.raw_mut()));
        for h in 0..heads {
            for t in [0, pos.saturating_sub(1), pos, (pos + 1).min(len - 1)] {
                for e in 0..d {
                    let want = if t == pos { y.get(&[h, e]) } else { before.get(&[h, t, e]) };
                    assert_eq!(cache.get(&[h, t, e]), want, "kv_append head {h} position {t} column {e}");
                }
            }
        }
        // a position past the cache writes nothing
        let far = Tensor::from_vec(&[1], vec![len as i32]).unwrap();
        let snapshot = cache.clone();
        kv_append(rd(&y.raw()), rd(&far.raw()), wr(&cache.raw_mut()));
        assert_eq!(cache.as_slice(), snapshot.as_slice(), "kv_append past the end");
    }
}

#[test]
fn rope_llama3_and_kv_append_take_one_position_per_group_of_rows() {
    // 3 sequences of 5 heads at different positions, one past the cache (appends nothing)
    let (seqs, heads, d, len) = (3, 5, 64, 40);
    let positions = [7i32, 0, 40];
    let x = Tensor::<bf16>::random(&[seqs * heads, d], 400);
    let p = Tensor::from_vec(&[seqs], positions.to_vec()).unwrap();
    let mut grouped = x.clone();
    rope_llama3(wr(&grouped.raw_mut()), rd(&p.raw()), 500000.0, 8.0, 1.0, 4.0, 8192.0);
    let mut cache = Tensor::<bf16>::random(&[seqs * heads, len, d], 401);
    let before = cache.clone();
    kv_append(rd(&grouped.raw()), rd(&p.raw()), wr(&cache.raw_mut()));
    for (s, &pos) in positions.iter().enumerate() {
        // each group equals the one-position op on its rows alone
        let rows = s * heads..(s + 1) * heads;
        let mut alone = Tensor::from_vec(&[heads, d], x.as_slice()[rows.start * d..rows.end * d].to_vec()).unwrap();
        let one = Tensor::from_vec(&[1], vec![pos]).unwrap();
        rope_llama3(wr(&alone.raw_mut()), rd(&one.raw()), 500000.0, 8.0, 1.0, 4.0, 8192.0);
        assert_eq!(&grouped.as_slice()[rows.start * d..rows.end * d], alone.as_slice(), "rope group {s} at {pos}");
        for h in rows {
            for t in 0..len {
                for e in 0..d {
                    let want = if t as i32 == pos { grouped.get(&[h, e]) } else { before.get(&[h, t, e]) };
                    assert_eq!(cache.get(&[h, t, e]), want, "kv_append row {h} position {t} column {e}");
                }
            }
        }
    }
    // the contracts: groups must divide the rows
    assert!(rope_llama3::contract(&[&[15, 64], &[2], &[], &[], &[], &[], &[]]).is_err());
    assert!(kv_append::contract(&[&[15, 64], &[2], &[15, 40, 64]]).is_err());
    assert!(kv_append::contract(&[&[16, 64], &[2], &[16, 40, 64]]).is_ok());
    assert!(rope_llama3::contract(&[&[16, 4096], &[2], &[], &[], &[], &[], &[]]).is_err(), "head dim past the table");
    // the CUDA's table is the size the contract allows for
    let define = format!("#define ET_ROPE_TABLE_FLOATS {ROPE_TABLE_FLOATS}\n");
    assert!(rope_llama3::OP.cuda.contains(&define), "the CUDA's table size differs from ROPE_TABLE_FLOATS");
    const { assert!(!rope_llama3::OP.uses_smem, "the table is static shared memory, not the arena") };
}

#[test]
fn split_kv_attention_matches_f64_softmax_attention() {
    // (query heads per KV head, head dim, valid length, chunk)
    for (seed, (g, d, len, chunk)) in
        [(1, 64, 1, 256), (4, 128, 17, 8), (8, 64, 1000, 256), (2, 128, 1000, 1024), (8, 128, 17, 1024)]
            .into_iter()
            .enumerate()
    {
        let cap = 1024;
        let chunks = cap / chunk;
        let q = Tensor::<bf16>::random(&[g, d], 400 + seed as u64);
        let k = Tensor::<bf16>::random(&[1, cap, d], 500 + seed as u64);
        let v = Tensor::<bf16>::random(&[1, cap, d], 600 + seed as u64);
        let scale = 1.0 / (d as f64).sqrt();
        let mut want = Vec::new();
        for gi in 0..g {
            let s: Vec<f64> =
                (0..len).map(|p| scale * (0..d).map(|i| f(&q, &[gi, i]) * f(&k, &[0, p, i])).sum::<f64>()).collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for i in 0..d {
                want.push((0..len).map(|p| e[p] * f(&v, &[0, p, i])).sum::<f64>() / z);
            }
        }
        let n = Tensor::from_vec(&[1], vec![len as i32]).unwrap();
        let (rq, rk, rv, rn) = (q.raw(), k.raw(), v.raw(), n.raw());
        let mut o = Tensor::<f32>::poisoned(&[chunks * g, d]);
        let mut ml = Tensor::<f32>::poisoned(&[chunks * g, 2]);
        {
            let (ro, rml) = (o.raw_mut(), ml.raw_mut());
            // SAFETY: live host tensors of this test, each written only through its view.
            let (ot, mlt) = unsafe { (OutTensor::<f32>::bind(&ro), OutTensor::<f32>::bind(&rml)) };
            // SAFETY: live host tensors that nothing writes meanwhile.
            let (kt, vt) = unsafe { (InTensor::<bf16>::bind(&rk), InTensor::<bf16>::bind(&rv)) };
            for c in 0..chunks {
                attention_partial(
                    rd(&rq),
                    kt.tile([0, c as i64, 0], [1, chunk, d]),
                    vt.tile([0, c as i64, 0], [1, chunk, d]),
                    rd(&rn),
                    (c * chunk) as i64,
                    scale as f32,
                    ot.tile_mut([c as i64, 0], [g, d]),
                    mlt.tile_mut([c as i64, 0], [g, 2]),
                );
            }
        }
        // chunks past the length are empty: max -inf, sum 0, output 0
        for c in len.div_ceil(chunk)..chunks {
            for gi in 0..g {
                assert_eq!(ml.get(&[c * g + gi, 0]), f32::NEG_INFINITY, "chunk {c} max");
                assert_eq!(ml.get(&[c * g + gi, 1]), 0.0, "chunk {c} sum");
                assert!((0..d).all(|i| o.get(&[c * g + gi, i]) == 0.0), "chunk {c} output");
            }
        }
        let mut out = Tensor::<bf16>::poisoned(&[g, d]);
        attention_merge::<bf16>(rd(&o.raw()), rd(&ml.raw()), wr(&out.raw_mut()));
        assert_close(&format!("attention g {g}, d {d}, length {len}, chunk {chunk}"), &as_f32(&out), &want, 1e-2);
    }
}

#[test]
fn rope_split_attention_and_kv_append_match_f64_attention_over_the_appended_cache() {
    let rope = (500000.0f32, 8.0f32, 1.0f32, 4.0f32, 8192.0f32);
    // (query heads per KV head, head dim, position, pieces): lengths 1, 17, 1000 and a
    // piece count above the length (empty pieces)
    for (seed, (g, d, pos, parts)) in
        [(1, 64, 0, 16), (4, 128, 16, 16), (8, 64, 999, 16), (2, 128, 999, 3), (4, 64, 5, 8)].into_iter().enumerate()
    {
        let cap = 1024;
        let qkv = Tensor::<bf16>::random(&[1, (g + 2) * d], 700 + seed as u64);
        let kc = Tensor::<bf16>::random(&[1, cap, d], 800 + seed as u64);
        let vc = Tensor::<bf16>::random(&[1, cap, d], 900 + seed as u64);
        let p = Tensor::from_vec(&[1], vec![pos as i32]).unwrap();
        let inv = hf_llama3_inv_freq(d, rope.0 as f64, rope.1 as f64, rope.2 as f64, rope.3 as f64, rope.4 as f64);
        // the head's rows rotated at `pos` in f64, rounded to bf16 as the op stores them
        let rotated = |h: usize| -> Vec<f64> {
            (0..d)
                .map(|e| {
                    let (i, x) = (e % (d / 2), f(&qkv, &[0, h * d + e]));
                    let (c, s) = ((pos as f64 * inv[i]).cos(), (pos as f64 * inv[i]).sin());
                    let rot =
                        if e < d / 2 { -f(&qkv, &[0, h * d + e + d / 2]) } else { f(&qkv, &[0, h * d + e - d / 2]) };
                    bf16::from_f32((x * c + rot * s) as f32).to_f32() as f64
                })
                .collect()
        };
        let key = rotated(g);
        let value: Vec<f64> = (0..d).map(|e| f(&qkv, &[0, (g + 1) * d + e])).collect();
        let kv =
            |t: usize, e: usize| if t == pos { (key[e], value[e]) } else { (f(&kc, &[0, t, e]), f(&vc, &[0, t, e])) };
        let scale = 1.0 / (d as f64).sqrt();
        let mut want = Vec::new();
        for h in 0..g {
            let q = rotated(h);
            let s: Vec<f64> = (0..=pos).map(|t| scale * (0..d).map(|e| q[e] * kv(t, e).0).sum::<f64>()).collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = s.iter().map(|s| (s - m).exp()).collect();
            let z: f64 = w.iter().sum();
            for e in 0..d {
                want.push((0..=pos).map(|t| w[t] * kv(t, e).1).sum::<f64>() / z);
            }
        }
        let mut cs = Tensor::<f32>::poisoned(&[1, d]);
        rope_table(rd(&p.raw()), rope.0, rope.1, rope.2, rope.3, rope.4, wr(&cs.raw_mut()));
        for (e, f) in inv.iter().enumerate() {
            let angle = pos as f64 * f;
            assert!((cs.get(&[0, e]) as f64 - angle.cos()).abs() < 1e-6, "rope_table cosine {e} at {pos}");
            assert!((cs.get(&[0, e + d / 2]) as f64 - angle.sin()).abs() < 1e-6, "rope_table sine {e} at {pos}");
        }
        let mut o = Tensor::<f32>::poisoned(&[parts * g, d]);
        let mut ml = Tensor::<f32>::poisoned(&[parts * g, 2]);
        {
            let (ro, rml) = (o.raw_mut(), ml.raw_mut());
            // SAFETY: live host tensors of this test, each written only through its view.
            let (ot, mlt) = unsafe { (OutTensor::<f32>::bind(&ro), OutTensor::<f32>::bind(&rml)) };
            for c in 0..parts {
                attention_rope_split(
                    rd(&qkv.raw()),
                    rd(&p.raw()),
                    rd(&cs.raw()),
                    c as i64,
                    parts as i64,
                    scale as f32,
                    rd(&kc.raw()),
                    rd(&vc.raw()),
                    ot.tile_mut([c as i64, 0], [g, d]),
                    mlt.tile_mut([c as i64, 0], [g, 2]),
                );
            }
        }
        // a piece with no position: max -inf, sum 0, output 0
        for c in (0..parts).filter(|c| c * (pos + 1) / parts == (c + 1) * (pos + 1) / parts) {
            assert_eq!(ml.get(&[c * g, 1]), 0.0, "piece {c} of {parts} at position {pos}: sum");
            assert_eq!(ml.get(&[c * g, 0]), f32::NEG_INFINITY, "piece {c} of {parts} at position {pos}: max");
        }
        let mut out = Tensor::<bf16>::poisoned(&[1, g * d]);
        attention_merge::<bf16>(rd(&o.raw()), rd(&ml.raw()), wr(&out.raw_mut()));
        assert_close(
            &format!("split attention g {g}, d {d}, position {pos}, {parts} pieces"),
            &as_f32(&out),
            &want,
            1e-2,
        );

        // the append: the rotated key and the value at `pos`, nothing else
        let (mut kc2, mut vc2) = (kc.clone(), vc.clone());
        attention_kv_append(rd(&qkv.raw()), rd(&p.raw()), rd(&cs.raw()), wr(&kc2.raw_mut()), wr(&vc2.raw_mut()));
        for t in [0, pos.saturating_sub(1), pos, pos + 1] {
            for e in 0..d {
                let (k, v) = kv(t, e);
                // (the op rotates in f32, the reference in f64: a rounding may differ by an ulp)
                let got = kc2.get(&[0, t, e]).to_f32() as f64;
                assert!(
                    (got - k).abs() <= 1e-2 * k.abs().max(1.0),
                    "appended key: position {t}, column {e}: {got} != {k}"
                );
                assert_eq!(vc2.get(&[0, t, e]).to_f32() as f64, v, "appended value: position {t}, column {e}");
            }
        }
        let far = Tensor::from_vec(&[1], vec![cap as i32]).unwrap();
        let snapshot = kc2.clone();
        attention_kv_append(rd(&qkv.raw()), rd(&far.raw()), rd(&cs.raw()), wr(&kc2.raw_mut()), wr(&vc2.raw_mut()));
        assert_eq!(kc2.as_slice(), snapshot.as_slice(), "attention_kv_append past the end");
    }
}

#[test]
fn embedding_argmax_and_elementwise_match_f64() {
    let (v, d) = (1000, 4104);
    let table = Tensor::<bf16>::random(&[v, d], 700);
    let ids = Tensor::from_vec(&[4], vec![3, 999, -1, 1000]).unwrap();
    let mut out = Tensor::<bf16>::poisoned(&[4, d]);
    embed(rd(&table.raw()), rd(&ids.raw()), wr(&out.raw_mut()));
    for (b, id) in [3i64, 999, -1, 1000].into_iter().enumerate() {
        for k in 0..d {
            let want = if (0..v as i64).contains(&id) { table.get(&[id as usize, k]) } else { bf16::ZERO };
            assert_eq!(out.get(&[b, k]), want, "embed row {b} (id {id}) column {k}");
        }
    }

    // argmax over Llama 3's vocabulary in 32 chunks of 4008, with ties and NaN
    let (batch, vocab, chunk) = (3, 128256, 4008);
    let mut logits = Tensor::<bf16>::random(&[batch, vocab], 701);
    logits.set(&[0, 77], bf16::from_f32(9.0));
    logits.set(&[0, 128000], bf16::from_f32(9.0)); // a tie in another chunk: the first wins
    logits.set(&[1, 4008 * 7], bf16::from_f32(5.0)); // the first entry of a chunk
    logits.set(&[1, 3], bf16::NAN); // NaN is never chosen
    logits.set(&[2, vocab - 1], bf16::from_f32(3.0)); // the last entry
    let want: Vec<i32> = (0..batch)
        .map(|b| {
            let mut best = (f64::NEG_INFINITY, -1i32);
            for c in 0..vocab {
                let x = f(&logits, &[b, c]);
                if x > best.0 {
                    best = (x, c as i32);
                }
            }
            best.1
        })
        .collect();
    assert_eq!(want, [77, 4008 * 7, vocab as i32 - 1]);
    let chunks = vocab / chunk;
    let mut best = Tensor::<f32>::poisoned(&[batch, chunks]);
    let mut index = Tensor::<i32>::poisoned(&[batch, chunks]);
    {
        let (rb, ri, rl) = (best.raw_mut(), index.raw_mut(), logits.raw());
        // SAFETY: live host tensors of this test, each written only through its view.
        let (bt, it, lt) =
            unsafe { (OutTensor::<f32>::bind(&rb), OutTensor::<i32>::bind(&ri), InTensor::<bf16>::bind(&rl)) };
        for s in 0..chunks {
            argmax_partial(
                lt.tile([0, s as i64], [batch, chunk]),
                (s * chunk) as i64,
                bt.tile_mut([0, s as i64], [batch, 1]),
                it.tile_mut([0, s as i64], [batch, 1]),
            );
        }
    }
    let mut token = Tensor::<i32>::poisoned(&[batch]);
    argmax_merge(rd(&best.raw()), rd(&index.raw()), wr(&token.raw_mut()));
    assert_eq!(token.as_slice(), want.as_slice(), "argmax");

    let (a, b) = (Tensor::<bf16>::random(&[3, 4104], 702), Tensor::<bf16>::random(&[3, 4104], 703));
    let mut sum = Tensor::<bf16>::poisoned(&[3, 4104]);
    elementwise_add(rd(&a.raw()), rd(&b.raw()), wr(&sum.raw_mut()));
    let want: Vec<f64> = a.as_slice().iter().zip(b.as_slice()).map(|(x, y)| x.to_f64() + y.to_f64()).collect();
    assert_close("elementwise_add", &as_f32(&sum), &want, 1e-2);
    let mut scaled = Tensor::<bf16>::poisoned(&[3, 4104]);
    elementwise_scale(rd(&a.raw()), -0.75, wr(&scaled.raw_mut()));
    let want: Vec<f64> = a.as_slice().iter().map(|x| -0.75 * x.to_f64()).collect();
    assert_close("elementwise_scale", &as_f32(&scaled), &want, 1e-2);
}

/// A contract violation as `#[megakernel]` reports it at compile time.
fn call_error(op: &et_core::TileOp, extents: &[&[usize]]) -> String {
    let text = extents.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(", ");
    let verdict = (op.contract)(extents);
    et_core::__private::call_error(op, op.name, &text, verdict).map(|m| m.as_str().to_string()).unwrap_or_default()
}

#[test]
fn contract_violations_name_the_op_and_the_extents() {
    let cases: [(&et_core::TileOp, &[&[usize]], &str); 19] = [
        (&matvec::OP, &[&[64, 4096], &[1, 4095], &[1, 64]], "as many columns as w"),
        (&matvec::OP, &[&[64, 4096], &[65, 4096], &[65, 64]], "batch"),
        (&matvec_residual::OP, &[&[64, 32], &[2, 32], &[2, 63], &[2, 64]], "residual"),
        (&matvec_silu::OP, &[&[64, 32], &[32, 32], &[2, 32], &[2, 64]], "same extents"),
        (&matvec_split::OP, &[&[64, 32], &[2, 32], &[2, 2, 64]], "one split"),
        (&reduce_split::OP, &[&[4, 2, 63], &[2, 64]], "S splits"),
        (&rms_norm::OP, &[&[2, 4096], &[4095], &[], &[2, 4096]], "one element per column"),
        (&rms_norm_residual::OP, &[&[2, 64], &[2, 64], &[64], &[], &[1, 64]], "h's extents"),
        (&rms_norm_split_residual::OP, &[&[4, 2, 63], &[2, 64], &[64], &[], &[2, 64], &[2, 64]], "S splits of h's"),
        (&rms_norm_split_residual::OP, &[&[4, 2, 64], &[2, 64], &[64], &[], &[2, 64], &[1, 64]], "y must have h's"),
        (&rope_llama3::OP, &[&[4, 127], &[1], &[], &[], &[], &[], &[]], "even"),
        (&kv_append::OP, &[&[4, 128], &[1], &[4, 1024, 64]], "cache must be"),
        (
            &attention_kv_append::OP,
            &[&[1, 1280], &[1], &[1, 64], &[3, 1024, 64], &[3, 1024, 64]],
            "each of kc's KV heads",
        ),
        (
            &attention_partial::OP,
            &[&[4, 96], &[1, 64, 96], &[1, 64, 96], &[1], &[], &[], &[4, 96], &[4, 2]],
            "64 or 128",
        ),
        (&attention_partial::OP, &[&[9, 64], &[1, 64, 64], &[1, 64, 64], &[1], &[], &[], &[9, 64], &[9, 2]], "1 to 8"),
        (&attention_merge::OP, &[&[30, 64], &[30, 2], &[4, 64]], "whole chunks"),
        (&argmax_partial::OP, &[&[2, 4008], &[], &[2, 1], &[3, 1]], "index must be"),
        (
            &attention_merge_matvec_residual::OP,
            &[&[16, 2048], &[250, 64], &[250, 2], &[], &[1, 16], &[1, 16]],
            "S pieces of every query head",
        ),
        (
            &attention_merge_matvec_residual::OP,
            &[&[16, 2000], &[256, 64], &[256, 2], &[], &[1, 16], &[1, 16]],
            "whole heads",
        ),
    ];
    for (op, extents, why) in cases {
        let m = call_error(op, extents);
        assert!(m.contains(&format!("tile op `{}`", op.name)) && m.contains(why), "{}: {m}", op.name);
        assert!(m.contains(&format!("{:?}", extents[0])), "{}: the message names the extents: {m}", op.name);
    }
    // and the shapes the ops are for pass
    assert_eq!(matvec::contract(&[&[72, 4104], &[64, 4104], &[64, 72]]), Ok(()));
    assert_eq!(
        attention_partial::contract(&[&[8, 128], &[1, 1024, 128], &[1, 1024, 128], &[1], &[], &[], &[8, 128], &[8, 2]]),
        Ok(())
    );
    assert_eq!(embed::contract(&[&[128256, 4096], &[16], &[16, 4096]]), Ok(()));
    assert_eq!(
        attention_merge_matvec_residual::contract(&[&[16, 2048], &[256, 64], &[256, 2], &[], &[1, 16], &[1, 16]]),
        Ok(())
    );
    assert_eq!(elementwise_add::contract(&[&[2, 8], &[2, 8], &[2, 7]]), Err("a, b and out must have the same extents"));
    assert!(elementwise_scale::contract(&[&[2, 8], &[], &[8, 2]]).is_err());
    assert!(reduce_split_residual::contract(&[&[4, 2, 64], &[2, 63], &[2, 64]]).is_err());
    assert!(argmax_merge::contract(&[&[2, 32], &[2, 32], &[3]]).is_err());
}

#[test]
#[should_panic(expected = "tile op `matvec`: the batch (x's rows) must be 1 to 64")]
fn the_cpu_reference_refuses_a_batch_above_64() {
    let (w, x) = (Tensor::<bf16>::zeros(&[8, 16]), Tensor::<bf16>::zeros(&[65, 16]));
    let mut y = Tensor::<f32>::zeros(&[65, 8]);
    matvec::<f32>(rd(&w.raw()), rd(&x.raw()), wr(&y.raw_mut()));
}

#[test]
fn the_simt_attention_ops_take_what_their_tensor_core_forms_take() {
    // qkv, pos, cs, part, parts, scale, kc, vc, o, ml: G 4 x D 128, then a bad head dim
    let split: [&[&[usize]]; 3] = [
        &[&[1, 768], &[1], &[1, 128], &[], &[], &[], &[1, 1024, 128], &[1, 1024, 128], &[4, 128], &[4, 2]],
        &[&[1, 576], &[1], &[1, 96], &[], &[], &[], &[1, 1024, 96], &[1, 1024, 96], &[4, 96], &[4, 2]],
        &[&[1, 768], &[1], &[1, 128], &[], &[], &[], &[1, 1024, 64], &[1, 1024, 128], &[4, 128], &[4, 2]],
    ];
    for extents in split {
        assert_eq!(attention_rope_split_lazy_simt::contract(extents), attention_rope_split_lazy::contract(extents));
    }
    assert_eq!(attention_rope_split_lazy_simt::contract(split[0]), Ok(()));
    // qkv, pos, cs, scale, kc, vc, out: 3 KV heads of G 2 x D 128, then 9 heads
    let heads: [&[&[usize]]; 2] = [
        &[&[1, 1536], &[1], &[1, 128], &[], &[3, 1024, 128], &[3, 1024, 128], &[1, 768]],
        &[&[1, 4608], &[1], &[1, 128], &[], &[9, 1024, 128], &[9, 1024, 128], &[1, 2304]],
    ];
    for extents in heads {
        assert_eq!(attention_rope_heads_simt::contract(extents), attention_rope_heads::contract(extents));
    }
    assert_eq!(attention_rope_heads_simt::contract(heads[0]), Ok(()));
    assert!(call_error(&attention_rope_heads_simt::OP, heads[1]).contains("1 to 8"));
    // the CUDA of each form is its own function
    for (tc, simt) in [
        (&attention_rope_split_lazy::OP, &attention_rope_split_lazy_simt::OP),
        (&attention_rope_heads::OP, &attention_rope_heads_simt::OP),
    ] {
        assert!(
            simt.cuda.contains(&format!("void {}(", simt.name)) && !simt.cuda.contains(&format!("void {}(", tc.name))
        );
    }
}

/// Split-KV pieces as the split ops leave them for `batch` sequences of `nkv` KV heads of
/// `g` query heads, `s` pieces each: random unnormalised outputs, maxima in [-4, 4], sums
/// in (0, 8], and every fifth piece empty (max -inf, sum 0, output 0).
fn random_pieces(batch: usize, nkv: usize, g: usize, d: usize, s: usize, seed: u64) -> (Tensor<f32>, Tensor<f32>) {
    let rows = batch * nkv * s * g;
    let mut o = Tensor::<f32>::random(&[rows, d], seed);
    let u = Tensor::<f32>::random(&[rows, 2], seed + 1);
    let mut ml = Vec::with_capacity(rows * 2);
    for r in 0..rows {
        let piece = r / g;
        if piece % 5 == 4 {
            ml.extend([f32::NEG_INFINITY, 0.0]);
            (0..d).for_each(|i| o.set(&[r, i], 0.0));
        } else {
            ml.extend([4.0 * u.get(&[r, 0]), 4.0 * (u.get(&[r, 1]) + 1.0) + 1e-3]);
        }
    }
    (o, Tensor::from_vec(&[rows, 2], ml).unwrap())
}

#[test]
fn merge_fused_output_projection_matches_f64_and_the_two_ops_it_fuses() {
    // (batch, KV heads, query heads per KV head, head dim, pieces, weight rows): Llama's
    // 1B step, odd head counts and dims, one piece, more pieces than a round of eight
    let shapes = [(1, 8, 4, 64, 8, 16), (3, 2, 3, 72, 5, 20), (2, 4, 1, 128, 1, 9), (9, 1, 2, 8, 11, 33)];
    for (seed, (b, nkv, g, d, s, n)) in shapes.into_iter().enumerate() {
        let seed = 900 + 10 * seed as u64;
        let k = nkv * g * d;
        let (o, ml) = random_pieces(b, nkv, g, d, s, seed);
        let w = Tensor::<bf16>::random(&[n, k], seed + 2);
        let r = Tensor::<bf16>::random(&[b, n], seed + 3);
        // f64: each head's merge (rounded to bf16, as the step stores it), then the GEMV
        let mut x = vec![0f64; b * k];
        for bi in 0..b {
            for hq in 0..nkv * g {
                let rows: Vec<usize> = (0..s)
                    .map(|c| ((bi * nkv + hq / g) * s + c) * g + hq % g)
                    .filter(|&r| ml.get(&[r, 1]) > 0.0)
                    .collect();
                let mx = rows.iter().map(|&r| ml.get(&[r, 0]) as f64).fold(f64::NEG_INFINITY, f64::max);
                let den: f64 = rows.iter().map(|&r| (ml.get(&[r, 0]) as f64 - mx).exp() * ml.get(&[r, 1]) as f64).sum();
                for i in 0..d {
                    let num: f64 =
                        rows.iter().map(|&r| (ml.get(&[r, 0]) as f64 - mx).exp() * o.get(&[r, i]) as f64).sum();
                    x[bi * k + hq * d + i] =
                        if den > 0.0 { bf16::from_f32((num / den) as f32).to_f32() as f64 } else { 0.0 };
                }
            }
        }
        let want: Vec<f64> = (0..b)
            .flat_map(|bi| (0..n).map(move |j| (bi, j)))
            .map(|(bi, j)| f(&r, &[bi, j]) + (0..k).map(|p| x[bi * k + p] * f(&w, &[j, p])).sum::<f64>())
            .collect();
        let mut y = Tensor::<bf16>::poisoned(&[b, n]);
        let (ro, rml, rw, rr) = (o.raw(), ml.raw(), w.raw(), r.raw());
        attention_merge_matvec_residual::<bf16>(rd(&rw), rd(&ro), rd(&rml), g as i64, rd(&rr), wr(&y.raw_mut()));
        let what = format!("batch {b}, {nkv} x {g} heads of {d}, {s} pieces");
        assert_close(&what, &as_f32(&y), &want, 2e-2);
        // the same values as attention_merge per KV head, then matvec_residual
        let mut attn = Tensor::<bf16>::poisoned(&[b, k]);
        {
            let (ra, rml) = (attn.raw_mut(), ml.raw());
            // SAFETY: live host tensors of this test, each written only through its view.
            let at = unsafe { OutTensor::<bf16>::bind(&ra) };
            // SAFETY: live host tensors that nothing writes meanwhile.
            let (ot, mlt) = unsafe { (InTensor::<f32>::bind(&ro), InTensor::<f32>::bind(&rml)) };
            for bi in 0..b {
                for kv in 0..nkv {
                    let piece = (bi * nkv + kv) as i64;
                    attention_merge::<bf16>(
                        ot.tile([piece, 0], [s * g, d]),
                        mlt.tile([piece, 0], [s * g, 2]),
                        at.tile_mut([bi as i64, kv as i64], [1, g * d]),
                    );
                }
            }
        }
        let mut y2 = Tensor::<bf16>::poisoned(&[b, n]);
        matvec_residual::<bf16>(rd(&rw), rd(&attn.raw()), rd(&rr), wr(&y2.raw_mut()));
        assert_eq!(y.as_slice(), y2.as_slice(), "{what}: the fused op against merge then matvec_residual");
    }
}

#[test]
fn a_group_count_that_does_not_divide_the_heads_merges_to_zeros() {
    let (o, ml) = random_pieces(1, 3, 2, 8, 2, 77);
    let (w, r) = (Tensor::<bf16>::random(&[4, 48], 78), Tensor::<bf16>::random(&[1, 4], 79));
    let mut y = Tensor::<bf16>::poisoned(&[1, 4]);
    attention_merge_matvec_residual::<bf16>(
        rd(&w.raw()),
        rd(&o.raw()),
        rd(&ml.raw()),
        5,
        rd(&r.raw()),
        wr(&y.raw_mut()),
    );
    assert_eq!(y.as_slice(), r.as_slice(), "x = 0: y is the residual");
}

#[test]
fn a_kv_append_of_several_heads_is_the_append_of_each_head() {
    // (KV heads, query heads per KV head, head dim, position)
    for (seed, (heads, g, d, pos)) in [(3, 4, 64, 17), (2, 1, 128, 0), (8, 4, 64, 1023)].into_iter().enumerate() {
        let seed = 1000 + 10 * seed as u64;
        let (cap, row) = (1024, (g + 2) * d);
        let qkv = Tensor::<bf16>::random(&[1, heads * row], seed);
        let (kc, vc) =
            (Tensor::<bf16>::random(&[heads, cap, d], seed + 1), Tensor::<bf16>::random(&[heads, cap, d], seed + 2));
        let p = Tensor::from_vec(&[1], vec![pos]).unwrap();
        let mut cs = Tensor::<f32>::poisoned(&[1, d]);
        rope_table(rd(&p.raw()), 500000.0, 8.0, 1.0, 4.0, 8192.0, wr(&cs.raw_mut()));
        let (mut k_all, mut v_all) = (kc.clone(), vc.clone());
        attention_kv_append(rd(&qkv.raw()), rd(&p.raw()), rd(&cs.raw()), wr(&k_all.raw_mut()), wr(&v_all.raw_mut()));
        let (mut k_one, mut v_one) = (kc.clone(), vc.clone());
        {
            let (rq, rk, rv) = (qkv.raw(), k_one.raw_mut(), v_one.raw_mut());
            // SAFETY: live host tensors of this test, each written only through its view.
            let (kt, vt) = unsafe { (OutTensor::<bf16>::bind(&rk), OutTensor::<bf16>::bind(&rv)) };
            // SAFETY: a live host tensor that nothing writes meanwhile.
            let qt = unsafe { InTensor::<bf16>::bind(&rq) };
            for h in 0..heads {
                attention_kv_append(
                    qt.tile([0, h as i64], [1, row]),
                    rd(&p.raw()),
                    rd(&cs.raw()),
                    kt.tile_mut([h as i64, 0, 0], [1, cap, d]),
                    vt.tile_mut([h as i64, 0, 0], [1, cap, d]),
                );
            }
        }
        assert_eq!(k_all.as_slice(), k_one.as_slice(), "{heads} heads of {g} x {d}: keys");
        assert_eq!(v_all.as_slice(), v_one.as_slice(), "{heads} heads of {g} x {d}: values");
        assert_ne!(k_all.as_slice(), kc.as_slice(), "{heads} heads of {g} x {d}: the append wrote the keys");
    }
}
