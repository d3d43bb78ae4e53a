// The standalone wgmma GEMV check of RESULTS run 33 (call 0): nvcc -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17
// Standalone check of a wgmma GEMV unit: y[b, n] = sum_k x[b, k] w[n, k].
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
typedef __nv_bfloat16 bf16;
__device__ __forceinline__ void wgmma_n32(float* d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void wgmma_n64(float* d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db));
}

__device__ __forceinline__ unsigned int smem_addr(const void* p) {
    return (unsigned int)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cp_async16(unsigned int dst, const void* src, unsigned int bytes) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

template <int KS>
__device__ __forceinline__ unsigned long long wg_desc(unsigned int addr) {
    constexpr unsigned long long sbo = 8 * KS * 2, mode = KS == 64 ? 1 : 2;
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((sbo >> 4) << 32) | (mode << 62);
}
template <int KS>
__device__ __forceinline__ unsigned int swz(int r, int c) {
    return KS == 64 ? (unsigned)(c ^ (r & 7)) : (unsigned)(c ^ ((r >> 1) & 3));
}

// One warpgroup unit: rows m0.. (64) of w over [k_lo, k_hi), batch rows 0..NB-1 (zero past B)
template <int KS, int NB, int R>
__device__ __forceinline__ void wg_unit(float (&d)[NB / 2], const bf16* w, long long ws0, int m0, int N,
                                        const bf16* x, long long xs0, int B, int k_lo, int k_hi, unsigned int ring,
                                        int bar_id) {
    constexpr int CPR = KS / 8, ABYTES = 64 * KS * 2, XBYTES = NB * KS * 2, SLOT = ABYTES + XBYTES;
    const int tid = threadIdx.x & 127;
    const int steps = (k_hi - k_lo + KS - 1) / KS;
    const auto issue = [&](int i) {
        if (i < steps) {
            const unsigned int slot = ring + (i % R) * SLOT;
            const int k0 = k_lo + i * KS;
#pragma unroll
            for (int it = 0; it < 64 * CPR / 128; ++it) {
                const int q = tid + 128 * it, r = q / CPR, c = q % CPR, kk = k0 + 8 * c;
                const bool in = m0 + r < N && kk < k_hi;
                cp_async16(slot + r * KS * 2 + (swz<KS>(r, c) << 4), in ? w + (long long)(m0 + r) * ws0 + kk : w,
                           in ? 16u : 0u);
            }
#pragma unroll
            for (int it = 0; it < NB * CPR / 128; ++it) {
                const int q = tid + 128 * it, r = q / CPR, c = q % CPR, kk = k0 + 8 * c;
                const bool in = r < B && kk < k_hi;
                cp_async16(slot + ABYTES + r * KS * 2 + (swz<KS>(r, c) << 4), in ? x + (long long)r * xs0 + kk : x,
                           in ? 16u : 0u);
            }
        }
        cp_commit();
    };
#pragma unroll
    for (int i = 0; i < R - 1; ++i) issue(i);
#pragma unroll 1
    for (int i = 0; i < steps; ++i) {
        cp_wait<R - 2>();
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        wg_bar(bar_id);
        issue(i + R - 1);
        const unsigned int slot = ring + (i % R) * SLOT;
#pragma unroll
        for (int j = 0; j < NB / 2; ++j) asm volatile("" : "+f"(d[j])::"memory");
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int j = 0; j < KS / 16; ++j) {
            const unsigned long long da = wg_desc<KS>(slot + 32 * j), db = wg_desc<KS>(slot + ABYTES + 32 * j);
            if constexpr (NB == 64) wgmma_n64(d, da, db); else wgmma_n32(d, da, db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
        for (int j = 0; j < NB / 2; ++j) asm volatile("" : "+f"(d[j])::"memory");
    }
    cp_wait<0>();
    wg_bar(bar_id);  // the ring is reused by the next unit
}

// Tasks of TR rows, S k-splits; 4 warpgroups share each task's units (64 rows x split).
template <int KS, int NB, int R>
__global__ void __launch_bounds__(512, 1) gemv_wg(const bf16* w, int N, int K, const bf16* x, int B, float* y, int TR,
                                                  int S) {
    extern __shared__ __align__(1024) unsigned char smem[];
    constexpr int SLOT = 64 * KS * 2 + NB * KS * 2;
    const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int rs = TR + 4;
    float* part = reinterpret_cast<float*>(smem);
    const unsigned int base = smem_addr(smem) + S * B * rs * 4;
    const unsigned int ring = ((base + 1023) & ~1023u) + wg * R * SLOT;
    const int mu = (TR + 63) / 64, units = mu * S;
    const int ks = ((K + S - 1) / S + KS - 1) / KS * KS;
    const int tasks = (N + TR - 1) / TR;
    for (int task = blockIdx.x; task < tasks; task += gridDim.x) {
        const int n0 = task * TR;
        for (int u = wg; u < units; u += 4) {
            const int s = u / mu, m = (u % mu) * 64;
            const int k_lo = s * ks, k_hi = min(K, k_lo + ks);
            float d[NB / 2];
#pragma unroll
            for (int j = 0; j < NB / 2; ++j) d[j] = 0.f;
            const int rows = min(TR, N - n0);
            wg_unit<KS, NB, R>(d, w + (long long)n0 * K, K, m, rows, x, K, B, k_lo, k_hi, ring, 1 + wg);
            // d[nb*4 + i]: row 16 warp + g (+8 for i >= 2), batch nb*8 + 2t + (i & 1)
#pragma unroll
            for (int j = 0; j < NB / 2; ++j) {
                const int nb = j / 4, i = j % 4, r = m + 16 * warp + g + (i >= 2 ? 8 : 0), b = nb * 8 + 2 * t + (i & 1);
                if (r < TR && b < B) part[(s * B + b) * rs + r] = d[j];
            }
        }
        __syncthreads();
        const int rows = min(TR, N - n0);
        for (int e = threadIdx.x; e < B * rows; e += blockDim.x) {
            const int b = e / rows, r = e % rows;
            float acc = 0.f;
            for (int s = 0; s < S; ++s) acc += part[(s * B + b) * rs + r];
            y[(long long)b * N + n0 + r] = acc;
        }
        __syncthreads();
    }
}

__global__ void gemv_ref(const bf16* w, int N, int K, const bf16* x, int B, float* y) {
    const long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (e >= (long long)N * B) return;
    const int b = e / N, n = e % N;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __bfloat162float(w[(long long)n * K + k]) * __bfloat162float(x[(long long)b * K + k]);
    y[(long long)b * N + n] = acc;
}
__global__ void fill(bf16* p, long long n, unsigned int seed) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned int h = (unsigned int)(i * 2654435761u) ^ seed;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = __float2bfloat16(((h & 0xFFFF) / 65536.0f - 0.5f));
    }
}

