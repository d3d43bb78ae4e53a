//! GEMV / skinny GEMM `y[b, n] = Σ_k x[b, k] · w[n, k]` over a tile of weight rows, batch
//! 1 to 64, with fused epilogues and a split-K form.
//!
//! A batch of 1 runs on CUDA cores (a warp per weight row, lanes over `k` in 16-byte
//! pieces, no barrier between warps: the fastest on small tasks). Where `x` is in global
//! memory its weights stream through a `cp.async` ring in the arena (each lane its own
//! slots, four 1 KB pieces a warp in flight across row ends, `x`'s row copied into the
//! arena first; RESULTS run 28); the fused norm GEMVs, whose `x` is in shared memory,
//! load them into registers, four pieces at a time. From a batch of 2 on, one path on
//! the tensor cores (`mma.sync.m16n8k16` bf16 → f32): a
//! *unit* of work is 16 weight rows of one weight tile over one slice of `k`, and a warp
//! multiplies its 16 rows with the batch in 8-row pieces (n), so a small batch wastes mma
//! lanes, not bandwidth, and each weight element is converted and multiplied once
//! whatever the batch. The tile's rows × `k` slices × weight tiles (gate and up are two)
//! are cut into units so that every warp of a 512-thread CTA streams about the same
//! number of bytes for any tile shape ([`plan`]); each unit leaves its f32 partial sums
//! in the op's shared-memory arena, and after one barrier the CTA sums the slices in
//! slice order (deterministic) and applies the epilogue, its threads over consecutive
//! outputs (coalesced stores). Up to batch 16 a lane keeps four 32-wide `k` steps of its
//! two weight rows in flight (eight 16-byte `ld.global.nc`, 64 KB per 16-warp SM) and
//! reloads each step's registers as soon as that step's mmas have read them, so the stream
//! never drains inside a unit. Above batch 16 the accumulators need those registers: the
//! weights stream through a ring of four 1 KB slots per warp in the arena instead
//! ([`ring_bytes`]), copied by `cp.async` three steps ahead and read back by the lane that
//! copied them, so four steps stay in flight with one in registers (RESULTS run 20).
//! Where the warps running together (a *wave*) work on at most two `k` slices (the LM
//! head, gate/up, split-K tiles), the CTA also copies each step's activations of those
//! slices into an activation ring once, three steps ahead, with a barrier a step, instead
//! of each warp reading 4 KB of `x` a step from L1/L2 for its 1 KB of weights: the LM head
//! at batch 64 went from 654 to 264 us (RESULTS run 21). Where the extents are static only
//! the ring paths the plan's waves take are compiled ([`ring_bytes`] sizes both rings).
//! On sm_90a, tiles of at least 32 rows take Hopper's warpgroup mma above batch 16
//! instead (`matvec_wgmma`): a unit is 64 rows over a `k` slice, run by a warpgroup, both
//! operands copied by `cp.async` into two 128-byte-swizzled stages of 64 `k` that
//! `wgmma.mma_async` reads by descriptor; the gate/up GEMV at batch 64 went from 48% to 79%
//! of the copy bandwidth (RESULTS run 33). Where the extents and the CTA size (the
//! source's `ET_CTA_THREADS`) say at compile time that every launch with 16-byte aligned
//! rows takes it, that path is compiled alone, beside a small scalar one for unaligned
//! rows (`matvec_rows_scalar`), not beside the mma.sync path: NVRTC compiles a batch-32
//! or 64 Llama step 15–40% faster (RESULTS run 46).
//! The mma reads both operands straight from global memory in 16-byte pieces: a lane's eight consecutive `k` of a weight row and of a batch row feed two
//! mmas, which sums the same products in a permuted `k` order (the permutation is the
//! same for both operands); `x` is an activation (ordinary loads, served from L1 to the
//! units that share its slice; up to batch 16 its fragments are loaded with the weights',
//! U steps ahead, where x is in global memory: `ET_GEMV_X_INFLIGHT`, 3–7% on the MoE
//! experts' 16-row tiles, RESULTS run 18). When x's tile type gives the batch at compile time
//! (`static_extent<0>()`, as every megakernel's does), the register arrays and loops are
//! sized to it; a tile with a run-time batch compiles one instance sized for 64.

use super::decode_cuda;
use crate::dtype::{Element, bf16};
use crate::tile::{TileMut, TileRef};

/// The arena bytes one GEMV call may use for its partial sums: large tiles at large
/// batches work in rounds of row groups that fit it. 96 KB leaves the SM about 130 KB of
/// L1 for the activations that the units of a slice share.
pub const ARENA_CAP: usize = 96 * 1024;
/// The cap on the partial sums above batch 16, where the ring ([`ring_bytes`], up to
/// 129 KB) follows them in the same arena: 80 KB keeps the two and the Llama step's
/// static shared memory within the card's 227 KB.
pub const ARENA_CAP_RING: usize = 80 * 1024;
/// The warps the work is balanced for (the default CTA of 512 threads); other CTA sizes
/// compute the same results, less evenly spread.
const PLAN_WARPS: usize = 16;
/// The `k` granule of a unit: four 32-wide mma steps, one round of loads in flight.
const K_GRANULE: usize = 128;
/// Rows of the partial buffer per row group (16) and the padding of a batch row (4
/// floats), which puts the four `t` lanes of an mma fragment on distinct banks.
const GROUP_ROWS: usize = 16;
const ROW_PAD: usize = 4;

/// How a GEMV call cuts its work (the CUDA's `matvec_plan` computes the same, from the
/// same integers, and must stay identical: this one sizes the arena the CUDA writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// 16-row groups of the weight tile per round (all of them unless the partial sums
    /// of a round would exceed [`ARENA_CAP`], or [`ARENA_CAP_RING`] above batch 16).
    pub groups_per_round: usize,
    /// Slices of `k` per row group: a unit is one row group of one weight tile over one
    /// slice.
    pub splits: usize,
    /// The width of a slice, a multiple of 128 (the last slice ends at `k`).
    pub split_k: usize,
    /// The stride (floats) of one batch row of a slice's partial sums.
    pub row_stride: usize,
}

const fn cdiv(a: usize, b: usize) -> usize {
    a.div_ceil(b)
}

/// The work plan of a GEMV over `mats` weight tiles (1, or 2 for gate and up) of `rows x
/// k`, at batch `batch`: the smallest number of `k` slices that spreads the units most
/// evenly over [`PLAN_WARPS`] warps (the busiest warp's share of the bytes, `⌈units /
/// warps⌉ / splits`, is smallest) while the partial sums fit [`ARENA_CAP`]
/// ([`ARENA_CAP_RING`] above batch 16); slices of at least 128 columns, at most 16.
pub const fn plan(rows: usize, k: usize, batch: usize, mats: usize) -> Plan {
    let groups = if rows > 0 { cdiv(rows, GROUP_ROWS) } else { 1 };
    let b = if batch > 0 { batch } else { 1 };
    let w = if mats > 0 { mats } else { 1 };
    let cap = if b > 16 { ARENA_CAP_RING } else { ARENA_CAP };
    let cap_rows = cap / (4 * w * b);
    let fit = if cap_rows > GROUP_ROWS + ROW_PAD { (cap_rows - ROW_PAD) / GROUP_ROWS } else { 1 };
    let gr = if groups < fit { groups } else { fit };
    let rs = GROUP_ROWS * gr + ROW_PAD;
    let smax = if k > 0 { cdiv(k, K_GRANULE) } else { 1 };
    let smax = if smax > PLAN_WARPS { PLAN_WARPS } else { smax };
    let (mut best, mut best_num) = (1, cdiv(w * gr, PLAN_WARPS));
    let mut s = 2;
    while s <= smax {
        if w * s * b * rs * 4 > cap {
            break;
        }
        let num = cdiv(w * gr * s, PLAN_WARPS);
        if num * best < best_num * s {
            best = s;
            best_num = num;
        }
        s += 1;
    }
    let per = if k > 0 { cdiv(k, best) } else { 1 };
    let split_k = cdiv(per, K_GRANULE) * K_GRANULE;
    let splits = if k > 0 { cdiv(k, split_k) } else { 1 };
    Plan { groups_per_round: gr, splits, split_k, row_stride: rs }
}

/// The f32 partial sums of one round of a GEMV of the `[rows, k]` weight tile `w`
/// (extents as `tile_op!` passes them) with `mats` weight tiles and the `[batch, k]`
/// activations `x`: `mats × splits × batch × row_stride` floats, none at batch 1 (the
/// CUDA-core path keeps its sums in registers).
pub const fn partial_bytes(w: &[usize], x: &[usize], mats: usize) -> usize {
    match (w, x) {
        (&[rows, k], &[batch, _]) if batch > 1 => {
            let p = plan(rows, k, batch, mats);
            let w = if mats > 0 { mats } else { 1 };
            w * p.splits * batch * p.row_stride * 4
        }
        _ => 0,
    }
}

/// The `k` steps of weight fragments in flight per warp on the tensor-core path above
/// batch 16, through a ring in the arena (`cp.async`, no registers: the accumulators of
/// eight 8-row batch pieces leave too few to hold more than one step in flight).
pub const RING_STEPS: usize = 4;
/// One ring slot of one warp: a 32-wide `k` step of its 16 weight rows (1 KB).
const RING_SLOT_BYTES: usize = 32 * GROUP_ROWS * 2;

/// The `k` slices whose activations a wave of warps stages in shared memory together
/// (a wave whose units span more slices reads its activations per warp).
const XSTAGE_SLICES: usize = 2;

/// The bytes of the activation ring beside the weight ring: [`RING_STEPS`] slots of a
/// 32-wide `k` step of the batch (rounded up to 8 rows) for [`XSTAGE_SLICES`] slices.
const fn xring_bytes(batch: usize) -> usize {
    RING_STEPS * XSTAGE_SLICES * cdiv(batch, 8) * 8 * 64
}

/// The stages in flight per warpgroup on the wgmma path (`matvec_unit_wgmma`).
pub const WG_STAGES: usize = 2;

/// One wgmma stage of one warpgroup: 64 `k` (128 bytes) of its 64 weight rows and of the
/// batch's columns (32 up to batch 32, 64 above).
const fn wg_stage_bytes(batch: usize) -> usize {
    (64 + if batch > 32 { 64 } else { 32 }) * 128
}

/// The ring bytes for a batch of `batch`, none up to batch 16 (where the registers hold
/// the steps in flight); above, the larger of the two paths': the warps' weight rings and
/// the activation ring ([`xring_bytes`]) of the `mma.sync` path, or the warpgroups'
/// stages ([`WG_STAGES`]) and 1 KB to align them to the swizzle's 1024-byte atoms, of
/// the wgmma path (sm_90a).
pub const fn ring_bytes(batch: usize) -> usize {
    if batch <= 16 {
        return 0;
    }
    let mma = PLAN_WARPS * RING_STEPS * RING_SLOT_BYTES + xring_bytes(batch);
    let wg = PLAN_WARPS / 4 * WG_STAGES * wg_stage_bytes(batch) + 1024;
    if mma > wg { mma } else { wg }
}

/// The 1 KB pieces each warp of the batch-1 CUDA-core path keeps in flight through its
/// cp.async ring in the arena (`ET_GEMV_SIMT_RING` in the CUDA).
pub const SIMT_RING_STEPS: usize = 4;
/// The batch-1 ring of a 16-warp CTA: [`SIMT_RING_STEPS`] pieces of 1 KB a warp.
pub const SIMT_RING_BYTES: usize = PLAN_WARPS * SIMT_RING_STEPS * 1024;

/// The arena bytes of the `k` activations a batch-1 GEMV copies in before its ring (whole
/// 16-byte pieces, then 128-byte alignment for the ring).
const fn simt_x_bytes(k: usize) -> usize {
    (k.div_ceil(8) * 16).div_ceil(128) * 128
}

