// A probe, not part of the library: how a batch-1 GEMV task streams its weights when an SM
// runs ONE 512-thread CTA (the megakernel's shape). Layers of T independent tasks with a
// grid barrier between layers (a layer's tasks all wait for the previous layer, as in the
// decode step); every layer reads fresh weights (more bytes than L2 holds).
//
//   nvcc -O3 -arch=sm_90a -std=c++17 -o gemv_stream gemv_stream.cu && ./gemv_stream
//
// Variants:
//   row<U>    a warp per weight row, U 16-byte loads per lane in flight per round
//             (the library's batch-1 path until run 28; the LM head's still);
//   flat<P>   the task's (row, 256-column piece) pairs split evenly over the warps; a lane
//             issues up to P pieces' loads before it uses any (all of a small task's
//             bytes in flight at once), row sums combined through shared memory;
//   bulk<KB>  thread 0 streams the task into a shared-memory ring of 16 KB stages with
//             bulk copies (TMA, 1-D) on mbarriers, KB of them in flight; warps consume a
//             stage's 256-column pieces (a warp sum and a shared atomic per piece);
//   bulkpf<KB> the same ring, its producer running ahead into the next layer's task while
//             the grid waits;
//   regpf<R>  a warp's first R pieces loaded into registers before the task's wait (the
//             grid barrier), the rest streamed after it;
//   wring<SxC> each warp its own ring of S slots of C bytes, one bulk copy (TMA) a slot on
//             the slot's mbarrier, the row's sum kept in registers (wringpf: the next
//             layer's first S pieces issued before the grid barrier);
//   cring<S>  each lane its own 16-byte parts by cp.async into S slots of its own (1 KB a
//             warp a piece), S - 1 pieces in flight across row ends (the library's
//             batch-1 form since run 28).
// The figures of two runs on an H200 are in gemv_stream-h200*.txt beside this file; what
// they say is in benches/RESULTS.md, run 15; the rings' in run 28
// (benches/results/run28-probe-gemv-ring.txt). An argument runs only the variants whose
// names start with one of its comma-separated prefixes (`./gemv_stream row,cring`).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

typedef unsigned short bf16_t;
__device__ __forceinline__ float lo(unsigned int w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float dot8(uint4 a, uint4 b) {
    return lo(a.x) * lo(b.x) + hi(a.x) * hi(b.x) + lo(a.y) * lo(b.y) + hi(a.y) * hi(b.y) + lo(a.z) * lo(b.z) +
           hi(a.z) * hi(b.z) + lo(a.w) * lo(b.w) + hi(a.w) * hi(b.w);
}
__device__ __forceinline__ uint4 ldw(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(unsigned long long* b, unsigned c) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(c) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mb_expect(unsigned long long* b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mb_arrive(unsigned long long* b) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory");
}
__device__ __forceinline__ bool mb_try(unsigned long long* b, unsigned ph) {
    unsigned ok;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(sa(b)), "r"(ph) : "memory");
    return ok;
}
__device__ __forceinline__ void mb_wait(unsigned long long* b, unsigned ph) { while (!mb_try(b, ph)) {} }
__device__ __forceinline__ void bulk(void* dst, const void* src, unsigned bytes, unsigned long long* b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sa(dst)),
                 "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
}

// grid barrier: all CTAs resident (one per SM)
__device__ void grid_sync(unsigned* count, volatile unsigned* gen, unsigned nblocks) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned g = *gen;
        __threadfence();
        if (atomicAdd(count, 1u) == nblocks - 1) {
            *count = 0;
            __threadfence();
            *gen = g + 1;
        } else {
            while (*gen == g) {}
        }
        __threadfence();
    }
    __syncthreads();
}

struct Job {
    const bf16_t* w;  // L layers of T tasks of N x K
    const bf16_t* x;  // K
    float* y;         // T * N (per layer overwritten)
    int N, K, T, L;
    unsigned* count;
    unsigned* gen;
};

