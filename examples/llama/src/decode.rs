//! The decode step of every layer as ONE megakernel.
//!
//! One launch reads a token per sequence and its position, runs the embedding lookup, all
//! `L` layers (RMSNorm → fused QKV GEMV → RoPE and split-KV GQA attention in one task per
//! KV chunk → chunk merge → output projection + residual → RMSNorm → gate/up GEMV + SiLU →
//! down projection + residual, and the KV append), the final norm, the LM head and a split
//! argmax, and writes the logits and the next token of every sequence.
//!
//! **The layer loop is in the tile domain.** Every per-layer group has the layer `l` as
//! its first tile index over the stacked `[L, ..]` weights (flattened to the ranks the ops
//! take: layer `l`'s row tile `r` of a `[L · T · N, K]` weight is tile `l · T + r`), and
//! the residual stream of layer `l` is row block `l` of `hs` (`[(L + 1) · B, hidden]`).
//! `down[l, r]` signals `h[l + 1, r]`, `norm1[l, b]` waits `h[l, ..]`: the groups form a
//! cycle in which `l` advances, which the DSL proves acyclic (et-graph's ranking proof),
//! so the generated CUDA does not grow with `L`, a symbolic dim read from the weights.
//!
//! **Events are per tile.** A consumer waits for exactly what it reads: an attention chunk
//! of one KV head waits the QKV row tiles of that head's slice (`qd[l, k·RT .. k·RT + RT]`)
//! and applies RoPE to its queries and key itself (redundantly per chunk, which costs less
//! than a task and a hop between the projection and the chunks), a merge waits its head's
//! chunks (or, with `attention = merged(..)`, every output-projection task merges all of
//! its layer's pieces itself: one stage and one hop fewer); a norm waits for every tile of
//! its input row, because it reads the whole hidden vector (exact, not a stage barrier).
//!
//! **Norms inside the GEMVs at small batches.** With `norms = fused(..)` each GEMV task
//! after a norm (QKV, gate/up, the LM head) waits for the whole residual row and
//! normalizes it into its shared-memory arena itself (`rms_norm_matvec`,
//! `rms_norm_matvec_silu`): no norm task, no hop between the norm and the GEMV, the same
//! values. Its arena holds the rows of at most 64 KB, so the large batches use
//! `norms = tasks(..)`: a norm task per sequence, the GEMVs waiting for all of them.
//!
//! **Split-K projections at large batches.** A GEMV task reads its weight rows and the
//! whole `[B, k]` activation; with the output and down projections cut into 128 row
//! tiles, the activation is 1 to 4 times the weight bytes of a task at B = 32 and 64. So
//! with `norms = reducing(..)` those two projections run as tiles of 4x the rows over a
//! quarter of `k` each (`matvec_split`, `KP = 4` splits, f32 partial sums in `pk`), and
//! the norm task after each sums the splits with the residual and writes the residual
//! stream (`rms_norm_split_residual`): the same 128 tasks read the same weights and a
//! quarter of the activations. Layer 0's norm reads the embedding (`norm0`), each later
//! one sums the layer before's down projection, and the final norm the last layer's.
//! llama-3.1-8b takes it at B = 32 and 64 (11% and 9% faster, RESULTS run 31); at 1b's
//! shorter rows it lost (3% and 8%), so 1b keeps `norms = tasks(..)`.
//!
//! **Nothing depends on the position.** Positions are an `i32` tensor read on the device;
//! the positions `0 ..= p` of each KV head are split evenly into `S` pieces
//! (`attention_rope_split`), so a short context spreads over every piece as a long one
//! does, and one task graph serves every step. The cache's length `P` (positions per
//! sequence) is a run-time dim read from the cache tensors: the host sizes the cache for
//! the context it needs, and one compilation serves every length. The
//! pieces read the step's new key and value from the projection, and the merge, which
//! runs once every piece has read the cache, appends them (`attention_kv_append`). From
//! batch 32 a piece per KV head (`S = 1`) holds the whole cache, and a task takes whole
//! heads instead (`attention_rope_heads`, several KV heads of one sequence a task): a piece
//! has a fixed cost of about 10 us, which one task pays for several heads at once, and
//! there is no merge. Every activation has a row block per layer (no scratch reuse, so no
//! write-after-read hazard to order), which costs `O(L · B · hidden)` bf16.
//!
//! **Rounding** is the reference's ([`crate::reference`]): bf16 stores of `h`, the norm
//! outputs, q/k/v (q and k again after RoPE), the attention output and `silu(gate)·up`;
//! f32 logits.
//!
//! Static sizes (hidden size, head geometry, batch, tiles) are dims of the megakernel, so
//! `decode_step!` stamps one megakernel per model shape and batch size; [`crate::Stamp`] lists
//! them and [`crate::decoder::Decoder`] picks one.

use et_core::prelude::*;