/// The arena bytes of a GEMV call: the prefetch record ([`PREFETCH_RECORD`]), then the
/// partial sums ([`partial_bytes`]), which start after the prefetched rows when there
/// are some, then the weight ring above batch 16 ([`ring_bytes`]); and at least what a
/// batch-1 call takes, the record, its row of `x` and its ring ([`SIMT_RING_BYTES`]), at
/// every batch, so that an arena sized at a symbolic batch's maximum also holds a
/// batch-1 launch's.
pub const fn arena_bytes(w: &[usize], x: &[usize], mats: usize) -> usize {
    match (w, x) {
        (&[_, k], &[batch, _]) => {
            let sized = PREFETCH_RECORD + partial_bytes(w, x, mats) + ring_bytes(batch);
            let one = PREFETCH_RECORD + simt_x_bytes(k) + SIMT_RING_BYTES;
            if sized > one { sized } else { one }
        }
        _ => 0,
    }
}

/// The arena's first bytes, where a [`matvec_prefetch`] leaves the record of what it
/// copies (tiles, rows, the mbarrier) for the GEMV of the same task; the rows follow.
pub const PREFETCH_RECORD: usize = 128;
/// The arena a prefetch asks for at most: 200 KB of the card's 227 KB opt-in maximum,
/// which leaves 27 KB for the kernel's and the ops' static shared variables (the Llama
/// decode step has 10.5 KB). The copy itself fills the arena the launch gives.
const PREFETCH_LIMIT: usize = 200 * 1024;
/// The padding after each prefetched row: 64 bytes put the eight rows an mma fragment
/// reads at once on distinct banks when a row is a multiple of 128 bytes.
const PREFETCH_ROW_PAD: usize = 64;

/// The rows of each of `mats` `[rows, k]` weight tiles a prefetch copies into an arena of
/// `capacity` bytes beside the partial sums and the weight ring of a batch of `batch`
/// (the rows not copied stream through the ring): as many as fit (a
/// multiple of 16 when not all fit and the batch takes the tensor cores, whose units are
/// 16 rows), none when a row is not whole 16-byte lines (the bulk copies need them). The
/// CUDA of [`matvec_prefetch`] computes the same with the launch's arena.
pub const fn prefetch_rows(rows: usize, k: usize, batch: usize, mats: usize, capacity: usize) -> usize {
    let partials = partial_bytes(&[rows, k], &[batch, k], mats) + ring_bytes(batch);
    let row = 2 * k + PREFETCH_ROW_PAD;
    let mats = if mats > 0 { mats } else { 1 };
    if k == 0 || !(2 * k).is_multiple_of(16) || capacity < PREFETCH_RECORD + partials {
        return 0;
    }
    let fit = (capacity - PREFETCH_RECORD - partials) / (mats * row);
    if fit >= rows {
        rows
    } else if batch > 1 {
        fit - fit % 16
    } else {
        fit
    }
}

/// The arena bytes a prefetch of `mats` `[rows, k]` weight tiles asks for: the record and
/// the rows that fit within the card's limit at batch 1 (no partial sums). At a larger
/// batch the copy takes the rows that fit beside the GEMV's partial sums in the arena the
/// launch gives (the largest call's), which may be fewer.
pub const fn prefetch_bytes(w: &[usize], mats: usize) -> usize {
    match w {
        &[rows, k] => {
            let r = prefetch_rows(rows, k, 1, mats, PREFETCH_LIMIT);
            let mats = if mats > 0 { mats } else { 1 };
            PREFETCH_RECORD + mats * r * (2 * k + PREFETCH_ROW_PAD)
        }
        _ => 0,
    }
}