// ---- row<U>
template <int U>
__device__ void task_row(const bf16_t* w, const bf16_t* x, float* y, int N, int K) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int r = warp; r < N; r += warps) {
        const bf16_t* wr = w + (long long)r * K;
        float acc = 0.f;
        for (int k0 = lane * 8; k0 < K; k0 += 256 * U) {
            uint4 a[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int kk = k0 + 256 * u;
                a[u] = kk < K ? ldw(wr + kk) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int kk = k0 + 256 * u;
                if (kk < K) acc += dot8(a[u], *reinterpret_cast<const uint4*>(x + kk));
            }
        }
        acc = wsum(acc);
        if (lane == 0) y[r] = acc;
    }
}

// ---- flat<P>: pieces p = r * (K/256) + c; warp w takes [w*per, (w+1)*per)
template <int P>
__device__ void task_flat(const bf16_t* w, const bf16_t* x, float* y, int N, int K, float* ys) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int i = threadIdx.x; i < N; i += blockDim.x) ys[i] = 0.f;
    __syncthreads();
    const int cpr = K / 256, total = N * cpr;
    const int per = (total + warps - 1) / warps;
    const int p0 = warp * per, p1 = min(total, p0 + per);
    for (int base = p0; base < p1; base += P) {
        uint4 a[P];
#pragma unroll
        for (int j = 0; j < P; ++j) {
            const int p = base + j;
            if (p < p1) {
                const int r = p / cpr, c = p - r * cpr;
                a[j] = ldw(w + (long long)r * K + c * 256 + lane * 8);
            }
        }
        float acc = 0.f;
        int row = base / cpr;
#pragma unroll
        for (int j = 0; j < P; ++j) {
            const int p = base + j;
            if (p < p1) {
                const int r = p / cpr, c = p - r * cpr;
                if (r != row) {
                    acc = wsum(acc);
                    if (lane == 0) atomicAdd(&ys[row], acc);
                    acc = 0.f;
                    row = r;
                }
                acc += dot8(a[j], *reinterpret_cast<const uint4*>(x + c * 256 + lane * 8));
            }
        }
        acc = wsum(acc);
        if (lane == 0) atomicAdd(&ys[row], acc);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < N; i += blockDim.x) y[i] = ys[i];
}

// ---- bulk: the CTA's weights as one stream of 16 KB stages (its tasks in order, each task
// a whole number of stages), thread 0 the producer of a ring of NS stages (bulk copies on
// `full` mbarriers), every warp a consumer (arrives on `empty` when done with a stage).
// PF: the producer runs ahead across task and layer boundaries (the next layer's weights
// move while the grid waits); otherwise it stops at the task's end.
constexpr int SB = 16384;
struct Stream {
    const unsigned char* w;
    long long task_bytes;
    int spt, cnt, T, grid;  // stages per task, tasks per layer of this CTA
    __device__ const unsigned char* src(long long g) const {
        const long long q = g / spt, s = g % spt;
        const long long l = q / cnt, t = blockIdx.x + (q % cnt) * grid;
        return w + (l * T + t) * task_bytes + s * SB;
    }
    __device__ unsigned bytes(long long g) const {
        const long long s = g % spt;
        return (unsigned)min((long long)SB, task_bytes - s * SB);
    }
};
template <int NS>
__device__ void issue(const Stream& st, long long g, unsigned char* smem, unsigned long long* full) {
    const int slot = (int)(g % NS);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    mb_expect(&full[slot], st.bytes(g));
    bulk(smem + slot * SB, st.src(g), st.bytes(g), &full[slot]);
}
// consumes the task whose first stage is g0 (stage-sequence number); issues refills
template <int NS, bool PF>
__device__ void task_bulk(const Stream& st, long long g0, long long total, const bf16_t* x, float* y, int N, int K,
                          float* ys, unsigned char* smem, unsigned long long* full, unsigned long long* empty) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int i = threadIdx.x; i < N; i += blockDim.x) ys[i] = 0.f;
    if (!PF && threadIdx.x == 0)
        for (int s = 0; s < NS && s < st.spt; ++s) {
            if (g0 + s >= NS) mb_wait(&empty[(g0 + s) % NS], (unsigned)(((g0 + s) / NS - 1) & 1));
            issue<NS>(st, g0 + s, smem, full);
        }
    __syncthreads();
    for (int s = 0; s < st.spt; ++s) {
        const long long g = g0 + s;
        const int slot = (int)(g % NS);
        mb_wait(&full[slot], (unsigned)((g / NS) & 1));
        const int n = (int)st.bytes(g);
        const bf16_t* sw = reinterpret_cast<const bf16_t*>(smem + slot * SB);
        const long long e0 = (long long)s * (SB / 2);
        const int pieces = n / 512;
        for (int q = warp; q < pieces; q += warps) {
            const long long e = e0 + q * 256;
            const int r = (int)(e / K), c = (int)(e - (long long)r * K);
            float v = dot8(*reinterpret_cast<const uint4*>(sw + q * 256 + lane * 8),
                           *reinterpret_cast<const uint4*>(x + c + lane * 8));
            v = wsum(v);
            if (lane == 0) atomicAdd(&ys[r], v);
        }
        __syncwarp();
        if (lane == 0) mb_arrive(&empty[slot]);
        const long long next = g + NS;
        if (threadIdx.x == 0 && next < total && (PF || s + NS < st.spt)) {
            mb_wait(&empty[slot], (unsigned)((g / NS) & 1));
            issue<NS>(st, next, smem, full);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < N; i += blockDim.x) y[i] = ys[i];
}