/// Stamps the decode megakernel for one model shape and batch size.
///
/// `norms = tasks(norm1, norm2, final)` runs the three norms as tile groups of those names;
/// `norms = reducing(norm1, norm2, final)` does too (`norm1` for layers 1 and up, `norm0`
/// for layer 0), with the output and down projections in `KP` splits of `k` whose partial
/// sums the norms add to the residual; `norms = fused(qkv, mlp, head)` fuses them into the
/// GEMV groups of those names. `tasks` and `reducing` take `attention = heads(..)`, whose
/// output projection they supply (with `split(..)` or `merged(..)` two groups would be
/// called `o_proj`, an error); the projections of `tasks` and `fused` are whole (`KP = 1`).
/// `attention = split(op)` runs the attention in `S` pieces per KV head with `op`:
/// `attention_rope_split`, or `attention_rope_split_lazy` (a fold of fewer instructions
/// for pieces of more than a few rows: RESULTS runs 22 and 30; `attention_rope_split_lazy_simt`,
/// the same on the CUDA cores), and a merge task per KV head, which
/// also appends the key and value. `attention = merged(op)` runs the same pieces without
/// merge tasks: each output-projection task merges all of its layer's pieces into its
/// arena (`attention_merge_matvec_residual`) and a task per sequence appends the keys and
/// values, off the critical path. `attention = heads(op, H = h, KH = k)` (with `S = 1`)
/// runs it in whole heads, `h` KV heads a task (`k` tasks per sequence, `h · k = NKV`),
/// through `op`, `attention_rope_heads` or `attention_rope_heads_simt` (its fold on the
/// CUDA cores): RoPE, the whole cache, the normalised output and the append in one task,
/// no merge.
///
/// Dims: `B` batch; `HD` hidden; `NKV` KV heads, `G` query heads per KV head, `D` head
/// dim; `V` vocabulary; `S` attention pieces per KV head (the cache's `P` positions per
/// sequence are a run-time dim, like the number of layers `L`). GEMV row tiles: the fused QKV
/// projection (`NKV · (G + 2) · D` rows, per KV head `G` query heads, its key, its value)
/// in `QT` tiles of `NQ` rows, `RT = (G + 2) · D / NQ` of them per KV head; the output
/// projection in `OT` tiles of `NO`; gate/up in `MT` tiles of `NM` (intermediate size
/// `MT · NM`); down in `DT` tiles of `ND` (`DT · ND = HD`, also the tiles of the
/// embedding); both in `KP` splits of `k`, `KO` and `KD` columns each (`KP · KO = NKV · G ·
/// D`, `KP · KD = MT · NM`); the LM head in `VT` tiles of `NV` rows, then `WT` tiles of `NW`
/// (`head_rest`, from tile `W0 = VT · NV / NW` in `NW` units; `VT · NV + WT · NW = V`): two
/// tile sizes, so that the head's tasks end in whole waves of the SMs. Then the RMSNorm
/// epsilon, the RoPE parameters (theta, factor, low and high frequency factors, original
/// context) and the attention scale `1/√D`.
macro_rules! decode_step {
    ($name:ident, B = $b:literal, HD = $hd:literal, NKV = $nkv:literal, G = $g:literal, D = $d:literal,
     V = $v:literal, S = $s:literal, NQ = $nq:literal, QT = $qt:literal, RT = $rt:literal,
     NO = $no:literal, OT = $ot:literal, NM = $nm:literal, MT = $mt:literal, ND = $nd:literal, DT = $dt:literal,
     KP = $kp:literal, KO = $ko:literal, KD = $kd:literal, NV = $nv:literal, VT = $vt:literal, NW = $nw:literal,
     WT = $wt:literal, W0 = $w0:literal, eps = $eps:tt, rope = ($theta:tt, $factor:tt, $low:tt, $high:tt, $orig:tt),
     scale = $scale:tt, attention = $(split($attention:ident))? $(merged($merged_op:ident))? $(heads($heads_op:ident, H = $h:literal, KH = $kh:literal))?,
     norms = $(tasks($norm1:ident, $norm2:ident, $norm_final:ident))?
     $(reducing($rnorm1:ident, $rnorm2:ident, $rnorm_final:ident))? $(fused($qkv_normed:ident, $mlp_normed:ident, $head_normed:ident))?) => {
        const _: () = assert!(
            $qt * $nq == $nkv * ($g + 2) * $d && $rt * $nq == ($g + 2) * $d && $ot * $no == $hd
                && $dt * $nd == $hd && $vt * $nv + $wt * $nw == $v,
            "decode_step!: the tile counts do not cover the model's sizes"
        );
        const _: () = assert!(
            $w0 * $nw == $vt * $nv && $wt >= 1,
            "decode_step!: the LM head's second part (WT >= 1 tiles of NW rows) starts at tile W0 = VT · NV / NW"
        );
        const _: () = assert!(
            $ko * $kp == $nkv * $g * $d && $kd * $kp == $mt * $nm,
            "decode_step!: the output and down projections' k (NKV · G · D and MT · NM) must be KP slices of KO and KD"
        );
        $(
            const _: () = assert!(
                $h * $kh == $nkv && $s == 1,
                "decode_step!: attention = heads(op, H, KH) takes H · KH = NKV heads in one piece (S = 1)"
            );
        )?

        /// One decode step of every layer as one megakernel (see [`crate::decode`]).
        #[megakernel(dims(B = $b, HD = $hd, NKV = $nkv, G = $g, D = $d, V = $v, S = $s, NQ = $nq,
                          QT = $qt, RT = $rt, NO = $no, OT = $ot, NM = $nm, MT = $mt, ND = $nd, DT = $dt,
                          KP = $kp, KO = $ko, KD = $kd, NV = $nv, VT = $vt, NW = $nw, WT = $wt, W0 = $w0
                          $(, H = $h, KH = $kh)?))]
        pub fn $name(
            ids: &Tensor<i32, { [B] }>,
            pos: &Tensor<i32, { [B] }>,
            table: &Tensor<bf16, { [V, HD] }>,
            lm_head: &Tensor<bf16, { [V, HD] }>,
            attn_norm: &Tensor<bf16, { [L * HD] }>,
            wqkv: &Tensor<bf16, { [L * QT * NQ, HD] }>,
            wo: &Tensor<bf16, { [L * OT * NO, NKV * G * D] }>,
            mlp_norm: &Tensor<bf16, { [L * HD] }>,
            w_gate: &Tensor<bf16, { [L * MT * NM, HD] }>,
            w_up: &Tensor<bf16, { [L * MT * NM, HD] }>,
            w_down: &Tensor<bf16, { [L * DT * ND, MT * NM] }>,
            final_norm: &Tensor<bf16, { [HD] }>,
            kc: &mut Tensor<bf16, { [L * B * NKV, P, D] }>,
            vc: &mut Tensor<bf16, { [L * B * NKV, P, D] }>,
            hs: &mut Tensor<bf16, { [L * B + B, HD] }>,
            hm: &mut Tensor<bf16, { [L * B, HD] }>,
            xn: &mut Tensor<bf16, { [L * B, HD] }>,
            xm: &mut Tensor<bf16, { [L * B, HD] }>,
            qkv: &mut Tensor<bf16, { [L * B, QT * NQ] }>,
            rope: &mut Tensor<f32, { [B, D] }>,
            po: &mut Tensor<f32, { [L * B * NKV * S * G, D] }>,
            pml: &mut Tensor<f32, { [L * B * NKV * S * G, 2] }>,
            pk: &mut Tensor<f32, { [2 * L * KP, B, HD] }>,
            attn: &mut Tensor<bf16, { [L * B, NKV * G * D] }>,
            act: &mut Tensor<bf16, { [L * B, MT * NM] }>,
            xf: &mut Tensor<bf16, { [B, HD] }>,
            logits: &mut Tensor<f32, { [B, V] }>,
            best: &mut Tensor<f32, { [B, VT + WT] }>,
            index: &mut Tensor<i32, { [B, VT + WT] }>,
            next: &mut Tensor<i32, { [B] }>,
            pos_next: &mut Tensor<i32, { [B] }>,
        ) {
            // h[l, r]: column tile r of the residual stream entering layer l (all sequences)
            let h = event!([L + 1, DT]);
            let qd = event!([L, QT]);
            let turned = event!([B]);
            let od = event!([L]);
            let md = event!([L]);
            let chosen = event!([1]);
            tile!(emb[r] in [DT] {
                embed(table.tile([0, r], [V, ND]), ids.tile([0], [B]), hs.tile([0, r], [B, ND]));
                signal!(h[0, r]);
            });
            tile!(angles[b] in [B] {
                rope_table(pos.tile([b], [1]), $theta, $factor, $low, $high, $orig, rope.tile([b, 0], [1, D]));
                signal!(turned[b]);
            });
            $(
                // the norms as tasks of their own: one per sequence, the GEMV waits for all
                let n1 = event!([L]);
                let n2 = event!([L]);
                let fdone = event!([1]);
                tile!($norm1[l, b] in [L, B] {
                    wait!(h[l, ..]);
                    rms_norm(hs.tile([l * B + b, 0], [1, HD]), attn_norm.tile([l], [HD]), $eps, xn.tile([l * B + b, 0], [1, HD]));
                    signal!(n1[l]);
                });
                tile!(qkv_proj[l, r] in [L, QT] {
                    wait!(n1[l]);
                    matvec(wqkv.tile([l * QT + r, 0], [NQ, HD]), xn.tile([l, 0], [B, HD]), qkv.tile([l, r], [B, NQ]));
                    signal!(qd[l, r]);
                });
            )?
            $(
                // the norms as tasks of their own, as above; from layer 1 on the norm also
                // sums the split-K partials of the down projection before it with its
                // residual (it writes the residual stream)
                let n1 = event!([L]);
                let n2 = event!([L]);
                let fdone = event!([1]);
                // hd[l, r]: every split of column tile r of layer l's down projection (in this
                // form `h` marks the embedding only: the norms write the residual stream)
                let hd = event!([L, DT]);
                tile!(norm0[b] in [B] {
                    wait!(h[0, ..]);
                    rms_norm(hs.tile([b, 0], [1, HD]), attn_norm.tile([0], [HD]), $eps, xn.tile([b, 0], [1, HD]));
                    signal!(n1[0]);
                });
                tile!($rnorm1[l, b] in [L - 1, B] {
                    wait!(hd[l, ..]);
                    rms_norm_split_residual(
                        pk.tile([2 * l + 1, b, 0], [KP, 1, HD]),
                        hm.tile([l * B + b, 0], [1, HD]),
                        attn_norm.tile([l + 1], [HD]),
                        $eps,
                        hs.tile([(l + 1) * B + b, 0], [1, HD]),
                        xn.tile([(l + 1) * B + b, 0], [1, HD]),
                    );
                    signal!(n1[l + 1]);
                });
                tile!(qkv_proj[l, r] in [L, QT] {
                    wait!(n1[l]);
                    matvec(wqkv.tile([l * QT + r, 0], [NQ, HD]), xn.tile([l, 0], [B, HD]), qkv.tile([l, r], [B, NQ]));
                    signal!(qd[l, r]);
                });
            )?
            $(
                // the norm inside each GEMV task, which waits for the whole residual row
                tile!($qkv_normed[l, r] in [L, QT] {
                    wait!(h[l, ..]);
                    rms_norm_matvec(
                        wqkv.tile([l * QT + r, 0], [NQ, HD]),
                        hs.tile([l, 0], [B, HD]),
                        attn_norm.tile([l], [HD]),
                        $eps,
                        qkv.tile([l, r], [B, NQ]),
                    );
                    signal!(qd[l, r]);
                });
            )?
            $(
            // S pieces per KV head, merged by a task per KV head, which also appends
            let parts = event!([L, B, NKV]);
            let merged = event!([L]);
            tile!(chunk[l, b, k, c] in [L, B, NKV, S] {
                wait!(turned[b]);
                wait!(qd[l, k * RT .. k * RT + RT]);
                $attention(
                    qkv.tile([l * B + b, k], [1, (G + 2) * D]),
                    pos.tile([b], [1]),
                    rope.tile([b, 0], [1, D]),
                    c,
                    S,
                    $scale,
                    kc.tile([(l * B + b) * NKV + k, 0, 0], [1, P, D]),
                    vc.tile([(l * B + b) * NKV + k, 0, 0], [1, P, D]),
                    po.tile([((l * B + b) * NKV + k) * S + c, 0], [G, D]),
                    pml.tile([((l * B + b) * NKV + k) * S + c, 0], [G, 2]),
                );
                signal!(parts[l, b, k]);
            });
            tile!(merge[l, b, k] in [L, B, NKV] {
                wait!(parts[l, b, k]);
                attention_merge(
                    po.tile([(l * B + b) * NKV + k, 0], [S * G, D]),
                    pml.tile([(l * B + b) * NKV + k, 0], [S * G, 2]),
                    attn.tile([l * B + b, k], [1, G * D]),
                );
                signal!(merged[l]);
                // off the critical path: the output projection may start meanwhile
                attention_kv_append(
                    qkv.tile([l * B + b, k], [1, (G + 2) * D]),
                    pos.tile([b], [1]),
                    rope.tile([b, 0], [1, D]),
                    kc.tile([(l * B + b) * NKV + k, 0, 0], [1, P, D]),
                    vc.tile([(l * B + b) * NKV + k, 0, 0], [1, P, D]),
                );
            });
            tile!(o_proj[l, r] in [L, OT] {
                wait!(merged[l]);
                matvec_residual(
                    wo.tile([l * OT + r, 0], [NO, NKV * G * D]),
                    attn.tile([l, 0], [B, NKV * G * D]),
                    hs.tile([l, r], [B, NO]),
                    hm.tile([l, r], [B, NO]),
                );
                signal!(od[l]);
            });
            )?
            $(
            // S pieces per KV head, merged by every output-projection task itself (no merge
            // task, no hop between the merge and the projection); a task per sequence appends
            // the keys and values once every piece has read the cache, off the critical path
            // (one task, not one per KV head: with the projection's tiles they fit the SMs)
            let pieces = event!([L]);
            tile!(chunk[l, b, k, c] in [L, B, NKV, S] {
                wait!(turned[b]);
                wait!(qd[l, k * RT .. k * RT + RT]);
                $merged_op(
                    qkv.tile([l * B + b, k], [1, (G + 2) * D]),
                    pos.tile([b], [1]),
                    rope.tile([b, 0], [1, D]),
                    c,
                    S,
                    $scale,
                    kc.tile([(l * B + b) * NKV + k, 0, 0], [1, P, D]),
                    vc.tile([(l * B + b) * NKV + k, 0, 0], [1, P, D]),
                    po.tile([((l * B + b) * NKV + k) * S + c, 0], [G, D]),
                    pml.tile([((l * B + b) * NKV + k) * S + c, 0], [G, 2]),
                );
                signal!(pieces[l]);
            });
            tile!(append[l, b] in [L, B] {
                wait!(pieces[l]);
                attention_kv_append(
                    qkv.tile([l * B + b, 0], [1, NKV * (G + 2) * D]),
                    pos.tile([b], [1]),
                    rope.tile([b, 0], [1, D]),
                    kc.tile([l * B + b, 0, 0], [NKV, P, D]),
                    vc.tile([l * B + b, 0, 0], [NKV, P, D]),
                );
            });
            tile!(o_proj[l, r] in [L, OT] {
                wait!(pieces[l]);
                attention_merge_matvec_residual(
                    wo.tile([l * OT + r, 0], [NO, NKV * G * D]),
                    po.tile([l, 0], [B * NKV * S * G, D]),
                    pml.tile([l, 0], [B * NKV * S * G, 2]),
                    G,
                    hs.tile([l, r], [B, NO]),
                    hm.tile([l, r], [B, NO]),
                );
                signal!(od[l]);
            });
            )?
            $(
            // H KV heads per task, each in one piece: no merge
            let merged = event!([L]);
            tile!(attend[l, b, kp] in [L, B, KH] {
                wait!(turned[b]);
                wait!(qd[l, kp * H * RT .. kp * H * RT + H * RT]);
                $heads_op(
                    qkv.tile([l * B + b, kp], [1, H * (G + 2) * D]),
                    pos.tile([b], [1]),
                    rope.tile([b, 0], [1, D]),
                    $scale,
                    kc.tile([(l * B + b) * KH + kp, 0, 0], [$h, P, D]),
                    vc.tile([(l * B + b) * KH + kp, 0, 0], [$h, P, D]),
                    attn.tile([l * B + b, kp], [1, H * G * D]),
                );
                signal!(merged[l]);
            });
            )?
            $(
                tile!(o_proj[l, r] in [L, OT] {
                    wait!(merged[l]);
                    matvec_residual(
                        wo.tile([l * OT + r, 0], [NO, NKV * G * D]),
                        attn.tile([l, 0], [B, NKV * G * D]),
                        hs.tile([l, r], [B, NO]),
                        hm.tile([l, r], [B, NO]),
                    );
                    signal!(od[l]);
                });
                tile!($norm2[l, b] in [L, B] {
                    wait!(od[l]);
                    rms_norm(hm.tile([l * B + b, 0], [1, HD]), mlp_norm.tile([l], [HD]), $eps, xm.tile([l * B + b, 0], [1, HD]));
                    signal!(n2[l]);
                });
                tile!(mlp[l, r] in [L, MT] {
                    wait!(n2[l]);
                    matvec_silu(
                        w_gate.tile([l * MT + r, 0], [NM, HD]),
                        w_up.tile([l * MT + r, 0], [NM, HD]),
                        xm.tile([l, 0], [B, HD]),
                        act.tile([l, r], [B, NM]),
                    );
                    signal!(md[l]);
                });
            )?
            $(
                // the output projection in KP splits of k (its output tasks' rows times the
                // splits fill the SMs), f32 partials that the norm after it sums with the
                // residual: a task reads 1/KP of the attention output, which at large
                // batches is several times the bytes of its weight rows (RESULTS run 31)
                tile!(o_proj[l, r, s] in [L, OT, KP] {
                    wait!(merged[l]);
                    matvec_split(
                        wo.tile([l * OT + r, s], [NO, KO]),
                        attn.tile([l, s], [B, KO]),
                        pk.tile([2 * l * KP + s, 0, r], [1, B, NO]),
                    );
                    signal!(od[l]);
                });
                tile!($rnorm2[l, b] in [L, B] {
                    wait!(od[l]);
                    rms_norm_split_residual(
                        pk.tile([2 * l, b, 0], [KP, 1, HD]),
                        hs.tile([l * B + b, 0], [1, HD]),
                        mlp_norm.tile([l], [HD]),
                        $eps,
                        hm.tile([l * B + b, 0], [1, HD]),
                        xm.tile([l * B + b, 0], [1, HD]),
                    );
                    signal!(n2[l]);
                });
                tile!(mlp[l, r] in [L, MT] {
                    wait!(n2[l]);
                    matvec_silu(
                        w_gate.tile([l * MT + r, 0], [NM, HD]),
                        w_up.tile([l * MT + r, 0], [NM, HD]),
                        xm.tile([l, 0], [B, HD]),
                        act.tile([l, r], [B, NM]),
                    );
                    signal!(md[l]);
                });
            )?
            $(
                tile!($mlp_normed[l, r] in [L, MT] {
                    wait!(od[l]);
                    rms_norm_matvec_silu(
                        w_gate.tile([l * MT + r, 0], [NM, HD]),
                        w_up.tile([l * MT + r, 0], [NM, HD]),
                        hm.tile([l, 0], [B, HD]),
                        mlp_norm.tile([l], [HD]),
                        $eps,
                        act.tile([l, r], [B, NM]),
                    );
                    signal!(md[l]);
                });
            )?
            $(
                tile!(down[l, r] in [L, DT] {
                    wait!(md[l]);
                    matvec_residual(
                        w_down.tile([l * DT + r, 0], [ND, MT * NM]),
                        act.tile([l, 0], [B, MT * NM]),
                        hm.tile([l, r], [B, ND]),
                        hs.tile([l + 1, r], [B, ND]),
                    );
                    signal!(h[l + 1, r]);
                });
                tile!($norm_final[b] in [B] {
                    wait!(h[L, ..]);
                    rms_norm(hs.tile([L * B + b, 0], [1, HD]), final_norm.tile([0], [HD]), $eps, xf.tile([b, 0], [1, HD]));
                    signal!(fdone[0]);
                });
                tile!(head[t] in [VT] {
                    wait!(fdone[0]);
                    matvec(lm_head.tile([t, 0], [NV, HD]), xf.tile([0, 0], [B, HD]), logits.tile([0, t], [B, NV]));
                    argmax_partial(logits.tile([0, t], [B, NV]), t * NV, best.tile([0, t], [B, 1]), index.tile([0, t], [B, 1]));
                    signal!(chosen[0]);
                });
                tile!(head_rest[t] in [WT] {
                    wait!(fdone[0]);
                    matvec(lm_head.tile([W0 + t, 0], [NW, HD]), xf.tile([0, 0], [B, HD]), logits.tile([0, W0 + t], [B, NW]));
                    argmax_partial(
                        logits.tile([0, W0 + t], [B, NW]),
                        (W0 + t) * NW,
                        best.tile([0, VT + t], [B, 1]),
                        index.tile([0, VT + t], [B, 1]),
                    );
                    signal!(chosen[0]);
                });
            )?
            $(
                // the down projection in KP splits of k, as the output projection; the next
                // layer's norm (or the final one) sums them with the residual
                tile!(down[l, r, s] in [L, DT, KP] {
                    wait!(md[l]);
                    matvec_split(
                        w_down.tile([l * DT + r, s], [ND, KD]),
                        act.tile([l, s], [B, KD]),
                        pk.tile([(2 * l + 1) * KP + s, 0, r], [1, B, ND]),
                    );
                    signal!(hd[l, r]);
                });
                tile!($rnorm_final[b] in [B] {
                    wait!(hd[L - 1, ..]);
                    rms_norm_split_residual(
                        pk.tile([2 * L - 1, b, 0], [KP, 1, HD]),
                        hm.tile([(L - 1) * B + b, 0], [1, HD]),
                        final_norm.tile([0], [HD]),
                        $eps,
                        hs.tile([L * B + b, 0], [1, HD]),
                        xf.tile([b, 0], [1, HD]),
                    );
                    signal!(fdone[0]);
                });
                tile!(head[t] in [VT] {
                    wait!(fdone[0]);
                    matvec(lm_head.tile([t, 0], [NV, HD]), xf.tile([0, 0], [B, HD]), logits.tile([0, t], [B, NV]));
                    argmax_partial(logits.tile([0, t], [B, NV]), t * NV, best.tile([0, t], [B, 1]), index.tile([0, t], [B, 1]));
                    signal!(chosen[0]);
                });
                tile!(head_rest[t] in [WT] {
                    wait!(fdone[0]);
                    matvec(lm_head.tile([W0 + t, 0], [NW, HD]), xf.tile([0, 0], [B, HD]), logits.tile([0, W0 + t], [B, NW]));
                    argmax_partial(
                        logits.tile([0, W0 + t], [B, NW]),
                        (W0 + t) * NW,
                        best.tile([0, VT + t], [B, 1]),
                        index.tile([0, VT + t], [B, 1]),
                    );
                    signal!(chosen[0]);
                });
            )?
            $(
                tile!(down[l, r] in [L, DT] {
                    wait!(md[l]);
                    matvec_residual(
                        w_down.tile([l * DT + r, 0], [ND, MT * NM]),
                        act.tile([l, 0], [B, MT * NM]),
                        hm.tile([l, r], [B, ND]),
                        hs.tile([l + 1, r], [B, ND]),
                    );
                    signal!(h[l + 1, r]);
                });
                tile!($head_normed[t] in [VT] {
                    wait!(h[L, ..]);
                    rms_norm_matvec(
                        lm_head.tile([t, 0], [NV, HD]),
                        hs.tile([L, 0], [B, HD]),
                        final_norm.tile([0], [HD]),
                        $eps,
                        logits.tile([0, t], [B, NV]),
                    );
                    argmax_partial(logits.tile([0, t], [B, NV]), t * NV, best.tile([0, t], [B, 1]), index.tile([0, t], [B, 1]));
                    signal!(chosen[0]);
                });
                tile!(head_rest[t] in [WT] {
                    wait!(h[L, ..]);
                    rms_norm_matvec(
                        lm_head.tile([W0 + t, 0], [NW, HD]),
                        hs.tile([L, 0], [B, HD]),
                        final_norm.tile([0], [HD]),
                        $eps,
                        logits.tile([0, W0 + t], [B, NW]),
                    );
                    argmax_partial(
                        logits.tile([0, W0 + t], [B, NW]),
                        (W0 + t) * NW,
                        best.tile([0, VT + t], [B, 1]),
                        index.tile([0, VT + t], [B, 1]),
                    );
                    signal!(chosen[0]);
                });
            )?
            // a task per sequence: the merge of 528 tiles' maxima is about 35 us for 64 rows
            // on one SM
            tile!(pick[b] in [B] {
                wait!(chosen[0]);
                argmax_merge(best.tile([b, 0], [1, VT + WT]), index.tile([b, 0], [1, VT + WT]), next.tile([b], [1]));
                next_positions(pos.tile([b], [1]), pos_next.tile([b], [1]));
            });
        }
    };
}