/// The shared CUDA core of the GEMV family (prepended to each op's text).
macro_rules! matvec_cuda {
    ($body:literal) => {
        matvec_cuda!([] $body)
    };
    ([$($pre:expr),*] $body:literal) => {
        $crate::ops::decode::decode_cuda!([r#"
// 16-byte loads in flight per lane and k step: the CUDA-core path (batch 1) keeps
// ET_GEMV_SIMT_U of one weight row in flight (half per matrix for a pair), the tensor-core
// path ET_GEMV_MMA_U steps of two rows (a quarter, rounded up, above batch 16). Defaults
// measured on the H200 (RESULTS); -D in ET_NVRTC_OPTIONS overrides them for side-by-side
// runs.
#ifndef ET_GEMV_SIMT_U
#define ET_GEMV_SIMT_U 4
#endif
#ifndef ET_GEMV_MMA_U
#define ET_GEMV_MMA_U 4
#endif
// Above batch 16 the tensor-core path streams the weights through a ring in the arena
// instead: ET_GEMV_RING k steps of a warp's 16 rows in flight by cp.async (`RING_STEPS`
// in gemv.rs sizes the arena for 4; a ring the arena cannot hold falls back to the
// registers). 0 keeps the weights in registers, for side-by-side runs.
#ifndef ET_GEMV_RING
#define ET_GEMV_RING 4
#endif
// Whether, beside the weight ring, a wave of warps whose units lie in at most two k slices
// stages each step's activations in the arena once for the CTA (`matvec_unit_staged`), so
// that a warp does not read 4 KB of x a step from L1/L2 (batch 64) for its 1 KB of
// weights. 0 reads x per warp, for side-by-side runs (the arena still holds the ring).
#ifndef ET_GEMV_XSTAGE
#define ET_GEMV_XSTAGE 1
#endif
// The CUDA-core path's loads in flight on tiles of at least 512 Ki weights (the LM head's
// 256 x 2048 and larger), where a task streams long enough for more to pay.
#ifndef ET_GEMV_SIMT_U_LARGE
#define ET_GEMV_SIMT_U_LARGE 8
#endif
// Whether the tensor-core path keeps x's B fragments in flight with the weights (its U
// steps) where x is in global memory and the batch is at most 16 (two 8-row pieces, whose
// fragments fit the registers). Otherwise every k step's mma waits for its x load, an L2
// round trip when another SM wrote x (an MoE expert's 16 gathered rows). 0 turns it off.
#ifndef ET_GEMV_X_INFLIGHT
#define ET_GEMV_X_INFLIGHT 1
#endif
// The batch-1 CUDA-core path's pieces in flight per warp through its cp.async ring in the
// arena (`SIMT_RING_STEPS` in gemv.rs sizes the arena for 4; a ring the arena cannot hold
// falls back to the registers). 0 keeps the weights in registers, for side-by-side runs.
#ifndef ET_GEMV_SIMT_RING
#define ET_GEMV_SIMT_RING 4
#endif
// Whether the tensor-core path above batch 16 runs on Hopper's warpgroup mma (`wgmma`,
// sm_90a only: `matvec_wgmma`) instead of the ring of mma.sync units. 0 compiles the ring,
// for side-by-side runs; other architectures always take the ring.
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#undef ET_GEMV_WGMMA
#define ET_GEMV_WGMMA 0
#elif !defined(ET_GEMV_WGMMA)
#define ET_GEMV_WGMMA 1
#endif
// Whether a GEMV whose wgmma path every aligned launch takes compiles it alone, with a
// scalar fallback (`matvec_ring_kinds`). 0 compiles the mma.sync register path beside it,
// for side-by-side runs.
#ifndef ET_GEMV_WG_ONLY
#define ET_GEMV_WG_ONLY 1
#endif
// Whether the fused norm GEMVs (x already in shared memory) take the ring too. Off: their
// ring's registers raised the Llama megakernels' spills (ptxas, 1B batch 1: 112 bytes
// with it, 36 without, 48 with no ring at all), which slowed the attention more than the
// ring sped up the QKV projection (RESULTS run 28). 1 turns it on, for side-by-side runs.
#ifndef ET_GEMV_SIMT_RING_FUSED
#define ET_GEMV_SIMT_RING_FUSED 0
#endif
// Whether NW weight tiles of type W hold at least 512 Ki elements at compile time: the
// CUDA-core path's LARGE (more loads in flight on long tasks).
template <int NW, class W>
__device__ constexpr bool matvec_large() {
    return W::template static_extent<0>() > 0 && W::template static_extent<1>() > 0 &&
           (long long)NW * W::template static_extent<0>() * W::template static_extent<1>() >= (1LL << 19);
}
// Eight bf16 of an activation row at k, zero at or past n: from shared memory when XS (a
// fused op staged the rows there, zero-padded to whole 16-byte pieces), else `load8`.
template <bool XS>
__device__ __forceinline__ uint4 xload(const et::bf16* row, int k, int n, long long stride, bool vec) {
    if (XS) return k < n ? *reinterpret_cast<const uint4*>(row + k) : make_uint4(0, 0, 0, 0);
    return load8<false>(row, k, n, stride, vec);
}
// The gated MLP's activation: silu(gate) · up, silu(g) = g / (1 + e^-g) (`silu_times` in
// gemv.rs is the CPU's).
__device__ __forceinline__ float silu_times(float gate, float up) { return gate / (1.0f + __expf(-gate)) * up; }
__device__ __forceinline__ void mma_bf16(float (&c)[4], unsigned int a0, unsigned int a1, unsigned int a2,
                                         unsigned int a3, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The work plan: `plan` in gemv.rs computes the same from the same integers and sizes the
// arena from it (keep the two identical). gr: 16-row groups per round; s: k slices of ks
// columns (a multiple of 128); rs: floats per batch row of a slice's partial sums.
struct MatvecPlan {
    int gr, s, ks, rs;
};
__device__ constexpr int matvec_cdiv(int a, int b) { return (a + b - 1) / b; }
__device__ constexpr MatvecPlan matvec_plan(int N, int K, int B, int NW) {
    const int cap = B > 16 ? 80 * 1024 : 96 * 1024, warps = 16, granule = 128;
    const int groups = N > 0 ? matvec_cdiv(N, 16) : 1, b = B > 0 ? B : 1;
    const int cap_rows = cap / (4 * NW * b);
    const int fit = cap_rows > 20 ? (cap_rows - 4) / 16 : 1;
    MatvecPlan p{};
    p.gr = groups < fit ? groups : fit;
    p.rs = 16 * p.gr + 4;
    int smax = K > 0 ? matvec_cdiv(K, granule) : 1;
    smax = smax > warps ? warps : smax;
    int best = 1, best_num = matvec_cdiv(NW * p.gr, warps);
#pragma unroll 1
    for (int s = 2; s <= smax; ++s) {
        if (NW * s * b * p.rs * 4 > cap) break;
        const int num = matvec_cdiv(NW * p.gr * s, warps);
        if (num * best < best_num * s) {
            best = s;
            best_num = num;
        }
    }
    p.ks = matvec_cdiv(K > 0 ? matvec_cdiv(K, best) : 1, granule) * granule;
    p.s = K > 0 ? matvec_cdiv(K, p.ks) : 1;
    return p;
}

// The fewest rows a weight tile has for the wgmma path: its unit is 64 rows, so a tile of
// fewer spreads k over the warpgroups with a stage of a few rows' weights in flight each
// (llama-3.2-1b B = 64's 16-row output and down tiles: 17.2 and 37.2 us a layer on the
// wgmma path, 11.2 and 26.0 on the mma.sync ring; RESULTS run 33).
constexpr int MATVEC_WG_MIN_ROWS = 32;
// The k slices a wave can stage x for (`XSTAGE_SLICES` in gemv.rs sizes the ring).
constexpr int MATVEC_XSTAGE_SLICES = 2;
// The k slices that the wave of units u0.. (one a warp, `per_slice` units a slice) spans.
__device__ constexpr int matvec_wave_slices(int u0, int warps, int units, int per_slice) {
    return ((u0 + warps < units ? u0 + warps : units) - 1) / per_slice - u0 / per_slice + 1;
}
// Which ring paths the waves of a GEMV take above batch 16 with `warps` warps: bit 0, some
// wave's units lie in at most two k slices (the CTA stages x, `matvec_unit_staged`); bit 1,
// some wave's span more (x per warp, `matvec_unit_ring`). matvec_mma's waves, counted.
__device__ constexpr int matvec_waves(int N, int K, int B, int NW, int warps) {
    const MatvecPlan p = matvec_plan(N, K, B, NW);
    const int groups = matvec_cdiv(N, 16);
    int kinds = 0;
    for (int g0 = 0; g0 < groups; g0 += p.gr) {
        const int gn = groups - g0 < p.gr ? groups - g0 : p.gr, per_slice = NW * gn, units = per_slice * p.s;
        for (int u0 = 0; u0 < units; u0 += warps)
            kinds |= matvec_wave_slices(u0, warps, units, per_slice) <= MATVEC_XSTAGE_SLICES ? 1 : 2;
    }
    return kinds;
}
// The megakernel's CTA size where its source gives it (`ET_CTA_THREADS`, defined by
// `Kernel::cuda_source_for`), else 0 (unknown: decided at run time).
#ifdef ET_CTA_THREADS
constexpr int MATVEC_CTA_THREADS = ET_CTA_THREADS;
#else
constexpr int MATVEC_CTA_THREADS = 0;
#endif
// A `KINDS` bit of its own: the wgmma path is compiled alone (`matvec_ring_kinds`).
constexpr int MATVEC_WG_ONLY = 4;
// The ring paths to compile for NW weight tiles of type W and activations of type X: those
// the 16-warp CTA takes where the extents are static and the batch is above 16 (an unused
// path made the megakernel's code large enough at batch 64 that the compiler stopped
// inlining its task dispatch: RESULTS run 21), both otherwise. A CTA of another size whose
// wave needs a path not compiled takes the register path.
// Where the wgmma path is known at compile time to be taken by every launch whose rows are
// 16-byte aligned (static extents of at least MATVEC_WG_MIN_ROWS rows, k in whole 16-byte
// pieces, a CTA of one to four whole warpgroups, whose stages the arena holds), it is
// compiled alone (MATVEC_WG_ONLY): the rare launch with unaligned rows takes
// `matvec_rows_scalar` instead of the mma.sync register path, which cost about a fifth of
// NVRTC's time for a batch-64 Llama step beside the wgmma path (RESULTS run 46).
template <int NW, class W, class X>
__device__ constexpr int matvec_ring_kinds() {
    constexpr int n = W::template static_extent<0>(), k = W::template static_extent<1>(),
                  b = X::template static_extent<0>();
    if (n > 0 && k > 0 && b > 16 && b <= 64) {
        if (!ET_GEMV_WGMMA || n < MATVEC_WG_MIN_ROWS) return matvec_waves(n, k, b, NW, 16);
        const bool cta = MATVEC_CTA_THREADS > 0 && MATVEC_CTA_THREADS % 128 == 0 && MATVEC_CTA_THREADS <= 512;
        return ET_GEMV_WG_ONLY && cta && k % 8 == 0 ? MATVEC_WG_ONLY : 0;
    }
    return 3;
}

// The arena's first 128 bytes: what a matvec_prefetch of this task copies for its GEMV
// (`tiles` 0: nothing). `tiles` and `bar` are the arena's state words (`et::arena_init`,
// `et::arena_retire`).
// Tile j's first `rows` rows lie from arena byte 128 + j * rows * row_bytes, `row_bytes`
// apart (2k + 64: the padding spreads an mma fragment's rows over the banks); the GEMV's
// partial sums start at `end`.
struct MatvecPrefetch {
    unsigned int tiles, end;
    unsigned long long bar;
    const void* src[2];
    long long stride[2];
    int rows, k;
    unsigned int row_bytes;
};
// The activation ring above batch 16: ET_GEMV_RING slots of a 32-wide k step of two
// slices' batch rows (`xring_bytes` in gemv.rs).
__device__ __forceinline__ unsigned int matvec_xring_bytes(int B) {
    return ET_GEMV_RING * (unsigned int)MATVEC_XSTAGE_SLICES * (unsigned int)((B + 7) / 8) * 8u * 64u;
}
// The wgmma path's stages in flight per warpgroup (`WG_STAGES` in gemv.rs), each 64 k of
// 64 weight rows and of the batch's columns (32 up to batch 32, 64 above), 128 bytes a row.
constexpr int MATVEC_WG_STAGES = 2;
__device__ constexpr unsigned int matvec_wg_stage_bytes(int B) { return (64u + (B > 32 ? 64u : 32u)) * 128u; }
// The wgmma path's ring: the stages of the CTA's warpgroups and 1 KB to align them to the
// swizzle's 1024-byte atoms.
__device__ __forceinline__ unsigned int matvec_wg_ring_bytes(int B) {
    return (blockDim.x >> 7) * MATVEC_WG_STAGES * matvec_wg_stage_bytes(B) + 1024u;
}
// The ring bytes above batch 16 (`ring_bytes` in gemv.rs: 16 warps), the larger of the two
// paths': the weight rings of the warps and the activation ring (mma.sync), or the stages
// of the warpgroups and 1 KB to align them to the swizzle's 1024-byte atoms (wgmma).
__device__ __forceinline__ unsigned int matvec_ring_bytes(int B) {
    if (B <= 16) return 0u;
    const unsigned int mma = ET_GEMV_RING >= 2 ? (blockDim.x >> 5) * ET_GEMV_RING * 1024u + matvec_xring_bytes(B) : 0u;
    const unsigned int wg = matvec_wg_ring_bytes(B);
    return mma > wg ? mma : wg;
}
__device__ __forceinline__ unsigned int matvec_partial_bytes(int N, int K, int B, int NW) {
    if (B <= 1) return 0u;
    const MatvecPlan p = matvec_plan(N, K, B, NW);
    return (unsigned int)(NW * p.s * B * p.rs * 4);
}
// `prefetch_rows` in gemv.rs: the rows of each tile that fit beside the record and the
// partial sums (a multiple of 16 when not all fit and B > 1), 0 when rows are not whole
// 16-byte lines.
__device__ __forceinline__ int matvec_prefetch_rows(int N, int K, int B, int NW, unsigned int capacity) {
    const unsigned int partials = matvec_partial_bytes(N, K, B, NW) + matvec_ring_bytes(B), row = 2u * (unsigned int)K + 64u;
    if (K <= 0 || (2 * K) % 16 != 0 || capacity < 128u + partials) return 0;
    const int fit = (int)((capacity - 128u - partials) / ((unsigned int)NW * row));
    return fit >= N ? N : (B > 1 ? fit - fit % 16 : fit);
}
// Starts bulk copies of the first rows of the NW weight tiles (rows of 2K bytes, 16-byte
// aligned) into the arena and records them; thread 0 does it all and the others return.
// Tiles that bulk copies cannot read (unaligned or strided rows) are not copied: the GEMV
// then reads them from global memory as without a prefetch.
template <int NW>
__device__ __forceinline__ void matvec_prefetch_core(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                                     const long long (&ws1)[NW], int N, int K, int B,
                                                     unsigned char* smem) {
    if (threadIdx.x != 0) return;
#ifdef ET_GEMV_NO_PREFETCH
    // for side-by-side measurements (ET_NVRTC_OPTIONS=-DET_GEMV_NO_PREFETCH): the same
    // kernels, every GEMV reading global memory
    return;
#endif
    MatvecPrefetch* pf = reinterpret_cast<MatvecPrefetch*>(smem);
    // an earlier prefetch of the task that no GEMV read
    et::arena_retire(smem);
    bool aligned = true;
#pragma unroll
    for (int j = 0; j < NW; ++j) aligned = aligned && ws1[j] == 1 && vec_rows(w[j], ws0[j], 1);
    const int rows = aligned && N > 0 ? matvec_prefetch_rows(N, K, B, NW, et::arena_capacity()) : 0;
    if (rows <= 0) return;
    const unsigned int bytes = 2u * (unsigned int)K, row = bytes + 64u;
    et::mbar_init(&pf->bar, 1);
    // the arena's last readers (an earlier op) used the generic proxy
    et::fence_proxy_async();
    et::mbar_arrive_expect_tx(&pf->bar, (unsigned int)(NW * rows) * bytes);
#pragma unroll
    for (int j = 0; j < NW; ++j) {
        unsigned char* dst = smem + 128u + (unsigned int)(j * rows) * row;
#pragma unroll 1
        for (int r = 0; r < rows; ++r) et::bulk_load(dst + (unsigned int)r * row, w[j] + r * ws0[j], bytes, &pf->bar);
        pf->src[j] = w[j];
        pf->stride[j] = ws0[j];
    }
    pf->rows = rows;
    pf->k = K;
    pf->row_bytes = row;
    pf->end = 128u + (unsigned int)(NW * rows) * row;
    pf->tiles = NW;
}

// A weight piece: `ld16_nc` with an L2 prefetch hint. A warp's load touches 64 bytes of
// each of its 16 rows and its next steps continue them, so L2 fetches 256-byte blocks.
__device__ __forceinline__ uint4 ld16_weight(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
// Eight bf16 of a row at k: the 16-byte load itself when FAST (k a multiple of 8, rows
// aligned, zero at or past n), `load8` otherwise.
template <bool FAST, bool NC>
__device__ __forceinline__ uint4 matvec_load(const et::bf16* row, int k, int n, long long stride) {
    if (FAST) return k < n ? (NC ? ld16_weight(row + k) : ld16(row + k)) : make_uint4(0, 0, 0, 0);
    return load8_slow(row, k, n, stride);
}

// One unit's k loop: c[nb] += the 16 rows (row0 + g, row1 = row0 + 8 of the lane's
// group) times the batch over [k_lo, k_hi), k_lo and the slice a multiple of 32 U. Lane
// (g, t) holds the rows at k + 32u + 8t for u < U (the A fragments of two mmas each) and
// reloads step u of the next block as soon as its mmas have read it, so U steps of loads
// stay in flight; the batch rows nb * 8 + g at the same k are the B fragments.
// `shared`: the two rows are in the arena (a prefetch copied them; FAST only).
template <int NBM, int U, bool FAST, bool XS>
__device__ __forceinline__ void matvec_unit(float (&c)[NBM][4], const et::bf16* row0, const et::bf16* row1, bool ok0,
                                            bool ok1, bool shared, long long cs, const et::bf16* x, long long xs0,
                                            long long xs1, int B, int K, int k_lo, int k_hi) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const auto wload = [&](const et::bf16* row, int kk) -> uint4 {
        if (FAST && shared) return kk < K ? *reinterpret_cast<const uint4*>(row + kk) : zero;
        return matvec_load<FAST, true>(row, kk, K, cs);
    };
    // XP: x's fragments of the U steps are loaded with the weights' (ET_GEMV_X_INFLIGHT)
    constexpr bool XP = ET_GEMV_X_INFLIGHT && FAST && !XS && NBM <= 2;
    const auto xfrag = [&](int nb, int kk) -> uint4 {
        const int b = nb * 8 + g;
        return b >= B ? zero
               : XS   ? xload<true>(x + b * xs0, kk, K, xs1, true)
                      : matvec_load<FAST, false>(x + b * xs0, kk, K, xs1);
    };
    uint4 a0[U], a1[U], xf[XP ? U : 1][XP ? NBM : 1];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int kk = k_lo + 32 * u + 8 * t;
        a0[u] = ok0 ? wload(row0, kk) : zero;
        a1[u] = ok1 ? wload(row1, kk) : zero;
        if (XP) {
#pragma unroll
            for (int nb = 0; nb < NBM; ++nb) xf[XP ? u : 0][XP ? nb : 0] = nb * 8 < B ? xfrag(nb, kk) : zero;
        }
    }
#pragma unroll 1
    for (int k = k_lo; k < k_hi; k += 32 * U) {
        const bool more = k + 32 * U < k_hi;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int kk = k + 32 * u + 8 * t;
#pragma unroll
            for (int nb = 0; nb < NBM; ++nb) {
                if (nb * 8 >= B) break;
                const uint4 xv = XP ? xf[XP ? u : 0][XP ? nb : 0] : xfrag(nb, kk);
                mma_bf16(c[nb], a0[u].x, a1[u].x, a0[u].y, a1[u].y, xv.x, xv.y);
                mma_bf16(c[nb], a0[u].z, a1[u].z, a0[u].w, a1[u].w, xv.z, xv.w);
                if (XP && more) xf[XP ? u : 0][XP ? nb : 0] = xfrag(nb, kk + 32 * U);
            }
            if (more) {
                a0[u] = ok0 ? wload(row0, kk + 32 * U) : zero;
                a1[u] = ok1 ? wload(row1, kk + 32 * U) : zero;
            }
        }
    }
}

// A unit's sums into the arena: c[nb] {0, 1} are row g, batch nb * 8 + 2t + {0, 1}; {2, 3}
// are row g + 8. `ps`: the unit's row g of batch row 0, batch rows `prs` apart.
template <int NBM>
__device__ __forceinline__ void matvec_store_partials(const float (&c)[NBM][4], float* ps, int B, int prs) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int nb = 0; nb < NBM; ++nb) {
        if (nb * 8 >= B) break;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int b = nb * 8 + 2 * t + (i & 1);
            if (b < B) ps[b * prs + (i < 2 ? 0 : 8)] = c[nb][i];
        }
    }
}

