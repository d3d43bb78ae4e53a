//! The megakernels that `ops_bench` times: the decode operators at Llama-3.1-8B shapes,
//! one megakernel per static shape (tile extents must be literals or static dims, and the
//! batch is a static dim), stamped out by `macro_rules!`.
//!
//! Every GEMV kernel is a *layer loop*: `L` layers of the same GEMV over stacked weights
//! `[L * N, K]`, layer `l + 1`'s tasks waiting for all of layer `l`'s (a range wait), as
//! the layers of a decode step do. `L` is symbolic, so the same kernel is the standalone
//! GEMV (`L = 1`: one launch of one GEMV) and the resident one (`L` layers in one launch,
//! launch ramp-up and tail amortised). Each layer reads the same `x` (the chain is through
//! events only: the shapes are not square, and what is timed is the weight stream). A
//! layer's task starts copying its weights into shared memory (`matvec_prefetch`) before
//! it waits for the previous layer (the prefetch-before-wait form); the `_np` kernels
//! leave the prefetch out, as the Llama step's and the MoE layer's GEMVs do (their weights
//! then stream through the GEMV's own path: at batch 1 the `cp.async` ring).

use et_core::prelude::*;

/// Plain GEMV `y[l] = x · W[l]ᵀ` (`matvec`), `RT` tasks of `NT` weight rows per layer.
macro_rules! gemv_kernel {
    ($name:ident, bt = $bt:literal, kd = $kd:literal, nt = $nt:literal, rt = $rt:literal) => {
        gemv_kernel!($name, bt = $bt, kd = $kd, nt = $nt, rt = $rt, prefetch = [matvec_prefetch]);
    };
    // `prefetch = []`: the layers' tasks copy nothing before their wait
    ($name:ident, bt = $bt:literal, kd = $kd:literal, nt = $nt:literal, rt = $rt:literal, prefetch = [$($pf:ident)?]) => {
        /// `matvec` layer loop (see the module doc): batch, reduced extent, rows per task
        /// and tasks per layer are
        #[doc = stringify!($bt, $kd, $nt, $rt)]
        #[megakernel(dims(BT = $bt, KD = $kd, NT = $nt, RT = $rt))]
        pub fn $name(
            w: &Tensor<bf16, { [L * RT * NT, KD] }>,
            x: &Tensor<bf16, { [BT, KD] }>,
            y: &mut Tensor<bf16, { [L * BT, RT * NT] }>,
        ) {
            let done = event!([L, RT]);
            tile!(first[r] in [RT] {
                matvec(w.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), y.tile([0, r], [BT, NT]));
                signal!(done[0, r]);
            });
            tile!(layer[l, r] in [L - 1, RT] {
                // with a prefetch, the weights start moving while the previous layer still runs
                $($pf(w.tile([(l + 1) * RT + r, 0], [NT, KD]), BT);)?
                wait!(done[l, ..]);
                matvec(w.tile([(l + 1) * RT + r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), y.tile([l + 1, r], [BT, NT]));
                signal!(done[l + 1, r]);
            });
        }
    };
}

/// Gated MLP up-projection `y[l] = silu(x · G[l]ᵀ) * (x · U[l]ᵀ)` (`matvec_silu`).
macro_rules! silu_kernel {
    ($name:ident, bt = $bt:literal, kd = $kd:literal, nt = $nt:literal, rt = $rt:literal) => {
        silu_kernel!($name, bt = $bt, kd = $kd, nt = $nt, rt = $rt, prefetch = [matvec_prefetch_pair]);
    };
    // `prefetch = []`: the layers' tasks copy nothing before their wait
    ($name:ident, bt = $bt:literal, kd = $kd:literal, nt = $nt:literal, rt = $rt:literal, prefetch = [$($pf:ident)?]) => {
        /// `matvec_silu` layer loop (see the module doc): batch, reduced extent, rows per
        /// task and tasks per layer are
        #[doc = stringify!($bt, $kd, $nt, $rt)]
        #[megakernel(dims(BT = $bt, KD = $kd, NT = $nt, RT = $rt))]
        pub fn $name(
            wg: &Tensor<bf16, { [L * RT * NT, KD] }>,
            wu: &Tensor<bf16, { [L * RT * NT, KD] }>,
            x: &Tensor<bf16, { [BT, KD] }>,
            y: &mut Tensor<bf16, { [L * BT, RT * NT] }>,
        ) {
            let done = event!([L, RT]);
            tile!(first[r] in [RT] {
                matvec_silu(wg.tile([r, 0], [NT, KD]), wu.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), y.tile([0, r], [BT, NT]));
                signal!(done[0, r]);
            });
            tile!(layer[l, r] in [L - 1, RT] {
                $($pf(wg.tile([(l + 1) * RT + r, 0], [NT, KD]), wu.tile([(l + 1) * RT + r, 0], [NT, KD]), BT);)?
                wait!(done[l, ..]);
                matvec_silu(
                    wg.tile([(l + 1) * RT + r, 0], [NT, KD]),
                    wu.tile([(l + 1) * RT + r, 0], [NT, KD]),
                    x.tile([0, 0], [BT, KD]),
                    y.tile([l + 1, r], [BT, NT]),
                );
                signal!(done[l + 1, r]);
            });
        }
    };
}