template <int KS, int NB, int R>
void run(const char* name, int N, int K, int B, int TR, int S, double copy_bw) {
    constexpr int SLOT = 64 * KS * 2 + NB * KS * 2;
    const int smem = S * B * (TR + 4) * 4 + 1024 + 4 * R * SLOT;
    if (smem > 227 * 1024) { printf("%-28s KS=%d NB=%d R=%d: smem %d too large, skipped\n", name, KS, NB, R, smem); return; }
    bf16 *w, *x; float *y, *yr;
    cudaMalloc(&w, (size_t)N * K * 2); cudaMalloc(&x, (size_t)B * K * 2);
    cudaMalloc(&y, (size_t)N * B * 4); cudaMalloc(&yr, (size_t)N * B * 4);
    fill<<<1024, 256>>>(w, (long long)N * K, 7); fill<<<64, 256>>>(x, (long long)B * K, 11);
    cudaMemset(y, 0xFF, (size_t)N * B * 4);
    gemv_ref<<<(N * B + 255) / 256, 256>>>(w, N, K, x, B, yr);
    auto k = gemv_wg<KS, NB, R>;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    k<<<132, 512, smem>>>(w, N, K, x, B, y, TR, S);
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) { printf("%s: error %s\n", name, cudaGetErrorString(err)); exit(1); }
    std::vector<float> a((size_t)N * B), b((size_t)N * B);
    cudaMemcpy(a.data(), y, a.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), yr, b.size() * 4, cudaMemcpyDeviceToHost);
    double maxerr = 0; long long bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        double e = fabs(a[i] - b[i]);
        if (!(e <= 1e-2 + 1e-3 * fabs(b[i]))) ++bad;
        if (!(e <= maxerr)) maxerr = e;
    }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> ts;
    for (int it = 0; it < 30; ++it) {
        cudaEventRecord(e0);
        k<<<132, 512, smem>>>(w, N, K, x, B, y, TR, S);
        cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    const double us = ts[ts.size() / 2] * 1e3, bytes = (double)N * K * 2;
    printf("%-28s KS=%d NB=%d R=%d N=%d K=%d B=%d TR=%d S=%d smem=%d: bad %lld maxerr %.3g | %.2f us, %.0f GB/s, %.1f%% of copy\n",
           name, KS, NB, R, N, K, B, TR, S, smem, bad, maxerr, us, bytes / us / 1e3, 100.0 * bytes / us / 1e3 / copy_bw);
    cudaFree(w); cudaFree(x); cudaFree(y); cudaFree(yr);
}