// A lane's copies of one k step of its two weight rows at `kk` into a ring slot: row0's 32
// pieces, then row1's. Past the rows or past k: zeros, nothing read.
__device__ __forceinline__ void matvec_ring_copy(uint4* slot, const et::bf16* row0, const et::bf16* row1, bool ok0,
                                                 bool ok1, int kk, int K) {
    const int lane = threadIdx.x & 31;
    const bool in0 = ok0 && kk < K, in1 = ok1 && kk < K;
    et::cp_async16(slot + lane, in0 ? row0 + kk : row0, in0 ? 16u : 0u);
    et::cp_async16(slot + 32 + lane, in1 ? row1 + kk : row1, in1 ? 16u : 0u);
}

// matvec_unit's k loop with the weights streamed through this warp's ring in the arena:
// R slots of 1 KB, slot i % R holding step i's pieces lane by lane (row0's 32, then
// row1's), copied by cp.async R - 1 steps ahead, so that R steps are in flight while only
// one is in registers. A step's x fragments are loaded before the wait for its weights,
// so the two latencies overlap. Rows taking 16-byte loads only (FAST).
template <int NBM, int R, bool XS>
__device__ __forceinline__ void matvec_unit_ring(float (&c)[NBM][4], const et::bf16* row0, const et::bf16* row1,
                                                 bool ok0, bool ok1, const et::bf16* x, long long xs0, long long xs1,
                                                 int B, int K, int k_lo, int k_hi, uint4* ring) {
    static_assert(R >= 2, "the weight ring needs two slots");
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int steps = (k_hi - k_lo + 31) / 32;
    const auto issue = [&](int i) {
        if (i < steps) matvec_ring_copy(ring + (i % R) * 64, row0, row1, ok0, ok1, k_lo + 32 * i + 8 * t, K);
        // an empty group past the last step keeps the count of pending groups exact
        et::cp_async_commit();
    };
#pragma unroll
    for (int i = 0; i < R - 1; ++i) issue(i);
#pragma unroll 1
    for (int i = 0; i < steps; ++i) {
        // into the slot that step i - 1's mmas have read (their registers were consumed)
        issue(i + R - 1);
        // x's fragments one step at a time: a second set in flight (the next step's, or
        // an L1 prefetch two steps ahead) measured slower above batch 16 (RESULTS run 20)
        const int kk = k_lo + 32 * i + 8 * t;
        uint4 xv[NBM];
#pragma unroll
        for (int nb = 0; nb < NBM; ++nb) {
            const int b = nb * 8 + g;
            xv[nb] = b >= B ? zero
                     : XS   ? xload<true>(x + b * xs0, kk, K, xs1, true)
                            : matvec_load<true, false>(x + b * xs0, kk, K, xs1);
        }
        et::cp_async_wait<R - 1>();
        const uint4* slot = ring + (i % R) * 64;
        const uint4 a0 = slot[lane], a1 = slot[32 + lane];
#pragma unroll
        for (int nb = 0; nb < NBM; ++nb) {
            if (nb * 8 >= B) break;
            mma_bf16(c[nb], a0.x, a1.x, a0.y, a1.y, xv[nb].x, xv[nb].y);
            mma_bf16(c[nb], a0.z, a1.z, a0.w, a1.w, xv[nb].z, xv[nb].w);
        }
    }
    // the ring is reused by the warp's next unit (and by later ops): nothing may land late
    et::cp_async_wait<0>();
}

// matvec_unit_ring for a wave of the CTA's warps whose units lie in the k slices `sa` and
// `sa + 1` (`ns` of them, slices `ks` wide): besides its weights, each thread copies its
// share of each step's activations of both slices into `xring` (R slots, R - 1 steps
// ahead), so the CTA reads x from L2 once, not once per warp, and no warp waits for x
// at its step. A barrier a step makes the copies visible and frees the slot the next copy
// overwrites, so every warp runs the wave's `wsteps` steps (those with fewer steps of
// their own, or no unit, only copy). `sl`: the warp's slice - sa; `steps`: its unit's.
// The unit's sums go to `ps` (null: no unit) as matvec_mma stores them, rows `prs` apart.
template <int NBM, int R>
__device__ __forceinline__ void matvec_unit_staged(const et::bf16* row0, const et::bf16* row1, bool ok0, bool ok1,
                                                const et::bf16* x, long long xs0, int B, int K, int k_lo, int steps,
                                                int sl, int sa, int ns, int ks, int wsteps, uint4* ring, uint4* xring,
                                                float* ps, int prs) {
    static_assert(R >= 2, "the weight ring needs two slots");
    // a slot: [slice][batch row][four 16-byte pieces of the step]
    constexpr int ROWS = NBM * 8, SLOT = MATVEC_XSTAGE_SLICES * ROWS * 4;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float c[NBM][4];
#pragma unroll
    for (int nb = 0; nb < NBM; ++nb)
#pragma unroll
        for (int i = 0; i < 4; ++i) c[nb][i] = 0.0f;
    const auto issue = [&](int i) {
        if (i < wsteps) {
            if (i < steps) matvec_ring_copy(ring + (i % R) * 64, row0, row1, ok0, ok1, k_lo + 32 * i + 8 * t, K);
            uint4* xslot = xring + (i % R) * SLOT;
#pragma unroll 1
            for (int p = threadIdx.x; p < ns * ROWS * 4; p += blockDim.x) {
                const int b = (p >> 2) % ROWS, kk = (sa + p / (ROWS * 4)) * ks + 32 * i + 8 * (p & 3);
                // rows past the batch and pieces past k are zeros (0 x garbage could be NaN)
                const bool in = b < B && kk < K;
                et::cp_async16(xslot + p, in ? x + b * xs0 + kk : x, in ? 16u : 0u);
            }
        }
        et::cp_async_commit();
    };
    // the slots' readers of the previous wave are done
    __syncthreads();
#pragma unroll 1
    for (int i = 0; i < R - 1; ++i) issue(i);
#pragma unroll 1
    for (int i = 0; i < wsteps; ++i) {
        // this thread's copies of step i have landed; after the barrier everyone's have,
        // and every warp has read step i - 1, whose slots the next copy takes
        et::cp_async_wait<R - 2>();
        __syncthreads();
        issue(i + R - 1);
        if (i < steps) {
            const uint4* slot = ring + (i % R) * 64;
            const uint4* xs = xring + (i % R) * SLOT + sl * ROWS * 4;
            const uint4 a0 = slot[lane], a1 = slot[32 + lane];
#pragma unroll
            for (int nb = 0; nb < NBM; ++nb) {
                if (nb * 8 >= B) break;
                const uint4 xv = xs[(nb * 8 + g) * 4 + t];
                mma_bf16(c[nb], a0.x, a1.x, a0.y, a1.y, xv.x, xv.y);
                mma_bf16(c[nb], a0.z, a1.z, a0.w, a1.w, xv.z, xv.w);
            }
        }
    }
    et::cp_async_wait<0>();
    if (ps) matvec_store_partials(c, ps, B, prs);
}