// ---- regpf<R>: a warp's rows (w, w + 16, ..) as a list of 256-column pieces; the first R
// pieces are loaded into registers BEFORE the task's wait (the grid barrier here), the
// rest streamed after it four at a time.
template <int R>
struct Held { uint4 a[R]; };
template <int R>
__device__ void regpf_issue(const bf16_t* w, int N, int K, Held<R>& h) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int cpr = K / 256, mine = ((N - 1 - warp) / warps + 1) * cpr;
#pragma unroll
    for (int j = 0; j < R; ++j)
        if (warp < N && j < mine) {
            const int r = warp + warps * (j / cpr), c = j % cpr;
            h.a[j] = ldw(w + (long long)r * K + c * 256 + lane * 8);
        }
}
template <int R>
__device__ void regpf_finish(const bf16_t* w, const bf16_t* x, float* y, int N, int K, const Held<R>& h) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (warp >= N) return;
    const int cpr = K / 256, mine = ((N - 1 - warp) / warps + 1) * cpr;
    float acc = 0.f;
    int row = warp;
#pragma unroll
    for (int j = 0; j < R; ++j)
        if (j < mine) {
            const int r = warp + warps * (j / cpr), c = j % cpr;
            if (r != row) {
                acc = wsum(acc);
                if (lane == 0) y[row] = acc;
                acc = 0.f;
                row = r;
            }
            acc += dot8(h.a[j], *reinterpret_cast<const uint4*>(x + c * 256 + lane * 8));
        }
    // the rest, four pieces at a time
    for (int j0 = R; j0 < mine; j0 += 4) {
        uint4 a[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int j = j0 + u;
            if (j < mine) a[u] = ldw(w + (long long)(warp + warps * (j / cpr)) * K + (j % cpr) * 256 + lane * 8);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int j = j0 + u;
            if (j < mine) {
                const int r = warp + warps * (j / cpr), c = j % cpr;
                if (r != row) {
                    acc = wsum(acc);
                    if (lane == 0) y[row] = acc;
                    acc = 0.f;
                    row = r;
                }
                acc += dot8(a[u], *reinterpret_cast<const uint4*>(x + c * 256 + lane * 8));
            }
        }
    }
    acc = wsum(acc);
    if (lane == 0) y[row] = acc;
}
template <int R>
__global__ void __launch_bounds__(512, 1) kern_regpf(Job j) {
    for (int l = 0; l < j.L; ++l) {
        Held<R> h;
        const int t0 = blockIdx.x;
        if (t0 < j.T) regpf_issue<R>(j.w + ((long long)l * j.T + t0) * j.N * j.K, j.N, j.K, h);
        // the wait for the previous layer (its x): the loads above are in flight meanwhile
        grid_sync(j.count, j.gen, gridDim.x);
        for (int t = blockIdx.x; t < j.T; t += gridDim.x) {
            const bf16_t* w = j.w + ((long long)l * j.T + t) * j.N * j.K;
            if (t != t0) regpf_issue<R>(w, j.N, j.K, h);
            regpf_finish<R>(w, j.x, j.y + (long long)t * j.N, j.N, j.K, h);
            __syncthreads();
        }
    }
}