/// Stamps a model config's megakernel for a batch size: `decode_step!` with the config's
/// shapes and fixed tiles (`config = (..)`) and the output and down projections' tiles
/// `(NO, OT, ND, DT, KP, KO, KD)` that the norms' form takes: `whole = (..)` for `fused`
/// and `tasks`, `split = (..)` (`KP` splits of `k`) for `reducing`, where the config has
/// them (`split = none` where not).
macro_rules! stamp {
    (@step (HD = $hd:literal, NKV = $nkv:literal, G = $g:literal, D = $d:literal, V = $v:literal,
                  NQ = $nq:literal, QT = $qt:literal, RT = $rt:literal, NM = $nm:literal, MT = $mt:literal,
                  NV = $nv:literal, VT = $vt:literal, NW = $nw:literal, WT = $wt:literal, W0 = $w0:literal,
                  rope = $rope:tt, scale = $scale:tt),
     ($no:literal, $ot:literal, $nd:literal, $dt:literal, $kp:literal, $ko:literal, $kd:literal),
     $name:ident, B = $b:literal, S = $s:literal, attention = $kind:ident $args:tt, norms = $form:ident $norms:tt) => {
        decode_step!(
            $name,
            B = $b,
            HD = $hd,
            NKV = $nkv,
            G = $g,
            D = $d,
            V = $v,
            S = $s,
            NQ = $nq,
            QT = $qt,
            RT = $rt,
            NO = $no,
            OT = $ot,
            NM = $nm,
            MT = $mt,
            ND = $nd,
            DT = $dt,
            KP = $kp,
            KO = $ko,
            KD = $kd,
            NV = $nv,
            VT = $vt,
            NW = $nw,
            WT = $wt,
            W0 = $w0,
            eps = 0.00001,
            rope = $rope,
            scale = $scale,
            attention = $kind $args,
            norms = $form $norms
        );
    };
    (config = $config:tt, whole = $whole:tt, split = none, $name:ident, B = $b:literal, S = $s:literal,
     attention = $kind:ident $args:tt, norms = reducing $norms:tt) => {
        compile_error!(concat!(stringify!($name), ": this config has no split projections for `norms = reducing(..)`"));
    };
    (config = $config:tt, whole = $whole:tt, split = $split:tt, $name:ident, B = $b:literal, S = $s:literal,
     attention = $kind:ident $args:tt, norms = reducing $norms:tt) => {
        stamp!(@step $config, $split, $name, B = $b, S = $s, attention = $kind $args, norms = reducing $norms);
    };
    (config = $config:tt, whole = $whole:tt, split = $split:tt, $name:ident, B = $b:literal, S = $s:literal,
     attention = $kind:ident $args:tt, norms = $form:ident $norms:tt) => {
        stamp!(@step $config, $whole, $name, B = $b, S = $s, attention = $kind $args, norms = $form $norms);
    };
}