// A round's outputs: the sums over `s` slices of the partial sums (NW tiles, rows `rs`
// apart) of groups g0.. (gn of them), in slice order, consecutive threads on consecutive
// rows (coalesced y stores).
template <int NW, class E>
__device__ __forceinline__ void matvec_round_out(const float* part, int s, int B, int rs, int g0, int gn, int N,
                                                 E& epi) {
    const int rows = N - g0 * 16 < gn * 16 ? N - g0 * 16 : gn * 16;
#pragma unroll 1
    for (int e = threadIdx.x; e < B * rows; e += blockDim.x) {
        const int b = e / rows, rl = e - b * rows;
        float acc0 = 0.0f, acc1 = 0.0f;
#pragma unroll 1
        for (int sl = 0; sl < s; ++sl) {
            acc0 += part[(sl * B + b) * rs + rl];
            if (NW > 1) acc1 += part[((s + sl) * B + b) * rs + rl];
        }
        epi(b, g0 * 16 + rl, acc0, acc1);
    }
}
#if ET_GEMV_WGMMA
// The shared-memory descriptor of a K-major wgmma operand at `addr`: rows of 64 k (128
// bytes), their 16-byte pieces swizzled within each 8-row atom (the 128-byte swizzle:
// piece c of row r lies at piece c ^ (r & 7); atoms 1024 bytes apart and 1024-aligned).
// The k16 steps of a row start 32 bytes apart.
__device__ __forceinline__ unsigned long long wgmma_desc(unsigned int addr) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}
// d += a b^T on the tensor cores for one warpgroup: a 64 x 16, b NB x 16 (bf16, both from
// shared memory by descriptor), d 64 x NB f32; a warp holds its 16 rows of d in
// mma.sync's fragment layout (d[4 nb + i] is c[nb][i] of `mma_bf16`).
template <int NB>
__device__ __forceinline__ void wgmma_bf16(float (&d)[NB / 2], unsigned long long a, unsigned long long b);
template <>
__device__ __forceinline__ void wgmma_bf16<32>(float (&d)[16], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(a), "l"(b));
}
template <>
__device__ __forceinline__ void wgmma_bf16<64>(float (&d)[32], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b));
}
// Keeps the compiler from moving accesses to d across the asynchronous wgmma.
template <int NB>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[NB / 2]) {
#pragma unroll
    for (int i = 0; i < NB / 2; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// A warpgroup's unit on the wgmma path: d (its warp's 16 rows, as `wgmma_bf16`) = 64 rows
// of w (rows ws0 apart; those at or past `rows` are zeros) times the batch rows of x
// (those at or past B are zeros) over [k_lo, k_hi). Weights and activations go through
// the warpgroup's ring in the arena (`stages`, 1024-aligned): MATVEC_WG_STAGES stages of
// 64 k, copied by cp.async into the swizzled layout of `wgmma_desc`, the next stage's
// copies in flight while a stage's four wgmmas run. `bar`: the warpgroup's named barrier.
template <int NB>
__device__ __forceinline__ void matvec_unit_wgmma(float (&d)[NB / 2], const et::bf16* w, long long ws0, int rows,
                                                  const et::bf16* x, long long xs0, int B, int k_lo, int k_hi,
                                                  unsigned char* stages, int bar) {
    constexpr int R = MATVEC_WG_STAGES, SLOT = (64 + NB) * 128;
    const int tid = threadIdx.x & 127, steps = (k_hi - k_lo + 63) / 64;
    const auto issue = [&](int i) {
        if (i < steps) {
            unsigned char* slot = stages + (i % R) * SLOT;
            const int c = tid & 7, kk = k_lo + 64 * i + 8 * c;
            // 16 rows a pass, eight threads a row: the 64 weight rows, then the batch rows
#pragma unroll
            for (int it = 0; it < (64 + NB) / 16; ++it) {
                const int r = (tid >> 3) + 16 * it, rr = it < 4 ? r : r - 64;
                const bool in = (it < 4 ? rr < rows : rr < B) && kk < k_hi;
                const et::bf16* src = it < 4 ? w + rr * ws0 + kk : x + rr * xs0 + kk;
                // past the rows or k: zeros, nothing read (0 x garbage could be NaN)
                et::cp_async16(slot + r * 128 + ((c ^ (r & 7)) << 4), in ? src : w, in ? 16u : 0u);
            }
        }
        et::cp_async_commit();
    };
#pragma unroll
    for (int i = 0; i < R - 1; ++i) issue(i);
#pragma unroll 1
    for (int i = 0; i < steps; ++i) {
        // this thread's copies of step i have landed; after the barrier everyone's have,
        // and step i - 1's wgmmas (waited for below) are done with the slot the next copy takes
        et::cp_async_wait<R - 2>();
        et::fence_proxy_async();
        asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
        issue(i + R - 1);
        const unsigned int slot = et::smem_addr(stages + (i % R) * SLOT);
        wgmma_fence_operands<NB>(d);
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int k16 = 0; k16 < 4; ++k16) wgmma_bf16<NB>(d, wgmma_desc(slot + 32 * k16), wgmma_desc(slot + 8192 + 32 * k16));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        wgmma_fence_operands<NB>(d);
    }
    // the warpgroup's next unit overwrites the ring
    et::cp_async_wait<0>();
    asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
}
// matvec_mma above batch 16 on sm_90a: a unit is 64 rows of one weight tile over one k
// slice, run by a warpgroup (`matvec_unit_wgmma`, NB batch columns), the units of a round
// spread over the CTA's warpgroups; partial sums and outputs as matvec_mma's. A round
// takes the fewest k slices (at most the plan's, which the arena's partial sums hold) that
// spread its units most evenly. `ring`: the warpgroups' stages, 1024-aligned.
template <int NW, int NB, class E>
__device__ __forceinline__ void matvec_wgmma(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                             const et::bf16* x, long long xs0, int B, int N, int K, float* part,
                                             unsigned char* ring, E& epi) {
    const int wg = threadIdx.x >> 7, wgs = blockDim.x >> 7, warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
    const MatvecPlan p = matvec_plan(N, K, B, NW);
    const int groups = (N + 15) / 16;
    unsigned char* const stages = ring + wg * MATVEC_WG_STAGES * (64 + NB) * 128;
    // the warpgroups' named barriers (1 + wg) may be the ids an earlier op of the task
    // used with other thread counts (the attention's head groups): every warp past those
    __syncthreads();
#pragma unroll 1
    for (int g0 = 0; g0 < groups; g0 += p.gr) {
        const int gn = groups - g0 < p.gr ? groups - g0 : p.gr, rows = N - g0 * 16 < gn * 16 ? N - g0 * 16 : gn * 16;
        const int mu = (gn + 3) / 4, per_slice = NW * mu;
        int s = 1, best = matvec_cdiv(per_slice, wgs);
#pragma unroll 1
        for (int c = 2; c <= p.s; ++c) {
            const int num = matvec_cdiv(per_slice * c, wgs);
            if (num * s < best * c) {
                s = c;
                best = num;
            }
        }
        const int ks = matvec_cdiv(matvec_cdiv(K, s), 64) * 64;
        s = matvec_cdiv(K, ks);
#pragma unroll 1
        for (int u = wg; u < per_slice * s; u += wgs) {
            const int sl = u / per_slice, j = (u % per_slice) / mu, m = (u % per_slice % mu) * 64;
            const bool second = NW > 1 && j > 0;
            const long long rs0 = second ? ws0[NW - 1] : ws0[0];
            const et::bf16* wj = (second ? w[NW - 1] : w[0]) + (g0 * 16 + m) * rs0;
            const int k_lo = sl * ks, k_hi = k_lo + ks < K ? k_lo + ks : K;
            float d[NB / 2];
#pragma unroll
            for (int i = 0; i < NB / 2; ++i) d[i] = 0.0f;
            matvec_unit_wgmma<NB>(d, wj, rs0, rows - m, x, xs0, B, k_lo, k_hi, stages, 1 + wg);
            const int ml = m + 16 * warp;
            if (ml < gn * 16)
                matvec_store_partials(reinterpret_cast<float(&)[NB / 8][4]>(d), part + (j * s + sl) * B * p.rs + ml + g,
                                      B, p.rs);
        }
        __syncthreads();
        matvec_round_out<NW>(part, s, B, p.rs, g0, gn, N, epi);
        // the next round overwrites the partial sums
        if (g0 + p.gr < groups) __syncthreads();
    }
}
#endif
// acc_j[b, n] = sum_k x[b, k] w_j[n, k] for NW weight tiles w_j (same shape), n < N, b < B
// <= 8 * NBM, k < K; calls epi(b, n, acc_0, acc_1) once per output (acc_1 = 0 when NW =
// 1). `vec`: every row of x and of the w_j takes 16-byte loads. `part`: the arena.
//
// A unit (one warp at a time) is 16 rows m.. of w_j over the k slice [k_lo, k_hi): lane
// (g, t) holds rows m + g and m + g + 8 at k + 32u + 8t for u < U (the A fragments of two
// mmas each), and the batch rows nb * 8 + g at the same k (the B fragments). Units are
// numbered slice-major, so the warps that run together share x's slice in L1.
//
// The first P rows of each w_j may be in the arena (`sw[j]`, rows `srs` apart, landing on
// the mbarrier `bar`; P is N or a multiple of 16): a round's units read the others from
// global memory first, so that the stream starts at once, and the prefetched groups last.
// `ring` (null: none): the weight rings of the warps, ET_GEMV_RING KB each, through which
// the rows not prefetched stream.
template <int NW, int NBM, bool XS, int KINDS, class E>
__device__ __forceinline__ void matvec_mma(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                           const long long (&ws1)[NW], const et::bf16* const (&sw)[NW], int P,
                                           long long srs, unsigned long long* bar, const et::bf16* x, long long xs0,
                                           long long xs1, int B, int N, int K, bool vec, float* part, uint4* ring,
                                           uint4* xring, E& epi) {
    // the register path (no ring): four steps in flight (eight 16-byte loads a lane, 64 KB
    // an SM) while the fragments and accumulators leave room; one at batches above 16,
    // whose accumulators and B fragments fill the registers: inside a megakernel two steps
    // made ptxas spill the loop (llama-3.2-1b at B = 64: 6.14 ms a step against 5.01 with
    // one; RESULTS run 15). The ring keeps four there (run 20).
    constexpr int U = NBM > 2 ? (ET_GEMV_MMA_U + 3) / 4 : ET_GEMV_MMA_U;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int g = lane >> 2;
    const MatvecPlan p = matvec_plan(N, K, B, NW);
    const int groups = (N + 15) / 16;
#pragma unroll 1
    for (int g0 = 0; g0 < groups; g0 += p.gr) {
        const int gn = groups - g0 < p.gr ? groups - g0 : p.gr, per_slice = NW * gn;
        // the round's prefetched groups (the first ones) go last
        const int pre = P / 16 - g0 > gn ? gn : (P / 16 - g0 > 0 ? P / 16 - g0 : 0), rot = pre < gn ? pre : 0;
        const int units = per_slice * p.s;
        // the activations go through the CTA's ring where no unit of the round reads
        // prefetched rows
        const bool stage_round = (KINDS & 1) && xring && vec && K % 8 == 0 && g0 * 16 >= P;
#pragma unroll 1
        for (int u0 = 0; u0 < units; u0 += warps) {
            // a wave: units u0.. run together, one a warp; staged when they lie in at most
            // two slices (the same for every warp: its barriers are the CTA's)
            const int sa = u0 / per_slice, ns = matvec_wave_slices(u0, warps, units, per_slice);
            const bool staged = stage_round && ns <= MATVEC_XSTAGE_SLICES;
            const int unit = u0 + warp;
            const bool active = unit < units;
            if (!active && !staged) continue;
            const int s = active ? unit / per_slice : sa, j = active ? (unit % per_slice) / gn : 0;
            const int ml = active ? (((unit % per_slice) % gn + rot) % gn) * 16 : 0;
            // selects, not a run-time index (which would put the arrays in local memory)
            const bool second = NW > 1 && j > 0;
            const int r0 = g0 * 16 + ml + g, r1 = r0 + 8;
            const bool shared = r0 - g < P;
            if (shared) et::mbar_wait(bar, 0);
            const et::bf16* wj = shared ? (second ? sw[NW - 1] : sw[0]) : (second ? w[NW - 1] : w[0]);
            const long long rs0 = shared ? srs : (second ? ws0[NW - 1] : ws0[0]), cs = second ? ws1[NW - 1] : ws1[0];
            const bool ok0 = r0 < N, ok1 = r1 < N;
            const et::bf16* row0 = wj + (long long)(ok0 ? r0 : 0) * rs0;
            const et::bf16* row1 = wj + (long long)(ok1 ? r1 : 0) * rs0;
            const int k_lo = s * p.ks, k_hi = k_lo + p.ks < K ? k_lo + p.ks : K;
            float* ps = part + (j * p.s + s) * B * p.rs + ml + g;
            constexpr int RING = ET_GEMV_RING >= 2 ? ET_GEMV_RING : 2;
            if (staged) {
                const int wk = sa * p.ks, wend = wk + p.ks < K ? wk + p.ks : K;
                matvec_unit_staged<NBM, RING>(row0, row1, ok0, ok1, x, xs0, B, K, k_lo,
                                              active ? (k_hi - k_lo + 31) / 32 : 0, s - sa, sa, ns, p.ks,
                                              (wend - wk + 31) / 32, ring + warp * RING * 64, xring,
                                              active ? ps : nullptr, p.rs);
                continue;
            }
            float c[NBM][4];
#pragma unroll
            for (int nb = 0; nb < NBM; ++nb)
#pragma unroll
                for (int i = 0; i < 4; ++i) c[nb][i] = 0.0f;
            // 16-byte loads with a predicate when every piece is inside or past the rows
            // (k a multiple of 8); otherwise the element loads, one step at a time
            if ((KINDS & 2) && ET_GEMV_RING >= 2 && ring && !shared && vec && K % 8 == 0)
                matvec_unit_ring<NBM, RING, XS>(c, row0, row1, ok0, ok1, x, xs0, xs1, B, K, k_lo, k_hi,
                                                ring + warp * RING * 64);
            else if (vec && K % 8 == 0)
                matvec_unit<NBM, U, true, XS>(c, row0, row1, ok0, ok1, shared, cs, x, xs0, xs1, B, K, k_lo, k_hi);
            else
                matvec_unit<NBM, 1, false, XS>(c, row0, row1, ok0, ok1, false, cs, x, xs0, xs1, B, K, k_lo, k_hi);
            matvec_store_partials(c, ps, B, p.rs);
        }
        __syncthreads();
        matvec_round_out<NW>(part, p.s, B, p.rs, g0, gn, N, epi);
        // the next round overwrites the partial sums
        if (g0 + p.gr < groups) __syncthreads();
    }
}

__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
    return bf_lo(a.x) * bf_lo(b.x) + bf_hi(a.x) * bf_hi(b.x) + bf_lo(a.y) * bf_lo(b.y) + bf_hi(a.y) * bf_hi(b.y) +
           bf_lo(a.z) * bf_lo(b.z) + bf_hi(a.z) * bf_hi(b.z) + bf_lo(a.w) * bf_lo(b.w) + bf_hi(a.w) * bf_hi(b.w);
}

