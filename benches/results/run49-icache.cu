// Session 41: what Hopper's instruction caches hold, measured (nvcc, no Rust).
// A. One loop whose body is N FFMA (16 bytes each, every one unique): cycles per
//    instruction against the body's size, 4 and 16 warps per CTA, one CTA per SM.
// B. M blocks of N FFMA run in turn (block it % M on pass it), the way a megakernel's SM
//    runs one tile group's code after another's: cycles per instruction against the code
//    the turn covers (M x N x 16 bytes). Where that exceeds a cache, every pass fetches its
//    block again; the difference against M = 1, per KB, is what a cold fetch costs.
// nvcc -O3 -arch=sm_90a -std=c++17 run49-icache.cu -o icache && ./icache
#ifndef __CUDACC_RTC__
#include <cstdio>
#include <cuda_runtime.h>
#endif

template <int N, int K> __device__ __forceinline__ void block(float (&a)[8], float x) {
#pragma unroll
    for (int i = 0; i < N; ++i) a[i & 7] = fmaf(a[i & 7], x, (float)(K * N + i + 1) * 1e-9f);
}

// block K of M when c == K (a chain of compares, as a megakernel's dispatch)
template <int N, int K, int M> struct OneOf {
    static __device__ __forceinline__ void run(int c, float (&a)[8], float x) {
        if (c == K) block<N, K>(a, x);
        else OneOf<N, K + 1, M>::run(c, a, x);
    }
};
template <int N, int M> struct OneOf<N, M, M> {
    static __device__ __forceinline__ void run(int, float (&)[8], float) {}
};

template <int N, int M> __global__ void __launch_bounds__(512, 1) turns(float* out, int passes, long long* cycles) {
    float a[8];
    for (int j = 0; j < 8; ++j) a[j] = 1.0f + 1e-3f * (threadIdx.x + j);
    const float x = out[0];
    __syncthreads();
    const long long t0 = clock64();
    for (int p = 0; p < passes; ++p) OneOf<N, 0, M>::run(p % M, a, x);
    const long long t1 = clock64();
    float s = 0.f;
    for (int j = 0; j < 8; ++j) s += a[j];
    if (s == 12345.f) out[1] = s; // keeps the work
    if ((threadIdx.x & 31) == 0) atomicAdd((unsigned long long*)cycles, (unsigned long long)(t1 - t0));
}

#ifndef __CUDACC_RTC__
template <int N, int M> void run(int threads, int sms, float* out, long long* cyc) {
    const long long instr_per_warp = 400000;
    int passes = (int)(instr_per_warp / N);
    passes -= passes % M;
    if (passes < 2 * M) passes = 2 * M;
    turns<N, M><<<sms, threads>>>(out, M, cyc); // warm-up: the code into L2
    cudaMemset(cyc, 0, 8);
    turns<N, M><<<sms, threads>>>(out, passes, cyc);
    long long c = 0;
    cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
    const int warps = threads / 32;
    const double per_warp = (double)c / (sms * warps);
    // warps per scheduler: an SMSP issues one FFMA a cycle, so the floor is warps / 4
    const double cpi = per_warp / ((double)passes * N) / (warps / 4.0);
    const double kb = N * 16.0 / 1024, turn_kb = kb * M;
    printf("%-5s N=%6d (%6.1f KB) M=%3d (turn %6.1f KB) warps=%2d  cycles/instr/SMSP-slot %.3f  pass %.0f cycles\n",
           M == 1 ? "loop" : "turns", N, kb, M, turn_kb, warps, cpi, per_warp / passes);
}

int main() {
    int sms = 0, clk = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("%s, %d SMs, %d kHz\n", prop.name, sms, clk);
    float* out;
    long long* cyc;
    cudaMalloc(&out, 16);
    cudaMalloc(&cyc, 8);
    float one[2] = {0.999f, 0.f};
    cudaMemcpy(out, one, 8, cudaMemcpyHostToDevice);
    for (int threads : {128, 512}) {
        run<32, 1>(threads, sms, out, cyc);
        run<64, 1>(threads, sms, out, cyc);
        run<128, 1>(threads, sms, out, cyc);
        run<256, 1>(threads, sms, out, cyc);
        run<512, 1>(threads, sms, out, cyc);
        run<1024, 1>(threads, sms, out, cyc);
        run<2048, 1>(threads, sms, out, cyc);
        run<4096, 1>(threads, sms, out, cyc);
        run<8192, 1>(threads, sms, out, cyc);
        run<16384, 1>(threads, sms, out, cyc);
    }
    for (int threads : {128, 512}) {
        run<512, 2>(threads, sms, out, cyc);
        run<512, 4>(threads, sms, out, cyc);
        run<512, 8>(threads, sms, out, cyc);
        run<512, 12>(threads, sms, out, cyc);
        run<512, 16>(threads, sms, out, cyc);
        run<512, 24>(threads, sms, out, cyc);
        run<512, 32>(threads, sms, out, cyc);
        run<512, 48>(threads, sms, out, cyc);
        run<2048, 2>(threads, sms, out, cyc);
        run<2048, 4>(threads, sms, out, cyc);
        run<2048, 8>(threads, sms, out, cyc);
        run<2048, 12>(threads, sms, out, cyc);
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
#else
// NVRTC (no host code): two instances, to read their SASS with nvdisasm
template __global__ void turns<512, 8>(float*, int, long long*);
template __global__ void turns<8192, 1>(float*, int, long long*);
#endif