/// Stamps the `tiny` config's megakernel for a batch size.
macro_rules! tiny {
    ($name:ident, $($call:tt)*) => {
        stamp!(
            config = (HD = 128, NKV = 2, G = 2, D = 64, V = 256, NQ = 64, QT = 8, RT = 4, NM = 64, MT = 4, NV = 48, VT = 4,
                   NW = 64, WT = 1, W0 = 3, rope = (10000.0, 8.0, 1.0, 4.0, 256.0), scale = 0.125),
            whole = (32, 4, 32, 4, 1, 256, 256),
            split = (32, 4, 32, 4, 2, 128, 128),
            $name, $($call)*
        );
    };
}

/// Stamps llama-3.2-1b's megakernel for a batch size: the fused QKV projection in 128 tiles
/// of 24 rows (one per SM, where 192 tiles of 16 took two waves), the other GEMVs in 128
/// tiles, the attention of each KV head in `S` pieces (about 128 pieces per layer at every
/// batch: a piece costs a task). The output and down projections are whole (1b's lost 3%
/// and 8% in splits of `k`: RESULTS run 31). The LM head's 128256 rows are 432 tiles of 240
/// and 96 of 256 (the 8b's too): 528 tasks, four for each of 132 SMs, none with more than
/// 976 rows (61 row groups of 16, the fewest possible: 128256 / 16 / 132 = 60.7), where 501
/// tiles of 256 took 3.8 waves and gave 105 SMs 1024 rows.
macro_rules! llama_1b {
    ($name:ident, $($call:tt)*) => {
        stamp!(
            config = (HD = 2048, NKV = 8, G = 4, D = 64, V = 128256, NQ = 24, QT = 128, RT = 16, NM = 64, MT = 128,
                   NV = 240, VT = 432, NW = 256, WT = 96, W0 = 405, rope = (500000.0, 32.0, 1.0, 4.0, 8192.0),
                   scale = 0.125),
            whole = (16, 128, 16, 128, 1, 2048, 8192),
            split = none,
            $name, $($call)*
        );
    };
}