// ---- wring<S, C>: warp w streams its own rows (w, w + 16, ..) as pieces of C bytes through
// a ring of S slots of its own in shared memory: lane 0 issues one bulk copy (TMA) per
// piece on the slot's mbarrier, the lanes read their 16-byte parts of the piece back and
// keep the row's sum in registers (a warp sum per row, no CTA barrier). PF: the first S
// pieces of the CTA's next task are issued before the grid barrier (the task's wait).
struct WRing {
    unsigned char* slots;         // this warp's S slots of C bytes
    unsigned long long* bar;      // this warp's S mbarriers
    long long seq;                // pieces issued into this warp's ring so far
    long long used;               // pieces consumed so far
};
template <int S, int C>
__device__ void wring_issue(WRing& r, const bf16_t* w, int N, int K, int piece) {
    // piece `piece` of this warp's stream of the task: its row and byte offset
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5, ppr = K * 2 / C;
    const int row = warp + warps * (piece / ppr), off = (piece % ppr) * C;
    const int slot = (int)(r.seq % S);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    mb_expect(&r.bar[slot], C);
    bulk(r.slots + slot * C, reinterpret_cast<const unsigned char*>(w + (long long)row * K) + off, C, &r.bar[slot]);
    ++r.seq;
}
template <int S, int C>
__device__ int wring_pieces(int N, int K) {
    const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    return warp < N ? ((N - 1 - warp) / warps + 1) * (K * 2 / C) : 0;
}
template <int S, int C>
__device__ void wring_start(WRing& r, const bf16_t* w, int N, int K) {
    const int n = wring_pieces<S, C>(N, K);
    if ((threadIdx.x & 31) == 0)
        for (int p = 0; p < S && p < n; ++p) wring_issue<S, C>(r, w, N, K, p);
}
template <int S, int C>
__device__ void wring_finish(WRing& r, const bf16_t* w, const bf16_t* x, float* y, int N, int K) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int n = wring_pieces<S, C>(N, K), ppr = K * 2 / C;
    constexpr int V16 = C / 512;  // 16-byte parts per lane per piece
    float acc = 0.f;
    int row = warp, col = 0;      // col: element offset of the piece in its row
    for (int p = 0; p < n; ++p) {
        const long long g = r.used + p;
        const int slot = (int)(g % S);
        mb_wait(&r.bar[slot], (unsigned)((g / S) & 1));
        const unsigned char* sp = r.slots + slot * C;
#pragma unroll
        for (int v = 0; v < V16; ++v) {
            const int e = v * 256 + lane * 8;
            acc += dot8(*reinterpret_cast<const uint4*>(sp + e * 2), *reinterpret_cast<const uint4*>(x + col + e));
        }
        __syncwarp();
        if (lane == 0 && p + S < n) wring_issue<S, C>(r, w, N, K, p + S);
        col += C / 2;
        if (col == K) {
            acc = wsum(acc);
            if (lane == 0) y[row] = acc;
            acc = 0.f;
            col = 0;
            row += warps;
        }
    }
    r.used += n;
    (void)ppr;
}
template <int S, int C, bool PF>
__global__ void __launch_bounds__(512, 1) kern_wring(Job j) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ unsigned long long bars[16 * S];
    const int warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) for (int i = 0; i < 16 * S; ++i) mb_init(&bars[i], 1);
    __syncthreads();
    WRing r{smem + warp * S * C, bars + warp * S, 0, 0};
    const auto task_w = [&](int l, int t) { return j.w + ((long long)l * j.T + t) * j.N * j.K; };
    if (PF && blockIdx.x < j.T) wring_start<S, C>(r, task_w(0, blockIdx.x), j.N, j.K);
    for (int l = 0; l < j.L; ++l) {
        for (int t = blockIdx.x; t < j.T; t += gridDim.x) {
            if (!PF || t != (int)blockIdx.x) wring_start<S, C>(r, task_w(l, t), j.N, j.K);
            wring_finish<S, C>(r, task_w(l, t), j.x, j.y + (long long)t * j.N, j.N, j.K);
        }
        // PF: the next layer's first pieces move while the grid waits
        if (PF && l + 1 < j.L && blockIdx.x < j.T) wring_start<S, C>(r, task_w(l + 1, blockIdx.x), j.N, j.K);
        grid_sync(j.count, j.gen, gridDim.x);
    }
}