// Batch 1 on CUDA cores: a warp per row, lanes over k in 16-byte pieces, U pieces in flight,
// no arena and no barrier. Measured in the Llama-3.2-1B megakernel at batch 1, it beats the
// tensor-core path on small tasks (a 16 x 2048 tile: 3.7 against 5.4 us), which pays a
// cross-warp reduction through the arena; from batch 2 the tensor cores win (x is read once
// per k step, not once per batch row). BM is the batch (1 here; the loops are exact).
// The first P rows of each w_j may be in the arena (`sw[j]`, rows `srs` apart, landing on
// the mbarrier `bar`): the warps take the other rows first, so that the stream from
// global memory starts at once, and wait for the copies before their first prefetched row.
// Each lane's whole rounds of U pieces inside the row take 16-byte loads with no checks;
// the pieces after them (a row's tail) and tiles that cannot take 16-byte loads go one
// piece a round through the checked loads, whose slow paths are then compiled once per
// matrix, not U times: 9-19% less code in a batch-1 GEMV task, and a layer's code is what an
// SM's instruction caches cycle through (RESULTS runs 49 and 51). Each accumulator adds the
// same pieces in the same order as whole rounds would.
template <int NW, int BM, bool XS, bool LARGE, class E>
__device__ __forceinline__ void matvec_simt(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                            const long long (&ws1)[NW], const et::bf16* const (&sw)[NW], int P,
                                            long long srs, unsigned long long* bar, const et::bf16* x, long long xs0,
                                            long long xs1, int B, int N, int K, bool vec, E& epi) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    constexpr int SU = LARGE ? ET_GEMV_SIMT_U_LARGE : ET_GEMV_SIMT_U, U = NW == 1 ? SU : (SU + 1) / 2;
    for (int i = warp; i < N; i += warps) {
        const int r = i < N - P ? P + i : i - (N - P);
        const bool shared = r < P;
        if (shared) et::mbar_wait(bar, 0);
        float acc[NW][BM];
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
            for (int b = 0; b < BM; ++b) acc[j][b] = 0.0f;
        int k0 = lane * 8;
        if (vec) {
            for (; k0 + 256 * (U - 1) + 8 <= K; k0 += 256 * U) {
                uint4 wr[NW][U];
#pragma unroll
                for (int u = 0; u < U; ++u)
#pragma unroll
                    for (int j = 0; j < NW; ++j) {
                        const int kk = k0 + 256 * u;
                        wr[j][u] = shared ? *reinterpret_cast<const uint4*>(sw[j] + r * srs + kk)
                                          : ld16_nc(w[j] + r * ws0[j] + kk);
                    }
#pragma unroll
                for (int b = 0; b < BM; ++b) {
                    if (b >= B) break;
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const et::bf16* const xp = x + b * xs0 + k0 + 256 * u;
                        const uint4 xv = XS ? *reinterpret_cast<const uint4*>(xp) : ld16(xp);
#pragma unroll
                        for (int j = 0; j < NW; ++j) acc[j][b] += dot8(wr[j][u], xv);
                    }
                }
            }
        }
#pragma unroll 1
        for (; k0 < K; k0 += 256) {
            uint4 wr[NW];
#pragma unroll
            for (int j = 0; j < NW; ++j)
                wr[j] = shared ? *reinterpret_cast<const uint4*>(sw[j] + r * srs + k0)
                               : load8<true>(w[j] + r * ws0[j], k0, K, ws1[j], vec);
#pragma unroll
            for (int b = 0; b < BM; ++b) {
                if (b >= B) break;
                const uint4 xv = xload<XS>(x + b * xs0, k0, K, xs1, vec);
#pragma unroll
                for (int j = 0; j < NW; ++j) acc[j][b] += dot8(wr[j], xv);
            }
        }
#pragma unroll
        for (int b = 0; b < BM; ++b) {
            if (b >= B) break;
            const float a0 = et::warp_sum(acc[0][b]);
            const float a1 = NW > 1 ? et::warp_sum(acc[NW - 1][b]) : 0.0f;
            if (lane == 0) epi(b, r, a0, a1);
        }
    }
}

// Batch 1 through a ring in the arena: each lane copies its 16-byte parts of the warp's
// rows into slots of its own by cp.async (two parts a lane a piece: 1 KB a warp, the
// matrices' parts side by side for a pair) and reads them back after `cp.async.wait_group`,
// S - 1 pieces in flight across row ends. No registers hold loads in flight and no barrier
// is needed (a lane reads only its own copies). On the H200 this streams 12-13% faster
// than the registers' U = 4 on 96-256 KB tasks at one CTA an SM (RESULTS run 28's probe);
// the LM head's long tasks keep the registers' U = 8 (LARGE), which the ring did not beat.
// `ring`: warps x S x 1 KB of the arena, 16-byte aligned.
// Copies the eight bf16 of `row` from k (zero at or past n) to `dst` by cp.async.
__device__ __forceinline__ void cp_async8(void* dst, const et::bf16* row, int k, int n) {
    const int left = n - k;
    et::cp_async16(dst, left > 0 ? row + k : row, left >= 8 ? 16u : (left > 0 ? 2u * left : 0u));
}
template <int NW, bool XS, class E>
__device__ __forceinline__ void matvec_simt_ring(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                                 const et::bf16* x, et::bf16* xstage, int N, int K, uint4* ring,
                                                 E& epi) {
    static_assert(NW == 1 || NW == 2, "matvec_simt_ring: one weight tile, or gate and up");
    constexpr int S = ET_GEMV_SIMT_RING, PM = 2 / NW; // 16-byte parts per matrix per piece
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    // x in global memory (another SM's output, an L2 round trip) is copied into `xstage`
    // first, one group that the ring's first pieces follow: read from L1 per piece, its
    // misses cost the ring the time it saves (RESULTS run 28)
    if constexpr (!XS) {
        for (int e = threadIdx.x * 8; e < K; e += blockDim.x * 8) cp_async8(xstage + e, x, e, K);
        et::cp_async_commit();
    }
    const et::bf16* const xs = XS ? x : xstage;
    const int ppr = (K + 256 * PM - 1) / (256 * PM), pieces = warp < N ? ((N - 1 - warp) / warps + 1) * ppr : 0;
    uint4* const mine = ring + warp * (S * 64) + lane; // slot s, part v: mine[s * 64 + v * 32]
    // piece p of the warp's stream: row warp + (p / ppr) * warps, columns from (p % ppr) * 256 * PM
    int irow = 0, ipiece = 0;
    const auto issue = [&](int p) {
        uint4* const dst = mine + (p % S) * 64;
#pragma unroll
        for (int j = 0; j < NW; ++j) {
            const et::bf16* const row = w[j] + (long long)(warp + irow * warps) * ws0[j];
#pragma unroll
            for (int v = 0; v < PM; ++v) cp_async8(dst + (j * PM + v) * 32, row, ipiece * 256 * PM + v * 256 + lane * 8, K);
        }
        if (++ipiece == ppr) {
            ipiece = 0;
            ++irow;
        }
    };
#pragma unroll
    for (int p = 0; p < S - 1; ++p) {
        if (p < pieces) issue(p);
        et::cp_async_commit();
    }
    if constexpr (!XS) {
        // the x group is older than the ring's: landed, then visible to every thread
        et::cp_async_wait<S - 1>();
        __syncthreads();
    }
    float acc[NW];
#pragma unroll
    for (int j = 0; j < NW; ++j) acc[j] = 0.0f;
    int r = warp, c = 0;
    for (int p = 0; p < pieces; ++p) {
        if (p + S - 1 < pieces) issue(p + S - 1);
        et::cp_async_commit();
        et::cp_async_wait<S - 1>();
        const uint4* const src = mine + (p % S) * 64;
#pragma unroll
        for (int v = 0; v < PM; ++v) {
            const uint4 xv = xload<true>(xs, c * 256 * PM + v * 256 + lane * 8, K, 1, true);
#pragma unroll
            for (int j = 0; j < NW; ++j) acc[j] += dot8(src[(j * PM + v) * 32], xv);
        }
        if (++c == ppr) {
            const float a0 = et::warp_sum(acc[0]);
            const float a1 = NW > 1 ? et::warp_sum(acc[NW - 1]) : 0.0f;
            if (lane == 0) epi(0, r, a0, a1);
#pragma unroll
            for (int j = 0; j < NW; ++j) acc[j] = 0.0f;
            c = 0;
            r += warps;
        }
    }
}

// The batch-1 ring's bytes for the CTA (`SIMT_RING_BYTES` in gemv.rs reserves them for 16
// warps and 4 steps).
__device__ __forceinline__ unsigned int matvec_simt_ring_bytes() {
    return (blockDim.x >> 5) * (unsigned int)ET_GEMV_SIMT_RING * 1024u;
}
// The bytes of x's row staged in the arena before the ring (`simt_x_bytes` in gemv.rs).
__device__ constexpr unsigned int matvec_simt_x_bytes(int K) {
    return ((unsigned int)(K + 7) / 8u * 16u + 127u) / 128u * 128u;
}

// The last resort of a GEMV whose wgmma path was compiled alone (MATVEC_WG_ONLY) when a
// launch's rows are not whole 16-byte pieces: a warp per output (row n, batch row b), its
// lanes over k one element at a time. Correct for any strides, and slow (a weight row is
// read once per batch row): it exists so that every layout runs, and is small so that
// every GEMV of a megakernel can compile it.
template <int NW, class E>
__device__ __forceinline__ void matvec_rows_scalar(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                                   const long long (&ws1)[NW], const et::bf16* x, long long xs0,
                                                   long long xs1, int B, int N, int K, E& epi) {
    const int lane = threadIdx.x & 31;
    for (int i = threadIdx.x >> 5; i < N * B; i += blockDim.x >> 5) {
        const int n = i / B, b = i - n * B;
        float acc[NW];
#pragma unroll
        for (int j = 0; j < NW; ++j) acc[j] = 0.0f;
        for (int k = lane; k < K; k += 32) {
            const float xv = et::to_float(x[b * xs0 + k * xs1]);
#pragma unroll
            for (int j = 0; j < NW; ++j) acc[j] += et::to_float(w[j][n * ws0[j] + k * ws1[j]]) * xv;
        }
        const float a0 = et::warp_sum(acc[0]);
        const float a1 = NW > 1 ? et::warp_sum(acc[NW - 1]) : 0.0f;
        if (lane == 0) epi(b, n, a0, a1);
    }
}

