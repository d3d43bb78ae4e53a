//! The decode operators inside multi-task megakernels with real events: a split-K GEMV
//! whose reducers wait for their splits next to the plain, residual and SiLU GEMVs; RoPE
//! and KV append, then attention partials per (KV head, chunk) merged by a task that
//! waits for exactly its head's chunks; embedding, the norms, elementwise ops and a split
//! argmax. `check_*` runs a kernel on any backend, outputs poisoned, and compares every
//! output with the same kernel on the CPU backend run in order (the ops' CPU references).
use et_core::prelude::*;
use et_core::relative_error;

/// The reduced extent of the GEMVs: 4096 + 8, so that the last 64-wide step is a tail.
pub const K: usize = 4104;
/// The weight rows of one GEMV task: 4 full mma tiles and a half one.
pub const ROWS: usize = 72;

macro_rules! gemv_kernel {
    ($name:ident, $batch:literal) => {
        /// The GEMV family at a batch of
        #[doc = stringify!($batch)]
        #[megakernel(dims(BT = $batch, KD = 4104, KS = 1026, NT = 72))]
        pub fn $name(
            w: &Tensor<bf16, { [R * NT, KD] }>,
            wu: &Tensor<bf16, { [R * NT, KD] }>,
            x: &Tensor<bf16, { [BT, KD] }>,
            res: &Tensor<bf16, { [BT, R * NT] }>,
            nw: &Tensor<bf16, { [KD] }>,
            part: &mut Tensor<f32, { [4, BT, R * NT] }>,
            y_split: &mut Tensor<bf16, { [BT, R * NT] }>,
            y: &mut Tensor<f32, { [BT, R * NT] }>,
            y_res: &mut Tensor<bf16, { [BT, R * NT] }>,
            y_silu: &mut Tensor<bf16, { [BT, R * NT] }>,
            y_whole: &mut Tensor<f32, { [BT, R * 16] }>,
            y_norm: &mut Tensor<f32, { [BT, R * NT] }>,
            y_norm_silu: &mut Tensor<bf16, { [BT, R * NT] }>,
            po: &Tensor<f32, { [BT * 285, 72] }>,
            pml: &Tensor<f32, { [BT * 285, 2] }>,
            y_merge: &mut Tensor<bf16, { [BT, R * NT] }>,
            wodd: &Tensor<bf16, { [R * NT, KD + 4] }>,
            y_odd: &mut Tensor<f32, { [BT, R * NT] }>,
        ) {
            let done = event!([R]);
            tile!(split[r, s] in [R, 4] {
                // rows of 1026 bf16 are not whole 16-byte lines: nothing is copied
                matvec_prefetch(w.tile([r, s], [NT, KS]), BT);
                matvec_split(w.tile([r, s], [NT, KS]), x.tile([0, s], [BT, KS]), part.tile([s, 0, r], [1, BT, NT]));
                signal!(done[r]);
            });
            tile!(reduce[r] in [R] {
                // a prefetch that no GEMV of the task reads: the CTA's next prefetch or GEMV retires it
                matvec_prefetch(wu.tile([r, 0], [NT, KD]), BT);
                wait!(done[r]);
                reduce_split_residual(part.tile([0, 0, r], [4, BT, NT]), res.tile([0, r], [BT, NT]), y_split.tile([0, r], [BT, NT]));
            });
            tile!(plain[r] in [R] {
                // the first rows from shared memory, the rest from global memory; the
                // residual GEMV without a prefetch; the SiLU GEMV with both of its tiles
                matvec_prefetch(w.tile([r, 0], [NT, KD]), BT);
                matvec(w.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), y.tile([0, r], [BT, NT]));
                matvec_residual(w.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), res.tile([0, r], [BT, NT]), y_res.tile([0, r], [BT, NT]));
                matvec_prefetch_pair(w.tile([r, 0], [NT, KD]), wu.tile([r, 0], [NT, KD]), BT);
                matvec_silu(w.tile([r, 0], [NT, KD]), wu.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), y_silu.tile([0, r], [BT, NT]));
            });
            tile!(whole[r] in [R] {
                // 16 rows fit whole beside the partial sums: every row from shared memory
                matvec_prefetch(w.tile([r, 0], [16, KD]), BT);
                wait!(done[r]);
                matvec(w.tile([r, 0], [16, KD]), x.tile([0, 0], [BT, KD]), y_whole.tile([0, r], [BT, 16]));
            });
            tile!(normed[r] in [R] {
                // the norm fused into the GEMVs: x normalized in the arena (in chunks of 7
                // rows above batch 7 at this K), with a prefetch before it left unread
                matvec_prefetch(w.tile([r, 0], [NT, KD]), BT);
                rms_norm_matvec(w.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), nw.tile([0], [KD]), 0.00001, y_norm.tile([0, r], [BT, NT]));
                rms_norm_matvec_silu(w.tile([r, 0], [NT, KD]), wu.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), nw.tile([0], [KD]), 0.00001, y_norm_silu.tile([0, r], [BT, NT]));
            });
            tile!(merged[r] in [R] {
                // split-KV pieces merged into the arena, then the residual GEMV: 19 KV heads
                // of 3 query heads of dim 72 (57 x 72 = KD), 5 pieces each
                attention_merge_matvec_residual(
                    w.tile([r, 0], [NT, KD]),
                    po.tile([0, 0], [BT * 285, 72]),
                    pml.tile([0, 0], [BT * 285, 2]),
                    3,
                    res.tile([0, r], [BT, NT]),
                    y_merge.tile([0, r], [BT, NT]),
                );
            });
            tile!(odd[r] in [R] {
                // rows of 4108 bf16 (8216 bytes) are not 16-byte aligned: no path that
                // streams 16-byte pieces takes them (above batch 16 on sm_90a, the wgmma
                // path's scalar fallback)
                matvec(wodd.tile([r, 0], [NT, KD]), x.tile([0, 0], [BT, KD]), y_odd.tile([0, r], [BT, NT]));
            });
        }
    };
}
gemv_kernel!(decode_gemv_b1, 1);
gemv_kernel!(decode_gemv_b2, 2);
gemv_kernel!(decode_gemv_b7, 7);
gemv_kernel!(decode_gemv_b8, 8);
gemv_kernel!(decode_gemv_b9, 9);
gemv_kernel!(decode_gemv_b16, 16);
gemv_kernel!(decode_gemv_b24, 24);
gemv_kernel!(decode_gemv_b33, 33);
gemv_kernel!(decode_gemv_b64, 64);