int main() {
    // copy bandwidth: 1 GiB device to device
    size_t n = 1ull << 30; void *a, *b; cudaMalloc(&a, n); cudaMalloc(&b, n);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> ts;
    for (int i = 0; i < 10; ++i) { cudaEventRecord(e0); cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms); }
    std::sort(ts.begin(), ts.end());
    const double copy = 2.0 * n / (ts[5] * 1e-3) / 1e9;
    printf("copy bandwidth %.0f GB/s\n", copy);
    cudaFree(a); cudaFree(b);
    run<64, 64, 3>("gate/up 8b", 28672, 4096, 64, 224, 1, copy);
    run<64, 64, 2>("gate/up 8b", 28672, 4096, 64, 224, 1, copy);
    run<32, 64, 4>("gate/up 8b", 28672, 4096, 64, 224, 1, copy);
    run<32, 64, 3>("gate/up 8b", 28672, 4096, 64, 224, 1, copy);
    run<64, 64, 3>("gate/up 8b TR128 S2", 28672, 4096, 64, 128, 2, copy);
    run<64, 64, 3>("qkv 8b", 6144, 4096, 64, 48, 4, copy);
    run<32, 64, 4>("qkv 8b", 6144, 4096, 64, 48, 4, copy);
    run<64, 64, 3>("o 8b", 4096, 4096, 64, 128, 2, copy);
    run<32, 64, 4>("o 8b", 4096, 4096, 64, 128, 2, copy);
    run<64, 64, 3>("down 8b", 4096, 14336, 64, 128, 2, copy);
    run<32, 64, 4>("down 8b", 4096, 14336, 64, 128, 2, copy);
    run<64, 32, 3>("gate/up 8b B32", 28672, 4096, 32, 224, 1, copy);
    run<32, 32, 4>("gate/up 8b B32", 28672, 4096, 32, 224, 1, copy);
    run<64, 64, 3>("tail B48", 4096 + 8, 4096 + 24, 48, 112, 2, copy);
    run<32, 32, 4>("tail B17", 4096 + 8, 1000, 17, 48, 3, copy);
    run<64, 32, 3>("down 8b B32", 4096, 14336, 32, 128, 2, copy);
    run<64, 32, 3>("qkv 8b B32", 6144, 4096, 32, 48, 4, copy);
    return 0;
}