/// Stamps llama-3.1-8b's megakernel for a batch size (the 1B's tiling, twice the rows;
/// with `norms = reducing(..)` 32 tiles of 128 rows times 4 splits of `k` for the output
/// and down projections).
macro_rules! llama_8b {
    ($name:ident, $($call:tt)*) => {
        stamp!(
            config = (HD = 4096, NKV = 8, G = 4, D = 128, V = 128256, NQ = 48, QT = 128, RT = 16, NM = 112, MT = 128,
                   NV = 240, VT = 432, NW = 256, WT = 96, W0 = 405, rope = (500000.0, 8.0, 1.0, 4.0, 8192.0),
                   scale = 0.08838834764831845),
            whole = (32, 128, 32, 128, 1, 4096, 14336),
            split = (128, 32, 128, 32, 4, 1024, 3584),
            $name, $($call)*
        );
    };
}

// Up to batch 8 the norms run inside the GEMV tasks (the rows fit the arena: a hop and a
// stage less per norm); from 32 on as tasks of their own (the fused form would stream
// each weight tile once per 8 rows). The attention pieces take the lazy fold at every
// batch: long pieces are bound by the fold's instruction issue, and it made the step
// 4.6%, 6% and 8% faster at B = 8, 32 and 64 (RESULTS run 22); at 1b's head dim 64 that
// fold runs on the tensor cores (B = 32 11% faster again, B = 8 level, B = 64 1.7%
// slower: RESULTS run 23). Batch 1 kept the plain fold (whose one-warp path suits a few
// rows) until run 30 measured the lazy ones there: 1b B = 1 (8 pieces, the tensor-core
// fold) 12.7% faster at KV 8192 and level at KV 1024, 8b B = 1 (16 pieces, the CUDA-core
// lazy fold; the tensor-core one lost 7%) 1.0% and 4.7% faster. From batch 32 a
// task takes whole KV heads (`heads(..)`: 128 tasks a layer, one wave; no merge): the step
// 28% faster at B = 64 (2.740 against 3.804 ms) and 4% at B = 32 (RESULTS run 24).
// At 8b's head dim 128 the tensor-core fold (RESULTS run 26) made B = 64 15% faster (KV
// 1024; 47% at KV 8192) but B = 8 5% and B = 32 12% slower: its registers cost the GEMVs
// of those megakernels more than the attention gained, so B = 8 takes the `_simt` op.
// Since the wgmma GEMV (no fragment registers) B = 32 is 7.6% faster with the tensor-core
// fold (7.310 against 7.908 ms, RESULTS run 34), and takes it.
// At 1b B = 1 the output projection merges the pieces itself (`merged(..)`, RESULTS run
// 29); at B = 8 that merge re-reads 128 KB of pieces per projection task and lost, and
// at 8b B = 1 its `S = 8` pieces (two warp steps of head dim 128) and 128 KB lost too.
// From batch 32 llama-3.1-8b's output and down projections run in 4 splits of k that the
// norm tasks sum (`norms = reducing(..)`): 11% faster at B = 32, 9% at 64 (the down
// projection's span at B = 32 74.6 -> 41.0 us a layer); 1b's (k of 2048 and 8192, tiles
// of 64 rows) lost 3% and 8% in that form, even with whole projections (RESULTS run 31).
// The tiny config has every form (B = 1 merged, B = 2 whole heads and norm tasks, B = 3
// the summing norm tasks, B = 4 split with merge tasks), so the CPU tests check each one
// against the reference.
tiny!(decode_tiny_b1, B = 1, S = 8, attention = merged(attention_rope_split), norms = fused(qkv_proj, mlp, head));
tiny!(
    decode_tiny_b2,
    B = 2,
    S = 1,
    attention = heads(attention_rope_heads, H = 2, KH = 1),
    norms = tasks(norm1, norm2, final_norm_row)
);
tiny!(
    decode_tiny_b3,
    B = 3,
    S = 1,
    attention = heads(attention_rope_heads, H = 1, KH = 2),
    norms = reducing(norm1, norm2, final_norm_row)
);
tiny!(decode_tiny_b4, B = 4, S = 2, attention = split(attention_rope_split_lazy), norms = fused(qkv_proj, mlp, head));
llama_1b!(
    decode_1b_b1,
    B = 1,
    S = 8,
    attention = merged(attention_rope_split_lazy),
    norms = fused(qkv_proj, mlp, head)
);
llama_1b!(decode_1b_b8, B = 8, S = 2, attention = split(attention_rope_split_lazy), norms = fused(qkv_proj, mlp, head));
llama_1b!(
    decode_1b_b32,
    B = 32,
    S = 1,
    attention = heads(attention_rope_heads, H = 2, KH = 4),
    norms = tasks(norm1, norm2, final_norm_row)
);
llama_1b!(
    decode_1b_b64,
    B = 64,
    S = 1,
    attention = heads(attention_rope_heads, H = 4, KH = 2),
    norms = tasks(norm1, norm2, final_norm_row)
);
llama_8b!(
    decode_8b_b1,
    B = 1,
    S = 16,
    attention = split(attention_rope_split_lazy_simt),
    norms = fused(qkv_proj, mlp, head)
);
llama_8b!(
    decode_8b_b8,
    B = 8,
    S = 2,
    attention = split(attention_rope_split_lazy_simt),
    norms = fused(qkv_proj, mlp, head)
);
llama_8b!(
    decode_8b_b32,
    B = 32,
    S = 1,
    attention = heads(attention_rope_heads, H = 2, KH = 4),
    norms = reducing(norm1, norm2, final_norm_row)
);
llama_8b!(
    decode_8b_b64,
    B = 64,
    S = 1,
    attention = heads(attention_rope_heads, H = 4, KH = 2),
    norms = reducing(norm1, norm2, final_norm_row)
);