// ---- cring<S>: each lane streams its own 16-byte parts of its warp's rows by cp.async into
// S slots of its own (1 KB a warp a slot: two parts a lane), S - 1 groups in flight,
// read back by the same lane (no barrier, no registers held for loads in flight).
template <int S>
__global__ void __launch_bounds__(512, 1) kern_cring(Job j) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    uint4* mine = reinterpret_cast<uint4*>(smem) + (warp * S * 64) + lane;  // slot s part v: mine[s*64 + v*32]
    for (int l = 0; l < j.L; ++l) {
        for (int t = blockIdx.x; t < j.T; t += gridDim.x) {
            const bf16_t* w = j.w + ((long long)l * j.T + t) * j.N * j.K;
            float* y = j.y + (long long)t * j.N;
            const int ppr = j.K / 512, n = warp < j.N ? ((j.N - 1 - warp) / warps + 1) * ppr : 0;
            const auto issue = [&](int p) {
                const int row = warp + warps * (p / ppr), c = (p % ppr) * 512 + lane * 8;
                const bf16_t* src = w + (long long)row * j.K + c;
                uint4* dst = mine + (p % S) * 64;
#pragma unroll
                for (int v = 0; v < 2; ++v)
                    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(sa(dst + v * 32)),
                                 "l"(src + v * 256) : "memory");
            };
            for (int p = 0; p < S - 1; ++p) {
                if (p < n) issue(p);
                asm volatile("cp.async.commit_group;" ::: "memory");
            }
            float acc = 0.f;
            int row = warp, col = 0;
            for (int p = 0; p < n; ++p) {
                if (p + S - 1 < n) issue(p + S - 1);
                asm volatile("cp.async.commit_group;" ::: "memory");
                asm volatile("cp.async.wait_group %0;" ::"n"(S - 1) : "memory");
                const uint4* sp = mine + (p % S) * 64;
#pragma unroll
                for (int v = 0; v < 2; ++v)
                    acc += dot8(sp[v * 32], *reinterpret_cast<const uint4*>(j.x + col + v * 256 + lane * 8));
                col += 512;
                if (col == j.K) {
                    acc = wsum(acc);
                    if (lane == 0) y[row] = acc;
                    acc = 0.f;
                    col = 0;
                    row += warps;
                }
            }
            asm volatile("cp.async.wait_group 0;" ::: "memory");
        }
        grid_sync(j.count, j.gen, gridDim.x);
    }
}

template <int V, int A>
__global__ void __launch_bounds__(512, 1) kern(Job j) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ float ys[1024];
    __shared__ unsigned long long full[16], empty[16];
    constexpr int NS = (V >= 2) ? A : 1;
    Stream st{reinterpret_cast<const unsigned char*>(j.w), (long long)j.N * j.K * 2, 0, 0, j.T, (int)gridDim.x};
    st.spt = (int)((st.task_bytes + SB - 1) / SB);
    st.cnt = blockIdx.x < j.T ? (j.T - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const long long total = (long long)j.L * st.cnt * st.spt;
    if (V >= 2) {
        if (threadIdx.x == 0) {
            for (int s = 0; s < NS; ++s) { mb_init(&full[s], 1); mb_init(&empty[s], 16); }
            if (V == 3)
                for (long long g = 0; g < NS && g < total; ++g) issue<NS>(st, g, smem, full);
        }
        __syncthreads();
    }
    long long g = 0;
    for (int l = 0; l < j.L; ++l) {
        for (int t = blockIdx.x; t < j.T; t += gridDim.x) {
            const bf16_t* w = j.w + ((long long)l * j.T + t) * j.N * j.K;
            float* y = j.y + (long long)t * j.N;
            if (V == 0) task_row<A>(w, j.x, y, j.N, j.K);
            if (V == 1) task_flat<A>(w, j.x, y, j.N, j.K, ys);
            if (V == 2) task_bulk<NS, false>(st, g, total, j.x, y, j.N, j.K, ys, smem, full, empty);
            if (V == 3) task_bulk<NS, true>(st, g, total, j.x, y, j.N, j.K, ys, smem, full, empty);
            g += st.spt;
            __syncthreads();
        }
        grid_sync(j.count, j.gen, gridDim.x);
    }
    // drain: nothing in flight (every issued stage was consumed)
}