macro_rules! attention_kernel {
    ($name:ident, $fused:ident, $whole:ident, $split:ident, $g:literal, $d:literal, $l:literal, $c:literal, $s:literal,
     $hh:literal, $scale:tt) => {
        /// RoPE, KV append and split-KV attention: query heads per KV head, head dim, cache
        /// length, chunk, chunks:
        #[doc = stringify!($g, $d, $l, $c, $s)]
        #[megakernel(dims(G = $g, D = $d, L = $l, C = $c, S = $s))]
        pub fn $name(
            q: &mut Tensor<bf16, { [H * G, D] }>,
            knew: &mut Tensor<bf16, { [H, D] }>,
            vnew: &Tensor<bf16, { [H, D] }>,
            pos: &Tensor<i32, { [1] }>,
            len: &Tensor<i32, { [1] }>,
            kc: &mut Tensor<bf16, { [H, L, D] }>,
            vc: &mut Tensor<bf16, { [H, L, D] }>,
            o: &mut Tensor<f32, { [H * S * G, D] }>,
            ml: &mut Tensor<f32, { [H * S * G, 2] }>,
            out: &mut Tensor<bf16, { [H * G, D] }>,
        ) {
            let ready = event!([H]);
            let parts = event!([H]);
            tile!(prep[h] in [H] {
                rope_llama3(q.tile([h, 0], [G, D]), pos.tile([0], [1]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
                rope_llama3(knew.tile([h, 0], [1, D]), pos.tile([0], [1]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
                kv_append(knew.tile([h, 0], [1, D]), pos.tile([0], [1]), kc.tile([h, 0, 0], [1, L, D]));
                kv_append(vnew.tile([h, 0], [1, D]), pos.tile([0], [1]), vc.tile([h, 0, 0], [1, L, D]));
                signal!(ready[h]);
            });
            tile!(chunk[h, c] in [H, S] {
                wait!(ready[h]);
                attention_partial(
                    q.tile([h, 0], [G, D]),
                    kc.tile([h, c, 0], [1, C, D]),
                    vc.tile([h, c, 0], [1, C, D]),
                    len.tile([0], [1]),
                    c * C,
                    $scale,
                    o.tile([h * S + c, 0], [G, D]),
                    ml.tile([h * S + c, 0], [G, 2]),
                );
                signal!(parts[h]);
            });
            tile!(merge[h] in [H] {
                wait!(parts[h]);
                attention_merge(o.tile([h, 0], [S * G, D]), ml.tile([h, 0], [S * G, 2]), out.tile([h, 0], [G, D]));
            });
        }

        /// The same step as the Llama megakernel runs it: RoPE fused into the pieces
        /// (`attention_rope_split`, or its `_lazy` form, on a fused QKV row per KV head, the positions split
        /// evenly over the `S` pieces), merged into one `[1, G · D]` row per KV head, then
        /// the key and value appended (`attention_kv_append`):
        #[doc = stringify!($g, $d, $l, $c, $s)]
        #[megakernel(dims(G = $g, D = $d, L = $l, C = $c, S = $s))]
        pub fn $fused(
            qkv: &Tensor<bf16, { [H, (G + 2) * D] }>,
            pos: &Tensor<i32, { [1] }>,
            rope: &mut Tensor<f32, { [1, D] }>,
            kc: &mut Tensor<bf16, { [H, L, D] }>,
            vc: &mut Tensor<bf16, { [H, L, D] }>,
            o: &mut Tensor<f32, { [H * S * G, D] }>,
            ml: &mut Tensor<f32, { [H * S * G, 2] }>,
            out: &mut Tensor<bf16, { [H, G * D] }>,
        ) {
            let turned = event!([1]);
            let parts = event!([H]);
            tile!(angles[i] in [1] {
                rope_table(pos.tile([0], [1]), 500000.0, 8.0, 1.0, 4.0, 8192.0, rope.tile([i, 0], [1, D]));
                signal!(turned[i]);
            });
            tile!(chunk[h, c] in [H, S] {
                wait!(turned[0]);
                $split(
                    qkv.tile([h, 0], [1, (G + 2) * D]),
                    pos.tile([0], [1]),
                    rope.tile([0, 0], [1, D]),
                    c,
                    S,
                    $scale,
                    kc.tile([h, 0, 0], [1, L, D]),
                    vc.tile([h, 0, 0], [1, L, D]),
                    o.tile([h * S + c, 0], [G, D]),
                    ml.tile([h * S + c, 0], [G, 2]),
                );
                signal!(parts[h]);
            });
            tile!(merge[h] in [H] {
                wait!(parts[h]);
                attention_merge(o.tile([h, 0], [S * G, D]), ml.tile([h, 0], [S * G, 2]), out.tile([h, 0], [1, G * D]));
                attention_kv_append(
                    qkv.tile([h, 0], [1, (G + 2) * D]),
                    pos.tile([0], [1]),
                    rope.tile([0, 0], [1, D]),
                    kc.tile([h, 0, 0], [1, L, D]),
                    vc.tile([h, 0, 0], [1, L, D]),
                );
            });
        }

        /// The same step in whole heads, `HH` KV heads a task (`attention_rope_heads`: RoPE,
        /// the whole cache in one piece, no merge, the append): query heads per KV head,
        /// head dim, cache length, heads a task:
        #[doc = stringify!($g, $d, $l, $hh)]
        #[megakernel(dims(G = $g, D = $d, L = $l, HH = $hh))]
        pub fn $whole(
            qkv: &Tensor<bf16, { [HT, HH * (G + 2) * D] }>,
            pos: &Tensor<i32, { [1] }>,
            rope: &mut Tensor<f32, { [1, D] }>,
            kc: &mut Tensor<bf16, { [HT * HH, L, D] }>,
            vc: &mut Tensor<bf16, { [HT * HH, L, D] }>,
            out: &mut Tensor<bf16, { [HT, HH * G * D] }>,
        ) {
            let turned = event!([1]);
            tile!(angles[i] in [1] {
                rope_table(pos.tile([0], [1]), 500000.0, 8.0, 1.0, 4.0, 8192.0, rope.tile([i, 0], [1, D]));
                signal!(turned[i]);
            });
            tile!(attend[t] in [HT] {
                wait!(turned[0]);
                attention_rope_heads(
                    qkv.tile([t, 0], [1, HH * (G + 2) * D]),
                    pos.tile([0], [1]),
                    rope.tile([0, 0], [1, D]),
                    $scale,
                    kc.tile([t, 0, 0], [HH, L, D]),
                    vc.tile([t, 0, 0], [HH, L, D]),
                    out.tile([t, 0], [1, HH * G * D]),
                );
            });
        }
    };
}
attention_kernel!(
    decode_attention_g4_d128,
    fused_attention_g4_d128,
    whole_attention_g4_d128,
    attention_rope_split,
    4,
    128,
    1024,
    256,
    4,
    2,
    0.08838834764831845
);
attention_kernel!(
    decode_attention_g8_d64,
    fused_attention_g8_d64,
    whole_attention_g8_d64,
    attention_rope_split_lazy,
    8,
    64,
    1024,
    256,
    4,
    4,
    0.125
);
attention_kernel!(
    decode_attention_g2_d128,
    fused_attention_g2_d128,
    whole_attention_g2_d128,
    attention_rope_split_lazy,
    2,
    128,
    1024,
    256,
    4,
    3,
    0.08838834764831845
);
attention_kernel!(
    decode_attention_32k,
    fused_attention_32k,
    whole_attention_32k,
    attention_rope_split_lazy,
    4,
    128,
    32768,
    1024,
    32,
    8,
    0.08838834764831845
);

macro_rules! rope_kernel {
    ($name:ident, $d:literal, $sb:literal, $g:literal) => {
        /// RoPE and the KV append over blocks of sequences, each at its own position, then
        /// a second task per block that appends after an event: head dim, sequences a task,
        /// query heads a sequence:
        #[doc = stringify!($d, $sb, $g)]
        #[megakernel(dims(D = $d, SB = $sb, G = $g, L = 40))]
        pub fn $name(
            q: &mut Tensor<bf16, { [NB * SB * G, D] }>,
            k: &mut Tensor<bf16, { [NB * SB, D] }>,
            v: &Tensor<bf16, { [NB * SB, D] }>,
            pos: &Tensor<i32, { [NB * SB] }>,
            kc: &mut Tensor<bf16, { [NB * SB, L, D] }>,
            vc: &mut Tensor<bf16, { [NB * SB, L, D] }>,
        ) {
            let roped = event!([NB]);
            tile!(rope[s] in [NB] {
                rope_llama3(q.tile([s, 0], [SB * G, D]), pos.tile([s], [SB]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
                rope_llama3(k.tile([s, 0], [SB, D]), pos.tile([s], [SB]), 500000.0, 8.0, 1.0, 4.0, 8192.0);
                signal!(roped[s]);
            });
            tile!(append[s] in [NB] {
                wait!(roped[s]);
                kv_append(k.tile([s, 0], [SB, D]), pos.tile([s], [SB]), kc.tile([s, 0, 0], [SB, L, D]));
                kv_append(v.tile([s, 0], [SB, D]), pos.tile([s], [SB]), vc.tile([s, 0, 0], [SB, L, D]));
            });
        }
    };
}
// 16-byte pieces (half of 128 is a multiple of 8), 3 sequences of 4 heads a task
rope_kernel!(decode_rope_d128, 128, 3, 4);
// element by element (half of 72 is 36), one sequence of 8 heads a task
rope_kernel!(decode_rope_d72, 72, 1, 8);

/// The vocabulary of the argmax: Llama 3's 128256, in 32 chunks of 4008.
pub const VOCAB: usize = 128256;

macro_rules! misc_kernel {
    ($name:ident, $batch:literal) => {
        /// Embedding, the norms, elementwise ops and the split argmax at a batch of
        #[doc = stringify!($batch)]
        #[megakernel(dims(BT = $batch, D = 4104, V = 1000, VC = 4008, S = 32))]
        pub fn $name(
            table: &Tensor<bf16, { [V, D] }>,
            ids: &Tensor<i32, { [BT] }>,
            h: &mut Tensor<bf16, { [BT, D] }>,
            r: &Tensor<bf16, { [BT, D] }>,
            nw: &Tensor<bf16, { [D] }>,
            y1: &mut Tensor<bf16, { [BT, D] }>,
            y2: &mut Tensor<bf16, { [BT, D] }>,
            y3: &mut Tensor<bf16, { [BT, D] }>,
            y4: &mut Tensor<bf16, { [BT, D] }>,
            part: &Tensor<f32, { [3, BT, D] }>,
            y5: &mut Tensor<bf16, { [BT, D] }>,
            y6: &mut Tensor<bf16, { [BT, D] }>,
            logits: &Tensor<bf16, { [BT, S * VC] }>,
            best: &mut Tensor<f32, { [BT, S] }>,
            index: &mut Tensor<i32, { [BT, S] }>,
            token: &mut Tensor<i32, { [BT] }>,
        ) {
            let embedded = event!([1]);
            let normed = event!([1]);
            let chunks = event!([1]);
            tile!(lookup[i] in [1] {
                embed(table.tile([0, 0], [V, D]), ids.tile([0], [BT]), h.tile([i, 0], [BT, D]));
                signal!(embedded[i]);
            });
            tile!(norm[i] in [1] {
                wait!(embedded[i]);
                rms_norm_residual(h.tile([i, 0], [BT, D]), r.tile([0, 0], [BT, D]), nw.tile([0], [D]), 0.00001, y1.tile([0, 0], [BT, D]));
                rms_norm(y1.tile([0, 0], [BT, D]), nw.tile([0], [D]), 0.00001, y2.tile([0, 0], [BT, D]));
                rms_norm_split_residual(
                    part.tile([0, 0, 0], [3, BT, D]),
                    r.tile([0, 0], [BT, D]),
                    nw.tile([0], [D]),
                    0.00001,
                    y5.tile([0, 0], [BT, D]),
                    y6.tile([0, 0], [BT, D]),
                );
                signal!(normed[i]);
            });
            tile!(ew[i] in [1] {
                wait!(normed[i]);
                elementwise_add(y1.tile([i, 0], [BT, D]), y2.tile([i, 0], [BT, D]), y3.tile([i, 0], [BT, D]));
                elementwise_scale(y3.tile([i, 0], [BT, D]), 0.5, y4.tile([i, 0], [BT, D]));
            });
            tile!(chunk[s] in [S] {
                argmax_partial(logits.tile([0, s], [BT, VC]), s * VC, best.tile([0, s], [BT, 1]), index.tile([0, s], [BT, 1]));
                signal!(chunks[0]);
            });
            tile!(pick[i] in [1] {
                wait!(chunks[i]);
                argmax_merge(best.tile([0, 0], [BT, S]), index.tile([0, 0], [BT, S]), token.tile([0], [BT]));
            });
        }
    };
}
misc_kernel!(decode_misc_b1, 1);
misc_kernel!(decode_misc_b5, 5);
misc_kernel!(decode_misc_b16, 16);

/// Asserts `got` is within `tol` (relative, as [`relative_error`]) of `want`.
pub fn close<T: Element>(what: &str, got: &Tensor<T>, want: &Tensor<T>, tol: f64) {
    let e = relative_error(got, want);
    assert!(e <= tol, "{what}: relative error {e} > {tol}");
}

fn opts(schedule: ScheduleKind, chaos: Option<u64>) -> LaunchOptions {
    LaunchOptions { schedule: Some(schedule), chaos, ..Default::default() }
}

/// Split-KV attention pieces of `rows` rows of `d` dims (`g` query heads a piece): random
/// outputs, maxima in [-4, 4], sums in (0, 8], every fifth piece empty (max -inf, sum 0).
fn attention_pieces(rows: usize, d: usize, g: usize, seed: u64) -> (Tensor<f32>, Tensor<f32>) {
    let mut o = Tensor::<f32>::random(&[rows, d], seed);
    let u = Tensor::<f32>::random(&[rows, 2], seed + 1);
    let mut ml = Vec::with_capacity(2 * rows);
    for r in 0..rows {
        if (r / g) % 5 == 4 {
            ml.extend([f32::NEG_INFINITY, 0.0]);
            (0..d).for_each(|i| o.set(&[r, i], 0.0));
        } else {
            ml.extend([4.0 * u.get(&[r, 0]), 4.0 * (u.get(&[r, 1]) + 1.0) + 1e-3]);
        }
    }
    (o, Tensor::from_vec(&[rows, 2], ml).unwrap())
}

/// Runs one of the GEMV kernels (`launch` is its `launch_with`) with `rows` weight-row
/// tiles on `backend` and on the CPU in order, and compares every output.
#[allow(clippy::type_complexity)]
pub fn check_gemv<B: Backend>(
    backend: &B,
    batch: usize,
    tiles: usize,
    seed: u64,
    schedule: ScheduleKind,
    chaos: Option<u64>,
    tol: f64,
) {
    let n = tiles * ROWS;
    let w = Tensor::<bf16>::random(&[n, K], seed);
    let wu = Tensor::<bf16>::random(&[n, K], seed + 1);
    let x = Tensor::<bf16>::random(&[batch, K], seed + 2);
    let res = Tensor::<bf16>::random(&[batch, n], seed + 3);
    let nw = Tensor::<bf16>::random(&[K], seed + 4);
    let (po, pml) = attention_pieces(batch * 285, 72, 3, seed + 5);
    let wodd = Tensor::<bf16>::random(&[n, K + 4], seed + 6);
    let run = |be: &dyn Fn() -> [Tensor<f32>; 10]| be();
    let on = |o: &LaunchOptions, cpu: bool| -> [Tensor<f32>; 10] {
        macro_rules! go {
            ($be:expr) => {{
                let be = $be;
                let (dw, dwu, dx, dr) =
                    (be.upload(&w).unwrap(), be.upload(&wu).unwrap(), be.upload(&x).unwrap(), be.upload(&res).unwrap());
                let dnw = be.upload(&nw).unwrap();
                let mut part = be.upload(&Tensor::<f32>::poisoned(&[4, batch, n])).unwrap();
                let mut ys = be.upload(&Tensor::<bf16>::poisoned(&[batch, n])).unwrap();
                let mut y = be.upload(&Tensor::<f32>::poisoned(&[batch, n])).unwrap();
                let mut yr = be.upload(&Tensor::<bf16>::poisoned(&[batch, n])).unwrap();
                let mut yl = be.upload(&Tensor::<bf16>::poisoned(&[batch, n])).unwrap();
                let mut yw = be.upload(&Tensor::<f32>::poisoned(&[batch, tiles * 16])).unwrap();
                let mut yn = be.upload(&Tensor::<f32>::poisoned(&[batch, n])).unwrap();
                let mut yns = be.upload(&Tensor::<bf16>::poisoned(&[batch, n])).unwrap();
                let (dpo, dpml) = (be.upload(&po).unwrap(), be.upload(&pml).unwrap());
                let mut ym = be.upload(&Tensor::<bf16>::poisoned(&[batch, n])).unwrap();
                let dwodd = be.upload(&wodd).unwrap();
                let mut yo = be.upload(&Tensor::<f32>::poisoned(&[batch, n])).unwrap();
                let args = (&dw, &dwu, &dx, &dr);
                macro_rules! launch {
                    ($k:ident) => {
                        $k::launch_with(
                            be, o, args.0, args.1, args.2, args.3, &dnw, &mut part, &mut ys, &mut y, &mut yr, &mut yl,
                            &mut yw, &mut yn, &mut yns, &dpo, &dpml, &mut ym, &dwodd, &mut yo,
                        )
                    };
                }
                match batch {
                    1 => launch!(decode_gemv_b1),
                    2 => launch!(decode_gemv_b2),
                    7 => launch!(decode_gemv_b7),
                    8 => launch!(decode_gemv_b8),
                    9 => launch!(decode_gemv_b9),
                    16 => launch!(decode_gemv_b16),
                    24 => launch!(decode_gemv_b24),
                    33 => launch!(decode_gemv_b33),
                    64 => launch!(decode_gemv_b64),
                    _ => panic!("no GEMV kernel for batch {batch}"),
                }
                .unwrap();
                [
                    be.download(&part).unwrap(),
                    be.download(&ys).unwrap().to_f32(),
                    be.download(&y).unwrap(),
                    be.download(&yr).unwrap().to_f32(),
                    be.download(&yl).unwrap().to_f32(),
                    be.download(&yw).unwrap(),
                    be.download(&yn).unwrap(),
                    be.download(&yns).unwrap().to_f32(),
                    be.download(&ym).unwrap().to_f32(),
                    be.download(&yo).unwrap(),
                ]
            }};
        }
        if cpu { go!(&Cpu::new()) } else { go!(backend) }
    };
    let _ = run;
    let want = on(&opts(ScheduleKind::Static, None), true);
    let got = on(&opts(schedule, chaos), false);
    for (k, what) in [
        "split-K partials",
        "split-K + residual",
        "matvec",
        "matvec_residual",
        "matvec_silu",
        "matvec of a whole prefetch",
        "rms_norm_matvec",
        "rms_norm_matvec_silu",
        "attention_merge_matvec_residual",
        "matvec of rows not 16-byte aligned",
    ]
    .iter()
    .enumerate()
    {
        close(&format!("batch {batch}, {tiles} tiles: {what}"), &got[k], &want[k], tol);
    }
}

/// The attention kernels: which one, by (G, D, L).
#[derive(Clone, Copy, Debug)]
pub enum Attention {
    /// 4 query heads per KV head, head dim 128, cache 1024 in 4 chunks; whole heads 2 a task.
    G4D128,
    /// 8 query heads per KV head, head dim 64, cache 1024 in 4 chunks; whole heads 4 a task.
    G8D64,
    /// 2 query heads per KV head, head dim 128, cache 1024 in 4 chunks, the lazy pieces;
    /// whole heads 3 a task (groups of 5 warps, an odd count).
    G2D128,
    /// 4 query heads per KV head, head dim 128, cache 32768 in 32 chunks; whole heads 8 a
    /// task (two rounds of four on a CTA of 16 warps).
    Long,
}

/// Runs an attention kernel with `heads` KV heads, the new token at `pos` (so `pos + 1`
/// valid positions), on `backend` and on the CPU in order, and compares q after RoPE, the
/// caches, the partials and the output; then the fused forms on `backend` (split pieces
/// with RoPE, and whole heads when `heads` is a multiple of the kernel's heads a task)
/// against the CPU's caches and output.
#[allow(clippy::too_many_arguments)]
pub fn check_attention<B: Backend>(
    backend: &B,
    which: Attention,
    heads: usize,
    pos: usize,
    seed: u64,
    schedule: ScheduleKind,
    chaos: Option<u64>,
    tol: f64,
) {
    let (g, d, l, s, hh) = match which {
        Attention::G4D128 => (4, 128, 1024, 4, 2),
        Attention::G8D64 => (8, 64, 1024, 4, 4),
        Attention::G2D128 => (2, 128, 1024, 4, 3),
        Attention::Long => (4, 128, 32768, 32, 8),
    };
    let q = Tensor::<bf16>::random(&[heads * g, d], seed);
    let knew = Tensor::<bf16>::random(&[heads, d], seed + 1);
    let vnew = Tensor::<bf16>::random(&[heads, d], seed + 2);
    // the cache before this step: random everywhere (positions past `pos` must be ignored)
    let kc = Tensor::<bf16>::random(&[heads, l, d], seed + 3);
    let vc = Tensor::<bf16>::random(&[heads, l, d], seed + 4);
    let p = Tensor::from_vec(&[1], vec![pos as i32]).unwrap();
    let n = Tensor::from_vec(&[1], vec![pos as i32 + 1]).unwrap();
    let on = |o: &LaunchOptions, cpu: bool| -> Vec<Tensor<f32>> {
        macro_rules! go {
            ($be:expr) => {{
                let be = $be;
                let mut dq = be.upload(&q).unwrap();
                let mut dk = be.upload(&knew).unwrap();
                let dv = be.upload(&vnew).unwrap();
                let (dp, dn) = (be.upload(&p).unwrap(), be.upload(&n).unwrap());
                let (mut dkc, mut dvc) = (be.upload(&kc).unwrap(), be.upload(&vc).unwrap());
                let mut o_ = be.upload(&Tensor::<f32>::poisoned(&[heads * s * g, d])).unwrap();
                let mut ml = be.upload(&Tensor::<f32>::poisoned(&[heads * s * g, 2])).unwrap();
                let mut out = be.upload(&Tensor::<bf16>::poisoned(&[heads * g, d])).unwrap();
                match which {
                    Attention::G4D128 => decode_attention_g4_d128::launch_with(
                        be, o, &mut dq, &mut dk, &dv, &dp, &dn, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
                    ),
                    Attention::G8D64 => decode_attention_g8_d64::launch_with(
                        be, o, &mut dq, &mut dk, &dv, &dp, &dn, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
                    ),
                    Attention::G2D128 => decode_attention_g2_d128::launch_with(
                        be, o, &mut dq, &mut dk, &dv, &dp, &dn, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
                    ),
                    Attention::Long => decode_attention_32k::launch_with(
                        be, o, &mut dq, &mut dk, &dv, &dp, &dn, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
                    ),
                }
                .unwrap();
                // empty chunks hold -inf maxima: compare the sums and outputs, and the maxima
                // of the chunks that have positions
                let mut mlh = be.download(&ml).unwrap();
                for v in mlh.as_mut_slice() {
                    if *v == f32::NEG_INFINITY {
                        *v = -1.0e30;
                    }
                }
                vec![
                    be.download(&dq).unwrap().to_f32(),
                    be.download(&dkc).unwrap().to_f32(),
                    be.download(&dvc).unwrap().to_f32(),
                    be.download(&o_).unwrap(),
                    mlh,
                    be.download(&out).unwrap().to_f32(),
                ]
            }};
        }
        if cpu { go!(&Cpu::new()) } else { go!(backend) }
    };
    let want = on(&opts(ScheduleKind::Static, None), true);
    let got = on(&opts(schedule, chaos), false);
    for (k, what) in
        ["q after RoPE", "k cache", "v cache", "partial outputs", "partial max and sum", "attention"].iter().enumerate()
    {
        close(&format!("{which:?}, {heads} KV heads, position {pos}: {what}"), &got[k], &want[k], tol);
    }
    // the fused form on `backend` computes what the separate ops computed on the CPU
    let mut rows = Vec::with_capacity(heads * (g + 2) * d);
    for h in 0..heads {
        rows.extend_from_slice(&q.as_slice()[h * g * d..(h + 1) * g * d]);
        rows.extend_from_slice(&knew.as_slice()[h * d..(h + 1) * d]);
        rows.extend_from_slice(&vnew.as_slice()[h * d..(h + 1) * d]);
    }
    let qkv = Tensor::from_vec(&[heads, (g + 2) * d], rows).unwrap();
    let be = backend;
    let (dqkv, dp) = (be.upload(&qkv).unwrap(), be.upload(&p).unwrap());
    let (mut dkc, mut dvc) = (be.upload(&kc).unwrap(), be.upload(&vc).unwrap());
    let mut o_ = be.upload(&Tensor::<f32>::poisoned(&[heads * s * g, d])).unwrap();
    let mut ml = be.upload(&Tensor::<f32>::poisoned(&[heads * s * g, 2])).unwrap();
    let mut out = be.upload(&Tensor::<bf16>::poisoned(&[heads, g * d])).unwrap();
    let mut rope = be.upload(&Tensor::<f32>::poisoned(&[1, d])).unwrap();
    let o = &opts(schedule, chaos);
    match which {
        Attention::G4D128 => fused_attention_g4_d128::launch_with(
            be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
        ),
        Attention::G8D64 => fused_attention_g8_d64::launch_with(
            be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
        ),
        Attention::G2D128 => fused_attention_g2_d128::launch_with(
            be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
        ),
        Attention::Long => fused_attention_32k::launch_with(
            be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut o_, &mut ml, &mut out,
        ),
    }
    .unwrap();
    // the pieces split the positions evenly, not at the separate ops' chunk boundaries:
    // the caches and the merged output are what must agree
    let fused = [
        be.download(&dkc).unwrap().to_f32(),
        be.download(&dvc).unwrap().to_f32(),
        // the rows of `out` are the [G, D] heads of `want`'s output, one KV head per row
        Tensor::from_vec(&[heads * g, d], be.download(&out).unwrap().to_f32().as_slice().to_vec()).unwrap(),
    ];
    // (the output sums in another order: a bf16 rounding may flip even on the CPU)
    let sums = tol.max(1e-2);
    for (got, (k, what, tol)) in fused.iter().zip([(1, "k cache", tol), (2, "v cache", tol), (5, "attention", sums)]) {
        let what = format!("{which:?} fused, {heads} KV heads, position {pos}: {what}");
        close(&what, got, &want[k], tol);
    }
    if !heads.is_multiple_of(hh) {
        return;
    }
    // whole heads, `hh` a task: the same caches and output
    let qkv = Tensor::from_vec(&[heads / hh, hh * (g + 2) * d], qkv.as_slice().to_vec()).unwrap();
    let dqkv = be.upload(&qkv).unwrap();
    let (mut dkc, mut dvc) = (be.upload(&kc).unwrap(), be.upload(&vc).unwrap());
    let mut out = be.upload(&Tensor::<bf16>::poisoned(&[heads / hh, hh * g * d])).unwrap();
    let mut rope = be.upload(&Tensor::<f32>::poisoned(&[1, d])).unwrap();
    match which {
        Attention::G4D128 => {
            whole_attention_g4_d128::launch_with(be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut out)
        }
        Attention::G8D64 => {
            whole_attention_g8_d64::launch_with(be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut out)
        }
        Attention::G2D128 => {
            whole_attention_g2_d128::launch_with(be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut out)
        }
        Attention::Long => whole_attention_32k::launch_with(be, o, &dqkv, &dp, &mut rope, &mut dkc, &mut dvc, &mut out),
    }
    .unwrap();
    let whole = [
        be.download(&dkc).unwrap().to_f32(),
        be.download(&dvc).unwrap().to_f32(),
        Tensor::from_vec(&[heads * g, d], be.download(&out).unwrap().to_f32().as_slice().to_vec()).unwrap(),
    ];
    for (got, (k, what, tol)) in whole.iter().zip([(1, "k cache", tol), (2, "v cache", tol), (5, "attention", sums)]) {
        let what = format!("{which:?} whole heads ({hh} a task), {heads} KV heads, position {pos}: {what}");
        close(&what, got, &want[k], tol);
    }
}

/// Runs a misc kernel (embedding, norms, elementwise, argmax) on `backend` and on the CPU
/// in order, and compares every output; the argmax exactly.
pub fn check_misc<B: Backend>(
    backend: &B,
    batch: usize,
    seed: u64,
    schedule: ScheduleKind,
    chaos: Option<u64>,
    tol: f64,
) {
    const D: usize = 4104;
    let table = Tensor::<bf16>::random(&[1000, D], seed);
    // one id out of range: a row of zeros
    let ids: Vec<i32> =
        (0..batch).map(|b| if b == 1 { 5000 } else { ((seed as usize * 7 + b * 13) % 1000) as i32 }).collect();
    let ids = Tensor::from_vec(&[batch], ids).unwrap();
    let r = Tensor::<bf16>::random(&[batch, D], seed + 1);
    let nw = Tensor::<bf16>::random(&[D], seed + 2);
    let part = Tensor::<f32>::random(&[3, batch, D], seed + 4);
    let mut logits = Tensor::<bf16>::random(&[batch, VOCAB], seed + 3);
    // a tie across chunks: the smaller index wins
    for b in 0..batch {
        logits.set(&[b, 5 + 4008 * b], bf16::from_f32(40.0));
        logits.set(&[b, 4008 * 31 + b], bf16::from_f32(40.0));
    }
    let on = |o: &LaunchOptions, cpu: bool| -> (Vec<Tensor<f32>>, Tensor<i32>) {
        macro_rules! go {
            ($be:expr) => {{
                let be = $be;
                let (dt, di, dr, dn, dl, dp) = (
                    be.upload(&table).unwrap(),
                    be.upload(&ids).unwrap(),
                    be.upload(&r).unwrap(),
                    be.upload(&nw).unwrap(),
                    be.upload(&logits).unwrap(),
                    be.upload(&part).unwrap(),
                );
                let poisoned = || be.upload(&Tensor::<bf16>::poisoned(&[batch, D])).unwrap();
                let (mut h, mut y1, mut y2, mut y3, mut y4, mut y5, mut y6) =
                    (poisoned(), poisoned(), poisoned(), poisoned(), poisoned(), poisoned(), poisoned());
                let mut best = be.upload(&Tensor::<f32>::poisoned(&[batch, 32])).unwrap();
                let mut index = be.upload(&Tensor::<i32>::poisoned(&[batch, 32])).unwrap();
                let mut token = be.upload(&Tensor::<i32>::poisoned(&[batch])).unwrap();
                match batch {
                    1 => decode_misc_b1::launch_with(
                        be, o, &dt, &di, &mut h, &dr, &dn, &mut y1, &mut y2, &mut y3, &mut y4, &dp, &mut y5, &mut y6,
                        &dl, &mut best, &mut index, &mut token,
                    ),
                    // 5 rows share 16 warps unevenly (3 warps a row, one warp idle)
                    5 => decode_misc_b5::launch_with(
                        be, o, &dt, &di, &mut h, &dr, &dn, &mut y1, &mut y2, &mut y3, &mut y4, &dp, &mut y5, &mut y6,
                        &dl, &mut best, &mut index, &mut token,
                    ),
                    16 => decode_misc_b16::launch_with(
                        be, o, &dt, &di, &mut h, &dr, &dn, &mut y1, &mut y2, &mut y3, &mut y4, &dp, &mut y5, &mut y6,
                        &dl, &mut best, &mut index, &mut token,
                    ),
                    _ => panic!("no misc kernel for batch {batch}"),
                }
                .unwrap();
                let outs = [&h, &y1, &y2, &y3, &y4, &y5, &y6].map(|t| be.download(t).unwrap().to_f32()).to_vec();
                let mut outs = outs;
                outs.push(be.download(&best).unwrap());
                outs.push(be.download(&index).unwrap().to_f32());
                (outs, be.download(&token).unwrap())
            }};
        }
        if cpu { go!(&Cpu::new()) } else { go!(backend) }
    };
    let (want, want_token) = on(&opts(ScheduleKind::Static, None), true);
    let (got, got_token) = on(&opts(schedule, chaos), false);
    for (k, what) in [
        "h (embedding + residual)",
        "rms_norm_residual",
        "rms_norm",
        "elementwise_add",
        "elementwise_scale",
        "rms_norm_split_residual h",
        "rms_norm_split_residual y",
        "argmax chunk maxima",
        "argmax chunk indices",
    ]
    .iter()
    .enumerate()
    {
        close(&format!("batch {batch}: {what}"), &got[k], &want[k], tol);
    }
    assert_eq!(got_token.as_slice(), want_token.as_slice(), "batch {batch}: argmax");
    for b in 0..batch {
        assert_eq!(want_token.get(&[b]), 5 + 4008 * b as i32, "batch {b}: the tie goes to the smaller index");
    }
}

/// Runs a RoPE + append kernel (`d` 128 or 72) over `blocks` tasks on `backend` and on the
/// CPU in order, and compares q, k and both caches. Positions vary per sequence and include
/// the cache's last (39), one past it and -1 (nothing appended; RoPE still turns the heads)
/// and 32767.
pub fn check_rope<B: Backend>(
    backend: &B,
    d: usize,
    blocks: usize,
    seed: u64,
    schedule: ScheduleKind,
    chaos: Option<u64>,
    tol: f64,
) {
    let (sb, g, l) = if d == 128 { (3, 4, 40) } else { (1, 8, 40) };
    let n = blocks * sb;
    let q = Tensor::<bf16>::random(&[n * g, d], seed);
    let k = Tensor::<bf16>::random(&[n, d], seed + 1);
    let v = Tensor::<bf16>::random(&[n, d], seed + 2);
    let kc = Tensor::<bf16>::random(&[n, l, d], seed + 3);
    let vc = Tensor::<bf16>::random(&[n, l, d], seed + 4);
    let special = [39, 40, -1, 32767, 0];
    let pos: Vec<i32> =
        (0..n).map(|s| if s < special.len() { special[s] } else { ((s * 7 + seed as usize) % 40) as i32 }).collect();
    let pos = Tensor::from_vec(&[n], pos).unwrap();
    let on = |o: &LaunchOptions, cpu: bool| -> Vec<Tensor<f32>> {
        macro_rules! go {
            ($be:expr) => {{
                let be = $be;
                let (mut dq, mut dk, dv, dp) =
                    (be.upload(&q).unwrap(), be.upload(&k).unwrap(), be.upload(&v).unwrap(), be.upload(&pos).unwrap());
                let (mut dkc, mut dvc) = (be.upload(&kc).unwrap(), be.upload(&vc).unwrap());
                match d {
                    128 => decode_rope_d128::launch_with(be, o, &mut dq, &mut dk, &dv, &dp, &mut dkc, &mut dvc),
                    72 => decode_rope_d72::launch_with(be, o, &mut dq, &mut dk, &dv, &dp, &mut dkc, &mut dvc),
                    _ => panic!("no rope kernel for head dim {d}"),
                }
                .unwrap();
                [&dq, &dk, &dkc, &dvc].map(|t| be.download(t).unwrap().to_f32()).to_vec()
            }};
        }
        if cpu { go!(&Cpu::new()) } else { go!(backend) }
    };
    let want = on(&opts(ScheduleKind::Static, None), true);
    let got = on(&opts(schedule, chaos), false);
    for (k, what) in ["q", "k", "k cache", "v cache"].iter().enumerate() {
        close(&format!("rope d {d}, {blocks} tasks: {what}"), &got[k], &want[k], tol);
    }
}

#[allow(dead_code)]
fn main() {
    let cpu = Cpu::new();
    for (k, schedule) in [ScheduleKind::Static, ScheduleKind::Dynamic].into_iter().enumerate() {
        for chaos in [None, Some(k as u64 + 3)] {
            check_gemv(&cpu, 1, 2, 10 + k as u64, schedule, chaos, 0.0);
            check_gemv(&cpu, 16, 1, 20 + k as u64, schedule, chaos, 0.0);
            check_gemv(&cpu, 9, 1, 25 + k as u64, schedule, chaos, 0.0);
            for pos in [0, 16, 999] {
                check_attention(&cpu, Attention::G4D128, 2, pos, 30 + pos as u64, schedule, chaos, 0.0);
                check_attention(&cpu, Attention::G8D64, 4, pos, 40 + pos as u64, schedule, chaos, 0.0);
            }
            check_misc(&cpu, 1, 50, schedule, chaos, 0.0);
            check_misc(&cpu, 5, 52, schedule, chaos, 0.0);
            check_misc(&cpu, 16, 51, schedule, chaos, 0.0);
            check_rope(&cpu, 128, 4, 60 + k as u64, schedule, chaos, 0.0);
            check_rope(&cpu, 72, 6, 61 + k as u64, schedule, chaos, 0.0);
        }
    }
}