// SB is x's batch extent when known at compile time (`static_extent<0>()`, every
// megakernel's case): the fragments and loops are then sized to it; with SB = -1 one
// instance serves every batch up to 64 (rows of a larger batch are left unwritten).
// XS: x lies in shared memory (rows zero-padded to 16-byte pieces; a fused op staged it
// after the partial sums, see `matvec_partial_bytes`). LARGE: the weight tile has at
// least 512 Ki elements (`matvec_large`), so the CUDA-core path keeps more loads in flight.
template <int NW, int SB, bool XS = false, bool LARGE = false, int KINDS = 3, class E>
__device__ __forceinline__ void matvec_core(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                            const long long (&ws1)[NW], const et::bf16* x, long long xs0,
                                            long long xs1, int B, int N, int K, unsigned char* smem, E epi) {
    static_assert(SB == -1 || (SB >= 1 && SB <= 64), "matvec: the batch must be 1 to 64");
    constexpr int NBM = SB >= 1 ? (SB + 7) / 8 : 8;
    bool wv = vec_rows(x, xs0, xs1);
#pragma unroll
    for (int j = 0; j < NW; ++j) wv = wv && vec_rows(w[j], ws0[j], ws1[j]);
    const int batch = SB >= 1 ? SB : (B < 8 * NBM ? B : 8 * NBM);
    // the rows a matvec_prefetch of this task copied into the arena, if it copied these
    // tiles (the copies are read only when every row takes 16-byte loads)
    MatvecPrefetch* pf = reinterpret_cast<MatvecPrefetch*>(smem);
    const bool prefetched = pf->tiles != 0u;
    int P = 0;
    const et::bf16* sw[NW] = {};
    if (prefetched) {
        // the same tiles, and room for this call's partial sums after them; a wgmma path
        // compiled alone reads global memory (the copies have warmed L2)
        bool same = !(KINDS & MATVEC_WG_ONLY) && pf->tiles == (unsigned int)NW && pf->k == K && wv &&
                    pf->end + matvec_partial_bytes(N, K, batch, NW) <= et::arena_capacity();
#pragma unroll
        for (int j = 0; j < NW; ++j) {
            same = same && pf->src[j] == w[j] && pf->stride[j] == ws0[j] && ws1[j] == 1;
            sw[j] = reinterpret_cast<const et::bf16*>(smem + 128u + (unsigned int)(j * pf->rows) * pf->row_bytes);
        }
        P = same ? (pf->rows < N ? pf->rows : N) : 0;
        // the tensor cores take 16-row groups: a part of one is read from global memory
        if (batch > 1 && P < N) P -= P % 16;
        // copies this call does not read may still be landing where its partial sums go;
        // a warp waits for those it reads before its first prefetched row
        if (P == 0) et::mbar_wait(&pf->bar, 0);
    }
    unsigned long long* bar = P > 0 ? &pf->bar : nullptr;
    const long long srs = prefetched ? pf->row_bytes / 2 : 0;
    float* part = reinterpret_cast<float*>(smem + (P > 0 ? pf->end : 128u));
    // the weight rings after the partial sums, above batch 16 where the arena holds them
    // (rows that a prefetch copied are read from the arena instead)
    uint4 *ring = nullptr, *xring = nullptr;
    unsigned char* wg_ring = nullptr;
    if (NBM > 2 && !XS && batch > 16) {
        const unsigned int at = (P > 0 ? pf->end : 128u) + matvec_partial_bytes(N, K, batch, NW);
        if (at + matvec_ring_bytes(batch) <= et::arena_capacity()) {
            ring = reinterpret_cast<uint4*>(smem + at);
            if (ET_GEMV_XSTAGE && ET_GEMV_RING >= 2) xring = ring + (blockDim.x >> 5) * ET_GEMV_RING * 64;
        }
        // the wgmma stages: whole warpgroups, every row a 16-byte copy, no prefetched rows
        if (ET_GEMV_WGMMA && N >= MATVEC_WG_MIN_ROWS && P == 0 && wv && K % 8 == 0 && blockDim.x % 128 == 0 &&
            at + matvec_wg_ring_bytes(batch) <= et::arena_capacity())
            wg_ring = smem + at + ((1024u - et::smem_addr(smem + at) % 1024u) % 1024u);
    }
    // Batch 1 goes through the cp.async ring where the rows take 16-byte copies, no prefetch
    // left rows in the arena, and the arena holds the ring after what is in use: the
    // record and x's row, which the ring copies in after the record (or the row a fused
    // norm staged there).
    uint4* simt_ring = nullptr;
    et::bf16* const simt_x = reinterpret_cast<et::bf16*>(smem + 128u);
    if (!LARGE && ET_GEMV_SIMT_RING >= 2 && (!XS || ET_GEMV_SIMT_RING_FUSED) && batch == 1 && !prefetched && wv) {
        const unsigned int used = XS ? (unsigned int)(reinterpret_cast<const unsigned char*>(x + xs0) - smem)
                                     : 128u + matvec_simt_x_bytes(K);
        const unsigned int at = (used + 127u) & ~127u;
        if (at + matvec_simt_ring_bytes() <= et::arena_capacity()) simt_ring = reinterpret_cast<uint4*>(smem + at);
    }
    if (batch >= 1 && N >= 1) {
        if constexpr (SB == 1) {
            if (simt_ring) matvec_simt_ring<NW, XS>(w, ws0, x, simt_x, N, K, simt_ring, epi);
            else matvec_simt<NW, 1, XS, LARGE>(w, ws0, ws1, sw, P, srs, bar, x, xs0, xs1, 1, N, K, wv, epi);
        } else {
            if (SB == -1 && batch == 1 && simt_ring)
                matvec_simt_ring<NW, XS>(w, ws0, x, simt_x, N, K, simt_ring, epi);
            else if (SB == -1 && batch == 1)
                matvec_simt<NW, 1, XS, LARGE>(w, ws0, ws1, sw, P, srs, bar, x, xs0, xs1, 1, N, K, wv, epi);
#if ET_GEMV_WGMMA
            else if (NBM > 2 && wg_ring) {
                if constexpr (NBM > 4) {
                    if (batch > 32) matvec_wgmma<NW, 64>(w, ws0, x, xs0, batch, N, K, part, wg_ring, epi);
                    else matvec_wgmma<NW, 32>(w, ws0, x, xs0, batch, N, K, part, wg_ring, epi);
                } else if constexpr (NBM > 2) {
                    matvec_wgmma<NW, 32>(w, ws0, x, xs0, batch, N, K, part, wg_ring, epi);
                }
            }
#endif
            else if constexpr ((KINDS & MATVEC_WG_ONLY) != 0)
                matvec_rows_scalar<NW>(w, ws0, ws1, x, xs0, xs1, batch, N, K, epi);
            else
                matvec_mma<NW, NBM, XS, KINDS>(w, ws0, ws1, sw, P, srs, bar, x, xs0, xs1, batch, N, K, wv, part, ring, xring,
                                        epi);
        }
    }
    // every warp is done with the copies (those that read some waited for all of them):
    // the next prefetch may overwrite them
    if (prefetched) {
        __syncthreads();
        if (threadIdx.x == 0) {
            et::mbar_inval(&pf->bar);
            pf->tiles = 0u;
        }
    }
}
"# $(, $pre)*] $body)
    };
}
pub(super) use matvec_cuda;

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W>
__device__ void matvec_prefetch(W w, long long batch, unsigned char* smem) {
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_prefetch_core<1>(ws, s0, s1, w.shape[0], w.shape[1], (int)batch, smem);
}
"#);
    smem = |extents| prefetch_bytes(w, 1);
    /// Starts copying the weight tile `w` of a following GEMV of the same task (`matvec`,
    /// `matvec_residual` or `matvec_split` of `w` and `x`) into the shared-memory arena
    /// and returns at once: call it before the task's `wait!`, so that the weights move
    /// while the producers of `x` still work. As many rows as the arena holds beside the
    /// partial sums of the GEMV at batch `batch` (x's rows) are copied (bulk copies
    /// counted on an mbarrier); the GEMV reads those from shared memory and the rest from
    /// global memory. Nothing is copied where `w`'s rows are not whole 16-byte lines, or
    /// where the GEMV's tiles or batch differ from the prefetch's: the GEMV then reads
    /// global memory as without it. Nor does a GEMV read them where it runs on Hopper's
    /// warpgroup mma alone (sm_90a, static extents, batch above 16, tiles of 32 rows or
    /// more): that path streams from global memory, which the copies have warmed in L2.
    /// Does nothing on the CPU.
    pub fn matvec_prefetch(w: TileRef<'_, bf16, 2>, batch: i64) {
        let _ = (w, batch);
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class WG, class WU>
__device__ void matvec_prefetch_pair(WG wg, WU wu, long long batch, unsigned char* smem) {
    const et::bf16* ws[2] = {wg.ptr, wu.ptr};
    const long long s0[2] = {wg.stride[0], wu.stride[0]}, s1[2] = {wg.stride[1], wu.stride[1]};
    matvec_prefetch_core<2>(ws, s0, s1, wg.shape[0], wg.shape[1], (int)batch, smem);
}
"#);
    smem = |extents| prefetch_bytes(gate, 2);
    contract {
        gate[0] == up[0] && gate[1] == up[1] => "the gate and up weight tiles must have the same extents",
    }
    /// [`matvec_prefetch`] for a following [`matvec_silu`] of `gate` and `up` at batch
    /// `batch`: the same rows of both tiles.
    pub fn matvec_prefetch_pair(gate: TileRef<'_, bf16, 2>, up: TileRef<'_, bf16, 2>, batch: i64) {
        let _ = (gate, up, batch);
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W, class X, class Y>
__device__ void matvec(W w, X x, Y y, unsigned char* smem) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_core<1, X::template static_extent<0>(), false, matvec_large<1, W>(), matvec_ring_kinds<1, W, X>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], w.shape[0], w.shape[1], smem,
                   [&](int b, int n, float a, float) { y(b, n) = et::from_float<T>(a); });
}
"#);
    smem = |extents| arena_bytes(w, x, 1);
    contract {
        x[1] == w[1] => "x must have as many columns as w (the reduced extent k)",
        y[0] == x[0] && y[1] == w[0] => "y must be x's rows (the batch) by w's rows",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// `y[b, n] = Σ_k x[b, k] · w[n, k]` (f32 accumulation, rounded once to `O`): `w` is the
    /// `N x K` tile of weight rows (row-major, as a linear layer stores them; never written
    /// during the launch), `x` the `B x K` batch (B from 1 to 64), `y` is `B x N`.
    pub fn matvec<O: Element>(w: TileRef<'_, bf16, 2>, x: TileRef<'_, bf16, 2>, mut y: TileMut<'_, O, 2>) {
        for_outputs(&[w], x, |b, n, acc| y.set([b, n], O::from_f32(acc[0])));
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W, class X, class R, class Y>
__device__ void matvec_residual(W w, X x, R r, Y y, unsigned char* smem) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_core<1, X::template static_extent<0>(), false, matvec_large<1, W>(), matvec_ring_kinds<1, W, X>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], w.shape[0], w.shape[1], smem,
                   [&](int b, int n, float a, float) { y(b, n) = et::from_float<T>(et::to_float(r(b, n)) + a); });
}
"#);
    smem = |extents| arena_bytes(w, x, 1);
    contract {
        x[1] == w[1] => "x must have as many columns as w (the reduced extent k)",
        y[0] == x[0] && y[1] == w[0] => "y must be x's rows (the batch) by w's rows",
        r[0] == y[0] && r[1] == y[1] => "the residual r must have y's extents",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// `y = r + x · wᵀ`: [`matvec`] with the residual added before the one rounding. `r`
    /// and `y` may be tiles of different tensors only (an op's read and written tiles must
    /// not overlap).
    pub fn matvec_residual<O: Element>(
        w: TileRef<'_, bf16, 2>,
        x: TileRef<'_, bf16, 2>,
        r: TileRef<'_, O, 2>,
        mut y: TileMut<'_, O, 2>,
    ) {
        for_outputs(&[w], x, |b, n, acc| y.set([b, n], O::from_f32(r.get([b, n]).to_f32() + acc[0])));
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class WG, class WU, class X, class Y>
__device__ void matvec_silu(WG wg, WU wu, X x, Y y, unsigned char* smem) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[2] = {wg.ptr, wu.ptr};
    const long long s0[2] = {wg.stride[0], wu.stride[0]}, s1[2] = {wg.stride[1], wu.stride[1]};
    matvec_core<2, X::template static_extent<0>(), false, matvec_large<2, WG>(), matvec_ring_kinds<2, WG, X>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], wg.shape[0],
                   wg.shape[1], smem, [&](int b, int n, float gate, float up) {
                       y(b, n) = et::from_float<T>(silu_times(gate, up));
                   });
}
"#);
    smem = |extents| arena_bytes(gate, x, 2);
    contract {
        gate[0] == up[0] && gate[1] == up[1] => "the gate and up weight tiles must have the same extents",
        x[1] == gate[1] => "x must have as many columns as the weights (the reduced extent k)",
        y[0] == x[0] && y[1] == gate[0] => "y must be x's rows (the batch) by the weights' rows",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// `y[b, n] = silu(g) · u` with `g = Σ_k x[b, k] gate[n, k]`, `u = Σ_k x[b, k] up[n, k]`
    /// and `silu(g) = g / (1 + e^-g)`: the gated MLP's first half in one pass over the
    /// batch. The gate and up weights are two tiles of the same extents (two tensors, or
    /// two row ranges of one stacked `[gate; up]` tensor): a warp streams the same rows of
    /// both, so each output needs no second pass over `x`.
    pub fn matvec_silu<O: Element>(
        gate: TileRef<'_, bf16, 2>,
        up: TileRef<'_, bf16, 2>,
        x: TileRef<'_, bf16, 2>,
        mut y: TileMut<'_, O, 2>,
    ) {
        for_outputs(&[gate, up], x, |b, n, acc| y.set([b, n], O::from_f32(silu_times(acc[0], acc[1]))));
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W, class X, class P>
__device__ void matvec_split(W w, X x, P part, unsigned char* smem) {
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_core<1, X::template static_extent<0>(), false, matvec_large<1, W>(), matvec_ring_kinds<1, W, X>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], w.shape[0], w.shape[1], smem,
                   [&](int b, int n, float a, float) { part(0, b, n) = a; });
}
"#);
    smem = |extents| arena_bytes(w, x, 1);
    contract {
        x[1] == w[1] => "x must have as many columns as w (this split's range of k)",
        part[0] == 1 && part[1] == x[0] && part[2] == w[0] => "part must be one split: 1 x x's rows x w's rows",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// One split of a split-K GEMV: `part[0, b, n] = Σ_k x[b, k] · w[n, k]` in f32 over
    /// this split's range of `k` (`w` and `x` cut to it), written to split `s` of an
    /// `[S, B, N]` partial tensor as the tile `[1, B, N_tile]`. The consumer that waits
    /// for the `S` splits sums them with [`reduce_split`] or [`reduce_split_residual`].
    pub fn matvec_split(w: TileRef<'_, bf16, 2>, x: TileRef<'_, bf16, 2>, mut part: TileMut<'_, f32, 3>) {
        for_outputs(&[w], x, |b, n, acc| part.set([0, b, n], acc[0]));
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class P, class Y>
__device__ void reduce_split(P part, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const int S = part.shape[0], B = y.shape[0], N = y.shape[1];
    for (int e = threadIdx.x; e < B * N; e += blockDim.x) {
        const int b = e / N, n = e % N;
        float acc = 0.0f;
        for (int s = 0; s < S; ++s) acc += part(s, b, n);
        y(b, n) = et::from_float<T>(acc);
    }
}
"#);
    contract {
        part[1] == y[0] && part[2] == y[1] => "part must be S splits of y's extents: [S, y's rows, y's columns]",
        part[0] >= 1 => "part must hold at least one split",
    }
    /// `y[b, n] = Σ_s part[s, b, n]`, summed in f32 in split order and rounded once: the
    /// reduce step of [`matvec_split`].
    pub fn reduce_split<O: Element>(part: TileRef<'_, f32, 3>, mut y: TileMut<'_, O, 2>) {
        let [s, b, n] = part.shape();
        for bi in 0..b {
            for ni in 0..n {
                let acc: f32 = (0..s).map(|si| part.get([si, bi, ni])).sum();
                y.set([bi, ni], O::from_f32(acc));
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class P, class R, class Y>
__device__ void reduce_split_residual(P part, R r, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const int S = part.shape[0], B = y.shape[0], N = y.shape[1];
    for (int e = threadIdx.x; e < B * N; e += blockDim.x) {
        const int b = e / N, n = e % N;
        float acc = 0.0f;
        for (int s = 0; s < S; ++s) acc += part(s, b, n);
        y(b, n) = et::from_float<T>(et::to_float(r(b, n)) + acc);
    }
}
"#);
    contract {
        part[1] == y[0] && part[2] == y[1] => "part must be S splits of y's extents: [S, y's rows, y's columns]",
        part[0] >= 1 => "part must hold at least one split",
        r[0] == y[0] && r[1] == y[1] => "the residual r must have y's extents",
    }
    /// `y[b, n] = r[b, n] + Σ_s part[s, b, n]`: [`reduce_split`] with a residual add
    /// (the output projection of a transformer block, split over k).
    pub fn reduce_split_residual<O: Element>(part: TileRef<'_, f32, 3>, r: TileRef<'_, O, 2>, mut y: TileMut<'_, O, 2>) {
        let [s, b, n] = part.shape();
        for bi in 0..b {
            for ni in 0..n {
                let acc: f32 = (0..s).map(|si| part.get([si, bi, ni])).sum();
                y.set([bi, ni], O::from_f32(r.get([bi, ni]).to_f32() + acc));
            }
        }
    }
}

/// Calls `out(b, n, acc)` with `acc[j] = Σ_k x[b, k] · w_j[n, k]` in f32 for every batch
/// row `b` and weight row `n`: the CPU half of every GEMV here.
fn for_outputs(w: &[TileRef<'_, bf16, 2>], x: TileRef<'_, bf16, 2>, out: impl FnMut(usize, usize, [f32; 2])) {
    let ([_, k], batch) = (w[0].shape(), x.shape()[0]);
    let xs: Vec<Vec<f32>> = (0..batch).map(|b| (0..k).map(|p| x.get([b, p]).to_f32()).collect()).collect();
    for_rows(w, &xs, out);
}

/// The gated MLP's activation `silu(gate) · up`, `silu(g) = g / (1 + e^-g)`, in f32 (the
/// CPU half of the CUDA's `silu_times`).
pub(super) fn silu_times(gate: f32, up: f32) -> f32 {
    gate / (1.0 + (-gate).exp()) * up
}

/// [`for_outputs`] over activation rows already read (`xs[b]` has `k` values).
pub(super) fn for_rows(w: &[TileRef<'_, bf16, 2>], xs: &[Vec<f32>], mut out: impl FnMut(usize, usize, [f32; 2])) {
    let [n, k] = w[0].shape();
    for r in 0..n {
        let rows: Vec<Vec<f32>> = w.iter().map(|w| (0..k).map(|p| w.get([r, p]).to_f32()).collect()).collect();
        for (b, xb) in xs.iter().enumerate() {
            let mut acc = [0f32; 2];
            for (j, row) in rows.iter().enumerate() {
                acc[j] = row.iter().zip(xb).map(|(a, b)| a * b).sum();
            }
            out(b, r, acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_keeps_every_warp_busy_at_llama_shapes() {
        // one 16-row group over 2048: 16 slices of 128, one per warp
        assert_eq!(plan(16, 2048, 1, 1), Plan { groups_per_round: 1, splits: 16, split_k: 128, row_stride: 20 });
        // 48 rows (3 groups) at batch 64: 5 slices (15 units) is the most even split that fits
        let p = plan(48, 4096, 64, 1);
        assert_eq!((p.groups_per_round, p.splits, p.split_k), (3, 5, 896));
        // gate and up, 112 rows: 14 units per slice; 8 slices would spread evenly at batch 1
        assert_eq!(plan(112, 4096, 1, 2).splits, 8);
        assert_eq!(plan(112, 4096, 64, 2).splits, 1);
        // the LM head's 256 rows at batch 64 in one round, one slice
        assert_eq!(plan(256, 2048, 64, 1), Plan { groups_per_round: 16, splits: 1, split_k: 2048, row_stride: 260 });
        // 4104 rows at batch 64: rounds of 19 groups (80 KB of partial sums beside the ring)
        assert_eq!(plan(4104, 24, 64, 1).groups_per_round, 19);
        assert_eq!(plan(4104, 24, 16, 1).groups_per_round, 95);
    }

    #[test]
    fn the_plan_covers_k_with_nonempty_slices_and_fits_the_arena() {
        for rows in [1, 8, 16, 24, 40, 72, 112, 256, 4104] {
            for k in [1, 9, 127, 128, 129, 1026, 2056, 4104, 14336] {
                for batch in [1, 2, 7, 8, 9, 16, 33, 64] {
                    for mats in [1, 2] {
                        let p = plan(rows, k, batch, mats);
                        let what = format!("rows {rows}, k {k}, batch {batch}, mats {mats}: {p:?}");
                        assert!(p.split_k.is_multiple_of(K_GRANULE) && p.splits >= 1, "{what}");
                        assert!((p.splits - 1) * p.split_k < k && p.splits * p.split_k >= k, "{what}");
                        assert_eq!(p.row_stride, 16 * p.groups_per_round + 4, "{what}");
                        let bytes = partial_bytes(&[rows, k], &[batch, k], mats);
                        assert!(bytes <= if batch > 16 { ARENA_CAP_RING } else { ARENA_CAP }, "{what}: {bytes} bytes");
                        let sums = if batch > 1 { mats * p.splits * batch * p.row_stride * 4 } else { 0 };
                        assert_eq!(bytes, sums, "{what}");
                        let sized = PREFETCH_RECORD + bytes + ring_bytes(batch);
                        // room for 12 KB of the kernel's static shared memory on a 227 KB card
                        assert!(sized <= 215 * 1024, "{what}: {sized} bytes");
                        assert_eq!(
                            arena_bytes(&[rows, k], &[batch, k], mats),
                            sized.max(PREFETCH_RECORD + simt_x_bytes(k) + SIMT_RING_BYTES)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_op_of_the_family_declares_the_arena_of_its_plan() {
        let (w, x) = (&[72usize, 4104][..], &[16usize, 4104][..]);
        let one = arena_bytes(w, x, 1);
        assert!(one > 0);
        assert_eq!(matvec::smem(&[w, x, &[16, 72]]), one);
        assert_eq!(matvec_residual::smem(&[w, x, &[16, 72], &[16, 72]]), one);
        assert_eq!(matvec_split::smem(&[w, x, &[1, 16, 72]]), one);
        assert_eq!(matvec_silu::smem(&[w, w, x, &[16, 72]]), arena_bytes(w, x, 2));
        const { assert!(matvec::OP.uses_smem && matvec_silu::OP.uses_smem && matvec_split::OP.uses_smem) };
        // above batch 16 the rings follow the partial sums: the larger of the mma.sync
        // path's (16 warps' 4 KB of weights and 4 steps of two slices' activations, at
        // batch 64 64 rows of 64 bytes: 96 KB) and the wgmma path's (4 warpgroups' two
        // stages of 64 weight rows and 64 batch columns, 32 up to batch 32, of 128 bytes,
        // and 1 KB of alignment: 129 KB)
        assert_eq!(ring_bytes(16), 0);
        assert_eq!(PLAN_WARPS * RING_STEPS * RING_SLOT_BYTES + xring_bytes(64), 96 * 1024);
        assert_eq!(ring_bytes(64), 4 * 2 * 128 * 128 + 1024);
        assert_eq!(
            arena_bytes(w, &[17, 4104], 1),
            PREFETCH_RECORD + partial_bytes(w, &[17, 4104], 1) + 4 * 2 * 96 * 128 + 1024
        );
        // batch 1 takes the record, x's row (4104 elements: 8208 bytes, to 8320 for the
        // ring's alignment) and the cp.async ring, and so does every batch whose own plan
        // needs less (an arena sized at a symbolic batch's maximum holds batch 1's)
        assert_eq!(arena_bytes(w, &[1, 4104], 1), PREFETCH_RECORD + 8320 + 64 * 1024);
        assert_eq!(arena_bytes(&[16, 256], &[2, 256], 1), PREFETCH_RECORD + 512 + SIMT_RING_BYTES);
        for batch in 1..=64 {
            assert!(arena_bytes(w, &[batch, 4104], 2) >= arena_bytes(w, &[1, 4104], 2), "batch {batch}");
        }
        // extents of the wrong rank (a contract error elsewhere) declare nothing
        assert_eq!(arena_bytes(&[72], x, 1), 0);
        assert_eq!(matvec_prefetch::smem(&[w, &[]]), prefetch_bytes(w, 1));
        assert_eq!(matvec_prefetch_pair::smem(&[w, w, &[]]), prefetch_bytes(w, 2));
    }

    #[test]
    fn a_prefetch_takes_the_rows_that_fit_beside_the_partial_sums() {
        let row = |k: usize| 2 * k + PREFETCH_ROW_PAD;
        // a 16 x 2048 tile at batch 1 fits whole: the record and 16 padded rows
        assert_eq!(prefetch_rows(16, 2048, 1, 1, PREFETCH_LIMIT), 16);
        assert_eq!(prefetch_bytes(&[16, 2048], 1), PREFETCH_RECORD + 16 * row(2048));
        // gate and up of 64 x 2048: as many rows of both as the limit holds
        let fit = (PREFETCH_LIMIT - PREFETCH_RECORD) / (2 * row(2048));
        assert_eq!(prefetch_rows(64, 2048, 1, 2, PREFETCH_LIMIT), fit);
        assert!(prefetch_bytes(&[64, 2048], 2) <= PREFETCH_LIMIT);
        // at batch 16 the partial sums come first and the rows are whole 16-row groups
        let cap = PREFETCH_LIMIT;
        let r = prefetch_rows(64, 8192, 16, 1, cap);
        assert!(r.is_multiple_of(16) && r < 64, "{r}");
        assert!(PREFETCH_RECORD + partial_bytes(&[64, 8192], &[16, 8192], 1) + r * row(8192) <= cap);
        // rows that are not whole 16-byte lines, or an arena without room, copy nothing
        assert_eq!(prefetch_rows(16, 2044, 1, 1, cap), 0);
        assert_eq!(prefetch_rows(16, 2048, 1, 1, 64), 0);
        for rows in [1, 15, 16, 17, 100, 4096] {
            for k in [8, 64, 2048, 14336] {
                for batch in [1, 2, 16, 64] {
                    for mats in [1, 2] {
                        let r = prefetch_rows(rows, k, batch, mats, cap);
                        let used = PREFETCH_RECORD + partial_bytes(&[rows, k], &[batch, k], mats) + mats * r * row(k);
                        assert!(r <= rows && used <= cap, "{rows} x {k}, batch {batch}, mats {mats}: {r} rows");
                        assert!(r == rows || batch == 1 || r.is_multiple_of(16), "{rows} x {k}, batch {batch}: {r}");
                    }
                }
            }
        }
    }
}