/// Split-K GEMV: `RT x S` tasks of `NT` rows by `KS` columns write f32 partials
/// (`matvec_split`), `RT x 8` reducers of `NT / 8` columns each wait for their row tile's
/// `S` splits (`reduce_split`); the next layer's splits wait for all of this layer's
/// reducers. Each layer has its own partial buffer (no reuse, no write-after-read).
macro_rules! splitk_kernel {
    ($name:ident, bt = $bt:literal, nt = $nt:literal, rt = $rt:literal, s = $s:literal, ks = $ks:literal, nr = $nr:literal) => {
        /// split-K `matvec_split` + `reduce_split` layer loop: batch, rows per task, row
        /// tiles, splits, split width, reducer columns are
        #[doc = stringify!($bt, $nt, $rt, $s, $ks, $nr)]
        #[megakernel(dims(BT = $bt, NT = $nt, RT = $rt, S = $s, KS = $ks, NR = $nr))]
        pub fn $name(
            w: &Tensor<bf16, { [L * RT * NT, S * KS] }>,
            x: &Tensor<bf16, { [BT, S * KS] }>,
            part: &mut Tensor<f32, { [L * S, BT, RT * NT] }>,
            y: &mut Tensor<bf16, { [L * BT, RT * NT] }>,
        ) {
            let parts = event!([L, RT]);
            let done = event!([L, RT * 8]);
            tile!(split0[r, s] in [RT, S] {
                matvec_split(w.tile([r, s], [NT, KS]), x.tile([0, s], [BT, KS]), part.tile([s, 0, r], [1, BT, NT]));
                signal!(parts[0, r]);
            });
            tile!(split[l, r, s] in [L - 1, RT, S] {
                wait!(done[l, ..]);
                matvec_split(
                    w.tile([(l + 1) * RT + r, s], [NT, KS]),
                    x.tile([0, s], [BT, KS]),
                    part.tile([(l + 1) * S + s, 0, r], [1, BT, NT]),
                );
                signal!(parts[l + 1, r]);
            });
            tile!(reduce[l, r, j] in [L, RT, 8] {
                wait!(parts[l, r]);
                reduce_split(part.tile([l, 0, r * 8 + j], [S, BT, NR]), y.tile([l, r * 8 + j], [BT, NR]));
                signal!(done[l, r * 8 + j]);
            });
        }
    };
}