static float bf2f(bf16_t b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }

struct Shape { const char* name; int N, K, T, L; };

// V 5 / 6: wring<A / 1024 slots... encoded as A = S * 10000 + C (6: with PF); V 7: cring<A>
template <int V, int A>
void launch(const Job& j, int sms, int smem) {
    if constexpr (V == 4) kern_regpf<A><<<sms, 512, smem>>>(j);
    else if constexpr (V == 5 || V == 6) kern_wring<A / 10000, A % 10000, V == 6><<<sms, 512, smem>>>(j);
    else if constexpr (V == 7) kern_cring<A><<<sms, 512, smem>>>(j);
    else kern<V, A><<<sms, 512, smem>>>(j);
}
template <int V, int A>
void allow_smem(int smem) {
    if constexpr (V == 4) return;
    else if constexpr (V == 5 || V == 6)
        CK(cudaFuncSetAttribute(kern_wring<A / 10000, A % 10000, V == 6>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    else if constexpr (V == 7) CK(cudaFuncSetAttribute(kern_cring<A>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    else CK(cudaFuncSetAttribute(kern<V, A>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}
static const char* g_only = nullptr;  // comma-separated name prefixes to run (argv[1])
static bool wanted(const char* name) {
    if (!g_only) return true;
    for (const char* p = g_only; *p;) {
        const char* e = strchr(p, ',');
        const size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0 && strncmp(name, p, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

template <int V, int A>
float run(const char* vname, const Shape& s, bf16_t* dw, bf16_t* dx, float* dy, unsigned* sync, int sms,
          const std::vector<bf16_t>& hw, const std::vector<bf16_t>& hx, long long rot_elems, int rots) {
    if (!wanted(vname)) return 0.f;
    // the rings take whole pieces of a row (wring: C bytes; cring: 1 KB)
    const int piece = (V == 5 || V == 6) ? A % 10000 : V == 7 ? 1024 : 0;
    if (piece > 0 && (s.K * 2) % piece != 0) return 0.f;
    Job j{dw, dx, dy, s.N, s.K, s.T, s.L, sync, sync + 1};
    const int smem = (V == 2 || V == 3) ? A * SB : (V == 5 || V == 6) ? 16 * (A / 10000) * (A % 10000) : V == 7 ? 16 * A * 1024 : 0;
    allow_smem<V, A>(smem);
    // check: last layer's y of rotation 0
    CK(cudaMemset(dy, 0xff, sizeof(float) * s.T * s.N));
    launch<V, A>(j, sms, smem);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> y(s.T * s.N);
    CK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    double maxerr = 0;
    for (int t = 0; t < s.T; t += 37)
        for (int r = 0; r < s.N; r += 5) {
            const long long base = (((long long)(s.L - 1) * s.T + t) * s.N + r) * s.K;
            double ref = 0;
            for (int k = 0; k < s.K; ++k) ref += (double)bf2f(hw[(base + k) % hw.size()]) * bf2f(hx[k]);
            { const double e = fabs(ref - y[t * s.N + r]) / (1.0 + fabs(ref)); maxerr = (e == e && maxerr == maxerr) ? std::max(maxerr, e) : NAN; }
        }
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int it = 0; it < 12; ++it) {
        Job jr = j;
        jr.w = dw + (long long)(it % rots) * rot_elems;
        CK(cudaEventRecord(a));
        launch<V, A>(jr, sms, smem);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float m;
        CK(cudaEventElapsedTime(&m, a, b));
        ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    const float med = ms[ms.size() / 2];
    const double bytes = (double)s.N * s.K * 2 * s.T * s.L;
    const double per_layer_us = med * 1000.0 / s.L;
    const int waves = (s.T + sms - 1) / sms;
    printf("%-16s %-10s task %5.0f KB  T %4d  layer %8.2f us  %7.0f GB/s  %5.1f GB/s/SM-busy  task %6.2f us  err %.1e\n",
           s.name, vname, s.N * s.K * 2 / 1024.0, s.T, per_layer_us, bytes / (med * 1e-3) / 1e9,
           (double)s.N * s.K * 2 / (per_layer_us / waves * 1e-6) / 1e9, per_layer_us / waves, maxerr);
    return med;
}

int main(int argc, char** argv) {
    if (argc > 1) g_only = argv[1];
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const Shape shapes[] = {
        {"qkv-1b 24x2048", 24, 2048, 128, 16},  {"o-1b 16x2048", 16, 2048, 128, 16},
        {"down-1b 16x8192", 16, 8192, 128, 8},  {"gateup-1b 128x2048", 128, 2048, 128, 4},
        {"lmhead 256x2048", 256, 2048, 501, 1}, {"qkv-8b 48x4096", 48, 4096, 128, 4},
        {"o-8b 32x4096", 32, 4096, 128, 8}, {"tiny 1x256 (sync)", 1, 256, 128, 64},
    };
    // weights: 1.5 GB of random bf16 (small values), rotated over launches
    const long long elems = 768ll << 20;
    std::vector<bf16_t> hw(1 << 24), hx(16384);
    unsigned s = 12345;
    auto rnd = [&]() { s = s * 1664525u + 1013904223u; return ((s >> 9) & 0x3fff) / 16384.0f - 0.5f; };
    auto tobf = [](float f) { unsigned u; memcpy(&u, &f, 4); return (bf16_t)(u >> 16); };
    for (auto& v : hw) v = tobf(rnd());
    for (auto& v : hx) v = tobf(rnd());
    bf16_t *dw, *dx;
    float* dy;
    unsigned* sync;
    CK(cudaMalloc(&dw, elems * 2));
    for (long long o = 0; o < elems; o += hw.size())
        CK(cudaMemcpy(dw + o, hw.data(), std::min<long long>(hw.size(), elems - o) * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dx, hx.size() * 2));
    CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dy, 4 << 20));
    CK(cudaMalloc(&sync, 64));
    CK(cudaMemset(sync, 0, 64));
    printf("SMs %d; floor per layer = bytes / 4.2 TB/s\n", sms);
    for (const Shape& sh : shapes) {
        const long long per = (long long)sh.N * sh.K * sh.T * sh.L;
        const int rots = (int)std::max(1ll, elems / per);
        printf("-- %s: %.1f MB per layer, floor %.2f us per layer, %d rotations\n", sh.name,
               sh.N * sh.K * 2.0 * sh.T / 1e6, sh.N * sh.K * 2.0 * sh.T / 4.2e12 * 1e6, rots);
        run<0, 4>("row<4>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<0, 8>("row<8>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<4, 8>("regpf<8>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<4, 12>("regpf<12>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<4, 16>("regpf<16>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<4, 24>("regpf<24>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<1, 8>("flat<8>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<1, 16>("flat<16>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<2, 4>("bulk<64KB>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<2, 8>("bulk<128KB>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<3, 4>("bulkpf<64KB>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<3, 8>("bulkpf<128KB>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<5, 40512>("wring<4x512>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<5, 41024>("wring<4x1K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<5, 61024>("wring<6x1K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<5, 81024>("wring<8x1K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<5, 42048>("wring<4x2K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<6, 41024>("wringpf<4x1K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<6, 81024>("wringpf<8x1K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<6, 42048>("wringpf<4x2K>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<7, 4>("cring<4>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<7, 8>("cring<8>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
        run<7, 12>("cring<12>", sh, dw, dx, dy, sync, sms, hw, hx, per, rots);
    }
    return 0;
}