// Rows per task: N / 128 (one task per SM for 128 of the 132 SMs). No split of N rows can
// give the busiest SM fewer than ceil(N / 132) rows, and the tensor-core path works in
// 16-row units (k split across warps where a task has fewer units than warps), so finer tiles only add tasks (`ops_bench` shows 16 and 64 for 4096 too).
gemv_kernel!(gemv_q_b1, bt = 1, kd = 4096, nt = 32, rt = 128);
gemv_kernel!(gemv_q_b16, bt = 16, kd = 4096, nt = 32, rt = 128);
gemv_kernel!(gemv_q_b64, bt = 64, kd = 4096, nt = 32, rt = 128);
gemv_kernel!(gemv_qkv_b1, bt = 1, kd = 4096, nt = 48, rt = 128);
gemv_kernel!(gemv_qkv_b8, bt = 8, kd = 4096, nt = 48, rt = 128);
gemv_kernel!(gemv_qkv_b16, bt = 16, kd = 4096, nt = 48, rt = 128);
gemv_kernel!(gemv_qkv_b64, bt = 64, kd = 4096, nt = 48, rt = 128);
gemv_kernel!(gemv_down_b1, bt = 1, kd = 14336, nt = 32, rt = 128);
gemv_kernel!(gemv_down_b8, bt = 8, kd = 14336, nt = 32, rt = 128);
gemv_kernel!(gemv_down_b16, bt = 16, kd = 14336, nt = 32, rt = 128);
gemv_kernel!(gemv_down_b64, bt = 64, kd = 14336, nt = 32, rt = 128);
silu_kernel!(gemv_gateup_b1, bt = 1, kd = 4096, nt = 112, rt = 128);
silu_kernel!(gemv_gateup_b8, bt = 8, kd = 4096, nt = 112, rt = 128);
silu_kernel!(gemv_gateup_b16, bt = 16, kd = 4096, nt = 112, rt = 128);
silu_kernel!(gemv_gateup_b64, bt = 64, kd = 4096, nt = 112, rt = 128);
// batch 1 without the prefetch (the Llama step's form): the weights through the GEMV's ring
gemv_kernel!(gemv_q_b1_np, bt = 1, kd = 4096, nt = 32, rt = 128, prefetch = []);
gemv_kernel!(gemv_qkv_b1_np, bt = 1, kd = 4096, nt = 48, rt = 128, prefetch = []);
gemv_kernel!(gemv_down_b1_np, bt = 1, kd = 14336, nt = 32, rt = 128, prefetch = []);
silu_kernel!(gemv_gateup_b1_np, bt = 1, kd = 4096, nt = 112, rt = 128, prefetch = []);
// the tile-size sweep of 4096 -> 4096
gemv_kernel!(gemv_q_b1_nt16, bt = 1, kd = 4096, nt = 16, rt = 256);
gemv_kernel!(gemv_q_b1_nt64, bt = 1, kd = 4096, nt = 64, rt = 64);
gemv_kernel!(gemv_q_b16_nt16, bt = 16, kd = 4096, nt = 16, rt = 256);
gemv_kernel!(gemv_q_b16_nt64, bt = 16, kd = 4096, nt = 64, rt = 64);
// split-K: 256 (192) rows per task keep all 16 warps of the tensor-core path busy (16 rows
// each), the K splits bring the task count to 128
splitk_kernel!(splitk_q_b16, bt = 16, nt = 256, rt = 16, s = 8, ks = 512, nr = 32);
splitk_kernel!(splitk_q_b64, bt = 64, nt = 256, rt = 16, s = 8, ks = 512, nr = 32);
splitk_kernel!(splitk_qkv_b16, bt = 16, nt = 192, rt = 32, s = 4, ks = 1024, nr = 24);
splitk_kernel!(splitk_qkv_b64, bt = 64, nt = 192, rt = 32, s = 4, ks = 1024, nr = 24);
splitk_kernel!(splitk_down_b16, bt = 16, nt = 256, rt = 16, s = 8, ks = 1792, nr = 32);
splitk_kernel!(splitk_down_b64, bt = 64, nt = 256, rt = 16, s = 8, ks = 1792, nr = 32);

/// RMSNorm of `R` independent tiles of `BT` rows of 4096 (`R = 1`: one decode step).
macro_rules! norm_kernel {
    ($name:ident, bt = $bt:literal) => {
        /// `rms_norm` over `R` tiles of this many rows:
        #[doc = stringify!($bt)]
        #[megakernel(dims(BT = $bt, D = 4096))]
        pub fn $name(x: &Tensor<bf16, { [R * BT, D] }>, w: &Tensor<bf16, { [D] }>, y: &mut Tensor<bf16, { [R * BT, D] }>) {
            tile!(norm[r] in [R] {
                rms_norm(x.tile([r, 0], [BT, D]), w.tile([0], [D]), 0.00001, y.tile([r, 0], [BT, D]));
            });
        }
    };
}
norm_kernel!(norm_b1, bt = 1);
norm_kernel!(norm_b16, bt = 16);

/// Llama-3.1-8B RoPE on q and k and the KV-cache append, for `NS` sequences (each with its
/// own position and cache region), one task per (sequence, KV head): its 4 query heads,
/// its key head, and the append of its key and value at the sequence's position.
#[megakernel(dims(G = 4, HK = 8, D = 128, LC = 16))]
pub fn rope_append(
    q: &mut Tensor<bf16, { [NS * HK * G, D] }>,
    k: &mut Tensor<bf16, { [NS * HK, D] }>,
    v: &Tensor<bf16, { [NS * HK, D] }>,
    pos: &Tensor<i32, { [NS] }>,
    kc: &mut Tensor<bf16, { [NS * HK, LC, D] }>,
    vc: &mut Tensor<bf16, { [NS * HK, LC, D] }>,
) {
    tile!(prep[s, h] in [NS, HK] {
        rope_llama3(q.tile([s * HK + h, 0], [G, D]), pos.tile([s], [1]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
        rope_llama3(k.tile([s * HK + h, 0], [1, D]), pos.tile([s], [1]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
        kv_append(k.tile([s * HK + h, 0], [1, D]), pos.tile([s], [1]), kc.tile([s * HK + h, 0, 0], [1, LC, D]));
        kv_append(v.tile([s * HK + h, 0], [1, D]), pos.tile([s], [1]), vc.tile([s * HK + h, 0, 0], [1, LC, D]));
    });
}

/// [`rope_append`] in blocks of `SB` sequences, one task per block: its 8 x `SB` key
/// heads and 32 x `SB` query heads, each sequence at its own position. A task moves
/// `SB` x 26 KB, enough to stream at the copy bandwidth where a (sequence, KV head) task
/// of 3.3 KB is all fixed cost.
macro_rules! rope_append_blocks {
    ($name:ident, sb = $sb:literal) => {
        #[doc = concat!("RoPE + append in blocks of ", stringify!($sb), " sequences a task.")]
        #[megakernel(dims(G = 4, HK = 8, D = 128, LC = 16, SB = $sb))]
        pub fn $name(
            q: &mut Tensor<bf16, { [NB * SB * HK * G, D] }>,
            k: &mut Tensor<bf16, { [NB * SB * HK, D] }>,
            v: &Tensor<bf16, { [NB * SB * HK, D] }>,
            pos: &Tensor<i32, { [NB * SB] }>,
            kc: &mut Tensor<bf16, { [NB * SB * HK, LC, D] }>,
            vc: &mut Tensor<bf16, { [NB * SB * HK, LC, D] }>,
        ) {
            tile!(prep[s] in [NB] {
                kv_append(v.tile([s, 0], [SB * HK, D]), pos.tile([s], [SB]), vc.tile([s, 0, 0], [SB * HK, LC, D]));
                rope_llama3(q.tile([s, 0], [SB * HK * G, D]), pos.tile([s], [SB]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
                rope_llama3(k.tile([s, 0], [SB * HK, D]), pos.tile([s], [SB]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
                kv_append(k.tile([s, 0], [SB * HK, D]), pos.tile([s], [SB]), kc.tile([s, 0, 0], [SB * HK, LC, D]));
            });
        }
    };
}
rope_append_blocks!(rope_append_blocks, sb = 8);
// 16 positions fill rope_llama3's table (2048 floats at head dimension 128) once
rope_append_blocks!(rope_append_blocks16, sb = 16);

/// Split-KV decode attention: `BT` sequences x 8 KV heads x `S` chunks of `C` positions
/// (`attention_partial`, 4 query heads per KV head, head dim 128), then one merge per
/// (sequence, KV head) that waits for exactly its chunks.
macro_rules! attention_kernel {
    ($name:ident, bt = $bt:literal, lk = $lk:literal, c = $c:literal, s = $s:literal) => {
        /// split-KV attention: sequences, cache length, chunk, chunks:
        #[doc = stringify!($bt, $lk, $c, $s)]
        #[megakernel(dims(BT = $bt, HK = 8, G = 4, D = 128, LK = $lk, C = $c, S = $s))]
        pub fn $name(
            q: &Tensor<bf16, { [BT * HK * G, D] }>,
            kc: &Tensor<bf16, { [BT * HK, LK, D] }>,
            vc: &Tensor<bf16, { [BT * HK, LK, D] }>,
            len: &Tensor<i32, { [BT] }>,
            o: &mut Tensor<f32, { [BT * HK * S * G, D] }>,
            ml: &mut Tensor<f32, { [BT * HK * S * G, 2] }>,
            out: &mut Tensor<bf16, { [BT * HK * G, D] }>,
        ) {
            let parts = event!([BT, HK]);
            tile!(chunk[b, h, c] in [BT, HK, S] {
                attention_partial(
                    q.tile([b * HK + h, 0], [G, D]),
                    kc.tile([b * HK + h, c, 0], [1, C, D]),
                    vc.tile([b * HK + h, c, 0], [1, C, D]),
                    len.tile([b], [1]),
                    c * C,
                    0.08838834764831845,
                    o.tile([(b * HK + h) * S + c, 0], [G, D]),
                    ml.tile([(b * HK + h) * S + c, 0], [G, 2]),
                );
                signal!(parts[b, h]);
            });
            tile!(merge[b, h] in [BT, HK] {
                wait!(parts[b, h]);
                attention_merge(o.tile([b * HK + h, 0], [S * G, D]), ml.tile([b * HK + h, 0], [S * G, 2]), out.tile([b * HK + h, 0], [G, D]));
            });
        }
    };
}
// at least 132 chunk tasks: 8 heads x 32 chunks at one sequence, 16 x 8 x 2 at sixteen
attention_kernel!(attn_b1_l1k, bt = 1, lk = 1024, c = 32, s = 32);
attention_kernel!(attn_b1_l8k, bt = 1, lk = 8192, c = 256, s = 32);
attention_kernel!(attn_b16_l1k, bt = 16, lk = 1024, c = 512, s = 2);
attention_kernel!(attn_b16_l8k, bt = 16, lk = 8192, c = 4096, s = 2);

/// Whole-head decode attention as the Llama step runs it from batch 32: `BT` sequences,
/// 8 KV heads of 4 query heads at head dim 128, `H` KV heads a task (`KH` tasks a
/// sequence). A task ropes its queries and new key, folds the whole cache of `LK`
/// positions, writes the normalised output and appends the new key and value (`$op`:
/// `attention_rope_heads`, the tensor-core fold, or `attention_rope_heads_simt`).
macro_rules! heads_kernel {
    ($name:ident, $op:ident, bt = $bt:literal, lk = $lk:literal, h = $h:literal, kh = $kh:literal) => {
        /// whole-head attention: sequences, cache length, KV heads a task, tasks a sequence:
        #[doc = stringify!($bt, $lk, $h, $kh)]
        #[megakernel(dims(BT = $bt, HK = 8, G = 4, D = 128, LK = $lk, H = $h, KH = $kh))]
        pub fn $name(
            qkv: &Tensor<bf16, { [BT, HK * (G + 2) * D] }>,
            pos: &Tensor<i32, { [BT] }>,
            cs: &Tensor<f32, { [BT, D] }>,
            kc: &mut Tensor<bf16, { [BT * HK, LK, D] }>,
            vc: &mut Tensor<bf16, { [BT * HK, LK, D] }>,
            out: &mut Tensor<bf16, { [BT, HK * G * D] }>,
        ) {
            tile!(attend[b, kp] in [BT, KH] {
                $op(
                    qkv.tile([b, kp], [1, H * (G + 2) * D]),
                    pos.tile([b], [1]),
                    cs.tile([b, 0], [1, D]),
                    0.08838834764831845,
                    kc.tile([b * KH + kp, 0, 0], [H, LK, D]),
                    vc.tile([b * KH + kp, 0, 0], [H, LK, D]),
                    out.tile([b, kp], [1, H * G * D]),
                );
            });
        }
    };
}
// the 8b stamps' forms: B = 64 four heads a task, B = 32 two (128 tasks, one wave)
heads_kernel!(heads_b64_l1k, attention_rope_heads, bt = 64, lk = 1024, h = 4, kh = 2);
heads_kernel!(heads_b64_l1k_simt, attention_rope_heads_simt, bt = 64, lk = 1024, h = 4, kh = 2);
heads_kernel!(heads_b32_l1k, attention_rope_heads, bt = 32, lk = 1024, h = 2, kh = 4);
heads_kernel!(heads_b32_l1k_simt, attention_rope_heads_simt, bt = 32, lk = 1024, h = 2, kh = 4);
heads_kernel!(heads_b64_l8k, attention_rope_heads, bt = 64, lk = 8192, h = 4, kh = 2);
heads_kernel!(heads_b32_l8k, attention_rope_heads, bt = 32, lk = 8192, h = 2, kh = 4);

/// A chain of dependent GEMVs `h[l + 1] = W[l] · h[l]` at batch 1, `RT` tasks of `NT` rows
/// per step, each task streaming its weight tile into shared memory with `matvec_prefetch`
/// *before* waiting for the previous step, then `matvec` after the wait.
macro_rules! chain_prefetch_kernel {
    ($name:ident, kd = $kd:literal, nt = $nt:literal, rt = $rt:literal) => {
        /// prefetched GEMV chain: width, rows per task, tasks per step:
        #[doc = stringify!($kd, $nt, $rt)]
        #[megakernel(dims(KD = $kd, NT = $nt, RT = $rt))]
        pub fn $name(w: &Tensor<bf16, { [S * RT * NT, KD] }>, x: &Tensor<bf16, { [1, KD] }>, h: &mut Tensor<bf16, { [S, KD] }>) {
            let done = event!([S, RT]);
            tile!(first[n] in [RT] {
                matvec_prefetch(w.tile([n, 0], [NT, KD]), 1);
                matvec(w.tile([n, 0], [NT, KD]), x.tile([0, 0], [1, KD]), h.tile([0, n], [1, NT]));
                signal!(done[0, n]);
            });
            tile!(step[l, n] in [S - 1, RT] {
                matvec_prefetch(w.tile([(l + 1) * RT + n, 0], [NT, KD]), 1);
                wait!(done[l, ..]);
                matvec(w.tile([(l + 1) * RT + n, 0], [NT, KD]), h.tile([l, 0], [1, KD]), h.tile([l + 1, n], [1, NT]));
                signal!(done[l + 1, n]);
            });
        }
    };
}

/// The same chain with the weight copy started only *after* the wait: no overlap.
macro_rules! chain_after_kernel {
    ($name:ident, kd = $kd:literal, nt = $nt:literal, rt = $rt:literal) => {
        /// GEMV chain, copy after the wait: width, rows per task, tasks per step:
        #[doc = stringify!($kd, $nt, $rt)]
        #[megakernel(dims(KD = $kd, NT = $nt, RT = $rt))]
        pub fn $name(w: &Tensor<bf16, { [S * RT * NT, KD] }>, x: &Tensor<bf16, { [1, KD] }>, h: &mut Tensor<bf16, { [S, KD] }>) {
            let done = event!([S, RT]);
            tile!(first[n] in [RT] {
                matvec_prefetch(w.tile([n, 0], [NT, KD]), 1);
                matvec(w.tile([n, 0], [NT, KD]), x.tile([0, 0], [1, KD]), h.tile([0, n], [1, NT]));
                signal!(done[0, n]);
            });
            tile!(step[l, n] in [S - 1, RT] {
                wait!(done[l, ..]);
                matvec_prefetch(w.tile([(l + 1) * RT + n, 0], [NT, KD]), 1);
                matvec(w.tile([(l + 1) * RT + n, 0], [NT, KD]), h.tile([l, 0], [1, KD]), h.tile([l + 1, n], [1, NT]));
                signal!(done[l + 1, n]);
            });
        }
    };
}

/// The chain's synchronisation alone: `RT` tasks per step, each waiting for all of the
/// previous step, no op (the dependency hop the prefetch hides the transfer behind).
macro_rules! chain_sync_kernel {
    ($name:ident, rt = $rt:literal) => {
        /// chain of range waits, tasks per step:
        #[doc = stringify!($rt)]
        #[megakernel(dims(RT = $rt))]
        pub fn $name(anchor: &Tensor<f32, { [S] }>) {
            let done = event!([S, RT]);
            tile!(first[n] in [RT] {
                signal!(done[0, n]);
            });
            tile!(step[l, n] in [S - 1, RT] {
                wait!(done[l, ..]);
                signal!(done[l + 1, n]);
            });
        }
    };
}

// The 1024- and 2048-wide chains have 128 tasks a step (one per SM), their tiles whole in
// the arena. A 4096-wide step is 8 MB: 256 tasks of 16 rows (128 KB, whole in the arena,
// two tasks an SM a step), or 128 of 32 rows (256 KB: the prefetch copies the 24 rows
// that fit its 200 KB, the GEMV streams the other 8 after the wait).
chain_prefetch_kernel!(chain_pre_1k, kd = 1024, nt = 8, rt = 128);
chain_prefetch_kernel!(chain_pre_2k, kd = 2048, nt = 16, rt = 128);
chain_prefetch_kernel!(chain_pre_4k, kd = 4096, nt = 16, rt = 256);
chain_prefetch_kernel!(chain_pre_4k_32, kd = 4096, nt = 32, rt = 128);
chain_after_kernel!(chain_post_1k, kd = 1024, nt = 8, rt = 128);
chain_after_kernel!(chain_post_2k, kd = 2048, nt = 16, rt = 128);
chain_after_kernel!(chain_post_4k, kd = 4096, nt = 16, rt = 256);
chain_after_kernel!(chain_post_4k_32, kd = 4096, nt = 32, rt = 128);
chain_sync_kernel!(chain_sync_128, rt = 128);
chain_sync_kernel!(chain_sync_256, rt = 256);
