// et CUDA prelude: types, tiles and the event protocol shared by every megakernel.
// Compiled by NVRTC ahead of the op library and the generated kernel; needs no headers.
// The kernel ABI (ET_MAX_RANK, ET_PER_ELEMENT, TensorArg, Runtime) is declared in front
// of it from its Rust description, et_core::abi.
// The `element` word of an abort record written by `load_index`.
#define ET_INDEX_FAULT 0xfffffffeu
// The `element` word of an abort record written by `Ctx::overcount` (dynamic schedule).
#define ET_OVERCOUNT 0xfffffffdu
// The `element` word of an abort record written by `ScalarArg` (an integer scalar argument
// that does not fit its op parameter's type).
#define ET_SCALAR_FAULT 0xfffffffcu
#ifndef ET_BUSY_POLLS
#define ET_BUSY_POLLS 1024
#endif
// Added to the pending counter of a task found inactive: no completion reaches its count.
#define ET_INACTIVE_PENDING 0x40000000u
// Which schedule this module runs. The host compiles a module per schedule, and a
// megakernel's source defines ET_SCHEDULE_DYNAMIC (0 or 1) ahead of everything, so that
// none of one schedule's code and registers reach the other's task code (RESULTS run 18:
// the dynamic schedule's warp-collective consumer walk, inlined at every signal, made the
// static Llama step 18% slower at B = 32 while it was in the same module). Sources
// without a megakernel (the baselines' kernel-per-operator ones) run neither schedule.
#ifndef ET_SCHEDULE_DYNAMIC
#define ET_SCHEDULE_DYNAMIC 0
#endif

namespace et {

// ---------------------------------------------------------------- scalar types
struct bf16 { unsigned short bits; };
struct f16 { unsigned short bits; };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(int v) { return (float)v; }
__device__ __forceinline__ float to_float(unsigned int v) { return (float)v; }
__device__ __forceinline__ float to_float(bf16 v) { return __uint_as_float(((unsigned int)v.bits) << 16); }
__device__ __forceinline__ float to_float(f16 v) {
    unsigned int h = v.bits, sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return __uint_as_float(sign);
        float f = (float)man * 5.9604644775390625e-8f; // 2^-24
        return sign ? -f : f;
    }
    return __uint_as_float(sign | ((exp + 112u) << 23) | (man << 13));
}

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ int from_float<int>(float v) { return (int)v; }
template <> __device__ __forceinline__ unsigned int from_float<unsigned int>(float v) { return (unsigned int)v; }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float v) {
    unsigned int u = __float_as_uint(v);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) { r.bits = 0x7fc0; return r; } // NaN
    u += 0x7fffu + ((u >> 16) & 1u);                                     // round to nearest even
    r.bits = (unsigned short)(u >> 16);
    return r;
}
template <> __device__ __forceinline__ f16 from_float<f16>(float v) {
    unsigned int u = __float_as_uint(v), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    f16 r;
    if (a > 0x7f800000u) { r.bits = (unsigned short)(sign | 0x7e00u); return r; }
    if (a >= 0x477ff000u) { r.bits = (unsigned short)(sign | 0x7c00u); return r; } // overflow to inf
    if (a < 0x38800000u) { // subnormal or zero: scale by 2^24 and round to nearest even
        float f = __uint_as_float(a) * 16777216.0f;
        r.bits = (unsigned short)(sign | (unsigned int)__float2uint_rn(f));
        return r;
    }
    unsigned int m = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
    r.bits = (unsigned short)(sign | (m >> 13));
    return r;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// ---------------------------------------------------------------- tensors and tiles
// Tile extents known at compile time: `Ext<e0, e1, ..>`, one int per dimension, -1 where
// the extent is known only at run time. `DynExt<R>` knows none.
template <int... N> struct Ext {
    static constexpr int rank = sizeof...(N);
    template <int D> static constexpr int get() {
        constexpr int v[] = {N...};
        return v[D];
    }
};
template <int R> struct DynExt {
    static constexpr int rank = R;
    template <int D> static constexpr int get() { return -1; }
};

template <class T, int R, class E = DynExt<R>> struct Tile;

// A tile with run-time extents: the form every op can take. A tile with compile-time
// extents (below) derives from it, so it converts to it, and a template op written
// against `Tile<T, R>` deduces `T` and `R` from one (through the base class).
template <class T, int R>
struct Tile<T, R, DynExt<R>> {
    T* ptr;
    int shape[R];
    long long stride[R];

    // The extent of dimension D (here known at run time only).
    template <int D> __device__ __forceinline__ int extent() const { return shape[D]; }
    // The compile-time extent of dimension D, -1 when it is known at run time only.
    template <int D> static constexpr int static_extent() { return -1; }

    __device__ __forceinline__ int numel() const {
        int n = 1;
        for (int d = 0; d < R; ++d) n *= shape[d];
        return n;
    }
    // Row-major position k of the tile.
    __device__ __forceinline__ T& flat(int k) const {
        long long off = 0;
        for (int d = R - 1; d >= 0; --d) { off += (long long)(k % shape[d]) * stride[d]; k /= shape[d]; }
        return ptr[off];
    }
    // Position k of dimension 0, other coordinates 0.
    __device__ __forceinline__ T& row(int k) const { return ptr[(long long)k * stride[0]]; }
    __device__ __forceinline__ T& operator()(int i) const { return ptr[(long long)i * stride[0]]; }
    __device__ __forceinline__ T& operator()(int i, int j) const { return ptr[(long long)i * stride[0] + (long long)j * stride[1]]; }
    __device__ __forceinline__ T& operator()(int i, int j, int k) const {
        return ptr[(long long)i * stride[0] + (long long)j * stride[1] + (long long)k * stride[2]];
    }
};

// A tile whose extents `E` (an `Ext<..>`) are partly or wholly known at compile time, so
// that an op can unroll and vectorise on them; `shape` still holds every extent.
template <class T, int R, class E>
struct Tile : Tile<T, R, DynExt<R>> {
    static_assert(E::rank == R, "et::Tile: the Ext<..> must give one extent per dimension");
    template <int D> __device__ __forceinline__ int extent() const {
        return E::template get<D>() >= 0 ? E::template get<D>() : this->shape[D];
    }
    template <int D> static constexpr int static_extent() { return E::template get<D>(); }
};

template <class T, int R, class E = DynExt<R>>
__device__ __forceinline__ Tile<T, R, E> make_tile(const TensorArg& t, const long long (&index)[R], const int (&size)[R]) {
    Tile<T, R, E> tile;
    long long off = 0;
    for (int d = 0; d < R; ++d) {
        off += index[d] * (long long)size[d] * t.stride[d];
        tile.shape[d] = size[d];
        tile.stride[d] = t.stride[d];
    }
    tile.ptr = reinterpret_cast<T*>(t.ptr) + off;
    return tile;
}

// ---------------------------------------------------------------- asynchronous copies
// Building blocks for ops that stream a tile into the shared-memory arena before a task's
// wait and consume it after (Hopper, sm_90+): an mbarrier counts the bytes of 1-D bulk
// copies (cp.async.bulk, the TMA engine's linear form) and releases the threads that wait
// on it. Inline PTX only: no CUDA headers.

// The shared-window address of a pointer into shared memory.
__device__ __forceinline__ unsigned int smem_addr(const void* p) {
    unsigned long long a;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(a) : "l"(p));
    return (unsigned int)a;
}

// Initialises the mbarrier at `bar` (8 bytes, 8-aligned, in shared memory) for `count`
// arriving threads; one thread calls it, and a CTA barrier must follow before another
// thread uses it (the fence makes the init visible to the async proxy).
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The calling thread arrives at `bar` and announces `bytes` more bytes of transactions.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}

// The calling thread arrives at `bar` (no transaction bytes).
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Invalidates `bar` so that its memory can be used otherwise (or initialised again);
// call it once every thread is past its wait (after a CTA barrier).
__device__ __forceinline__ void mbar_inval(unsigned long long* bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Whether phase `parity` of `bar` has completed (one bounded hardware wait).
__device__ __forceinline__ bool mbar_try_wait(unsigned long long* bar, unsigned int parity) {
    unsigned int done;
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

// Waits until phase `parity` of `bar` completes (every thread that reads the data calls
// it). Phases alternate 0, 1, 0, ..: the n-th use of a barrier waits on parity n % 2.
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned int parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory to
// shared memory with the bulk-copy engine; completion is counted on `bar`, which must
// expect them (`mbar_arrive_expect_tx`). Issued by one thread.
__device__ __forceinline__ void bulk_load(void* dst_smem, const void* src_global, unsigned int bytes,
                                          unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst_smem)),
                 "l"(src_global), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

// Copies 16 bytes from global to shared memory asynchronously (cp.async: per thread,
// through L2, no registers held), of which the first `bytes` are read and the rest
// zeroed (0: nothing is read; `src_global` must still be a valid address). Completion is
// per thread, in groups: `cp_async_commit` closes the thread's group of copies so far,
// `cp_async_wait<N>` waits until at most N of its groups are pending, after which the
// thread sees its own copies (other threads need a barrier as well).
__device__ __forceinline__ void cp_async16(void* dst_smem, const void* src_global, unsigned int bytes) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(smem_addr(dst_smem)), "l"(src_global),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// The bytes of dynamic shared memory the launch gave this CTA.
__device__ __forceinline__ unsigned int dynamic_smem_bytes() {
    unsigned int b;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(b));
    return b;
}

// The bytes of the arena an op may use: the launch's dynamic shared memory less the
// slack that aligns the arena. At least the largest `smem` an op call of the megakernel
// declares, and more where another call declared more.
__device__ __forceinline__ unsigned int arena_capacity() {
    const unsigned int b = dynamic_smem_bytes();
    return b > ET_SMEM_SLACK ? b - ET_SMEM_SLACK : 0u;
}

// The arena's first 16 bytes are its state, kept from one op call of a CTA to a later
// one: word 0 is not zero while bulk copies into the arena that an op started (the GEMV
// family's prefetch) may be in flight, counted on the mbarrier at byte 8, phase 0.
// `arena_init` zeroes the state; every kernel that gives ops an arena calls it once
// before the first op, then a CTA barrier.
__device__ __forceinline__ void arena_init(unsigned char* arena) {
    if (threadIdx.x < 4 && dynamic_smem_bytes() >= 16u) reinterpret_cast<unsigned int*>(arena)[threadIdx.x] = 0u;
}

// Waits for the copies the arena's state records, if any, and clears it (one thread):
// the persistent loop calls it after each task, so that copies no op read cannot land in
// the arena while the next task uses it.
__device__ __forceinline__ void arena_retire(unsigned char* arena) {
    unsigned int* state = reinterpret_cast<unsigned int*>(arena);
    if (dynamic_smem_bytes() < 16u || state[0] == 0u) return;
    unsigned long long* bar = reinterpret_cast<unsigned long long*>(arena + 8);
    mbar_wait(bar, 0);
    mbar_inval(bar);
    state[0] = 0u;
}

// Orders this thread's earlier generic-proxy accesses to shared memory before later
// async-proxy ones (bulk copies into a buffer the CTA read or wrote before).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// 16 bytes from global memory through the read-only (non-coherent) path: for data no task
// of this launch writes (weights). `_na` does not allocate in L1 (streamed once).
struct u32x4 { unsigned int x, y, z, w; };
__device__ __forceinline__ u32x4 ld_nc_v4(const void* p) {
    u32x4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ u32x4 ld_nc_na_v4(const void* p) {
    u32x4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}
// The two bf16 halves of a word, as floats (low half first in memory).
__device__ __forceinline__ float bf16_lo(unsigned int w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned int w) { return __uint_as_float(w & 0xffff0000u); }

// Aborts the kernel, the first caller writing the record [task, element, a, b, c, d] that
// the host decodes (et-device's abort.rs): `element` is the waited element, or a marker
// (ET_INDEX_FAULT, ET_OVERCOUNT, the ready queue's) that says what the other words hold.
__device__ void abort_with_record(const Runtime& rt, unsigned int task, unsigned int element, unsigned long long a,
                                  unsigned long long b, unsigned long long c = 0, unsigned long long d = 0) {
    if (atomicCAS(rt.abort_flag, 0u, 1u) != 0u) return;
    unsigned long long* rec = rt.error;
    rec[0] = task;
    rec[1] = element;
    rec[2] = a;
    rec[3] = b;
    rec[4] = c;
    rec[5] = d;
    __threadfence();
    *rt.host_status = 1u;
    __threadfence_system();
}

// Reads an integer (i32 or u32 by `is_unsigned`) at a position of index tensor `tensor`
// and checks it against `bound`, the extent of the event dimension it indexes: the host
// checked the tensor at launch, but a kernel may write it since. A value out of range
// aborts the kernel with the record [task, ET_INDEX_FAULT, value, bound, tensor, position]
// (the host names all of them) and reads as 0, so that no counter outside the event is
// touched while the CTAs wind down. `C` is `Ctx` (declared below).
template <int R, class C>
__device__ __forceinline__ long long load_index(C& ctx, const TensorArg& t, const long long (&at)[R], bool is_unsigned,
                                                long long bound, unsigned int tensor) {
    long long off = 0;
    for (int d = 0; d < R; ++d) off += at[d] * t.stride[d];
    const unsigned int raw = reinterpret_cast<const unsigned int*>(t.ptr)[off];
    const long long value = is_unsigned ? (long long)raw : (long long)(int)raw;
    if (value >= 0 && value < bound) return value;
    abort_with_record(ctx.rt, ctx.task, ET_INDEX_FAULT, (unsigned long long)value, (unsigned long long)bound, tensor,
                      (unsigned long long)off);
    return 0;
}

// Reads a routing index (written during the launch, or one of a run of positions): as
// `load_index`, but a negative value is padding and reads as -1 (no element).
template <int R, class C>
__device__ __forceinline__ long long load_route(C& ctx, const TensorArg& t, const long long (&at)[R], bool is_unsigned,
                                                long long bound, unsigned int tensor) {
    long long off = 0;
    for (int d = 0; d < R; ++d) off += at[d] * t.stride[d];
    const unsigned int raw = reinterpret_cast<const volatile unsigned int*>(t.ptr)[off];
    const long long value = is_unsigned ? (long long)raw : (long long)(int)raw;
    if (value < 0 && !is_unsigned) return -1;
    return load_index(ctx, t, at, is_unsigned, bound, tensor);
}

// The integer at a position of an integer tensor (a group condition's operand). The load
// is volatile: the value may have been written during this launch by another SM.
template <int R>
__device__ __forceinline__ long long read_int(const TensorArg& t, const long long (&at)[R], bool is_unsigned) {
    long long off = 0;
    for (int d = 0; d < R; ++d) off += at[d] * t.stride[d];
    const unsigned int raw = reinterpret_cast<const volatile unsigned int*>(t.ptr)[off];
    return is_unsigned ? (long long)raw : (long long)(int)raw;
}

struct Ctx;
// Whether the task of queue entry `entry` is active (its group's condition holds);
// defined by each megakernel's generated code, after `EtArgs`.
__device__ bool task_active(const void* args, const Ctx& ctx, unsigned int entry);

// ---------------------------------------------------------------- event protocol

__device__ __forceinline__ unsigned int ld_acquire(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void red_release_add(unsigned int* p, unsigned int v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned int atom_acq_rel_add(unsigned int* p, unsigned int v) {
    unsigned int old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void st_release(unsigned int* p, unsigned int v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long ld_acquire_u64(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_release_u64(unsigned long long* p, unsigned long long v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long global_timer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned int sm_id() {
    unsigned int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

// The elements one signal statement has signalled so far under the dynamic schedule
// (`Ctx::signal`): warp 0's lane i holds the i-th of the current round of 32. A local of
// the generated statement, so nothing of it lives past the statement.
struct SignalBatch {
    unsigned int n = 0;       // elements of the round so far (the same in every lane)
    unsigned int old = 0;     // this lane's element: the counter before its add,
    unsigned int target = 0;  //   the value that completes it,
    unsigned int begin = 0;   //   its consumers [begin, end),
    unsigned int end = 0;
    unsigned int element = 0; //   its index and its count per launch (for an over-signal's record)
    unsigned int count = 0;
};

// Per-CTA execution context.
struct Ctx {
    const Runtime& rt;
    unsigned int task;
    int* s_abort; // shared flag: the CTA must stop
    int n_groups;
    const unsigned int* group_first;  // n_groups + 1 (parameter space)
    const unsigned int* group_domain; // n_groups * ET_MAX_RANK (parameter space)
    unsigned int upcoming;            // thread 0, static: the next queue entry, loaded one task ahead
    unsigned long long local_next;    // thread 0, dynamic: a released task this CTA runs next (0: none)
    bool released;                    // dynamic: the running task was released by its last completion
    int task_shift;                   // a queue entry is `group << task_shift | task`
    unsigned char* arena;             // the dynamic shared-memory arena, 128-byte aligned
    const void* args;                 // the kernel's EtArgs (parameter space), for task_active

    __device__ Ctx(const Runtime& r, const void* kernel_args, int* abort_smem, int groups, int shift,
                   const unsigned int* first, const unsigned int* domain, unsigned char* smem)
        : rt(r), task(0), s_abort(abort_smem), n_groups(groups), group_first(first), group_domain(domain), upcoming(0),
          local_next(0), released(false), task_shift(shift), arena(smem), args(kernel_args) {}

    // The CTA's shared-memory arena (128-byte aligned): as many bytes as the largest
    // `smem` an op call of this megakernel declares. Ops that declare `smem` get it as
    // their last argument; its contents do not survive from one task to the next.
    __device__ __forceinline__ unsigned char* smem() const { return arena; }

    // The task id of a queue entry.
    __device__ __forceinline__ unsigned int task_of(unsigned int entry) const {
        return entry & ((1u << task_shift) - 1u);
    }

    __device__ __forceinline__ unsigned int target_of(unsigned int e, unsigned int count) const {
        return count == ET_PER_ELEMENT ? rt.targets[e] : count;
    }

    __device__ __forceinline__ bool aborted() const { return ld_acquire(rt.abort_flag) != 0; }

    // Thread 0 raises the abort and records what it waited for.
    __device__ void raise(unsigned int element, unsigned int value, unsigned int expected) {
        abort_with_record(rt, task, element, value, expected);
    }

    // Aborts the kernel with the record [task, ET_OVERCOUNT, signals this launch, count,
    // element] for this lane's element of `batch`, which received a signal past its count.
    __device__ void overcount(const SignalBatch& batch) {
        abort_with_record(rt, task, ET_OVERCOUNT, batch.old + 1u - (batch.target - batch.count), batch.count,
                          batch.element);
    }

    // Spins until `*p >= want` (wrapping compare), by thread 0 only; false on abort.
    // Polls busily for the first ET_BUSY_POLLS polls (about 0.5 us each: a wait shorter
    // than a few hundred microseconds never sleeps, so waking costs no sleep quantum),
    // then backs off with __nanosleep up to 256 ns. The abort flag and the watchdog are
    // checked every 16 polls.
    __device__ bool spin_until(const unsigned int* p, unsigned int want, unsigned int element, unsigned int expected) {
        unsigned int v = ld_acquire(p);
        if ((int)(v - want) >= 0) return true;
        const unsigned long long start = global_timer();
        unsigned int backoff = 32;
        for (unsigned int i = 1;; ++i) {
            if (i > ET_BUSY_POLLS) {
                __nanosleep(backoff);
                if (backoff < 256) backoff <<= 1;
            }
            v = ld_acquire(p);
            if ((int)(v - want) >= 0) return true;
            if ((i & 15) == 0) {
                if (ld_acquire(rt.abort_flag) != 0) return false;
                if (global_timer() - start > rt.watchdog_ns) {
                    raise(element, v - (want - expected), expected);
                    return false;
                }
            }
        }
    }

    // Waits for one element whose count is `count` (ET_PER_ELEMENT: per element), by the
    // calling thread alone; false when the kernel is aborting. A wait statement polls its
    // elements spread over the CTA's threads, then ends with one `wait_done`.
    // `fresh`: the event's counters were zeroed before this launch (its signals per launch
    // depend on data: GraphSpec::resets_per_launch), so its target is the count itself.
    // A task released by the completion of its last waited element (`released`) polls
    // nothing: its pending counter reached its count through acq_rel adds after every one
    // of its elements completed (a wait! is never indexed by routing data, so the consumer
    // tables hold all of them), and the add, the ring's release/acquire or the local slot,
    // and the barrier in `next` carry that to the whole CTA; the wait statement's barrier
    // still runs.
    __device__ __forceinline__ bool poll(long long element, unsigned int count, bool fresh = false) {
        if (ET_SCHEDULE_DYNAMIC && released) return true;
        const unsigned int e = (unsigned int)element;
        const unsigned int target = target_of(e, count);
        return spin_until(rt.counters + e, (fresh ? 1u : rt.epoch) * target, e, target);
    }

    // The one CTA barrier of a wait statement: every thread calls it with whether its
    // polls all succeeded; true when every thread's did (else the task returns, and the
    // persistent loop stops the CTA). The barrier also makes what the producers wrote,
    // acquired by the polling threads, visible to the whole CTA.
    __device__ __forceinline__ bool wait_done(bool ok) {
        const int failed = __syncthreads_or(ok ? 0 : 1);
        if (failed && threadIdx.x == 0) *s_abort = 1;
        // the trace's third word: when the task's last wait ended (its run starts)
        if (rt.trace && threadIdx.x == 0) rt.trace[ET_TRACE_WORDS * task + 3] = global_timer();
        return failed == 0;
    }

    // Waits for one element; every thread of the CTA calls it.
    __device__ bool wait(long long element, unsigned int count) {
        return wait_done(threadIdx.x == 0 ? poll(element, count) : true);
    }

    // Signals one element of a signal statement; every thread of the CTA calls it after a
    // CTA barrier that follows the task's writes; the statement (a group's last: the loop)
    // ends with `signal_flush(batch)`. Static: thread 0 adds, fire and forget. Dynamic: the
    // add must return, to tell whether it completed the element; lane i of warp 0 adds the
    // statement's i-th element, so up to 32 adds are in flight together instead of one
    // round trip after another, and `signal_flush` judges them.
    __device__ void signal(SignalBatch& batch, long long element, unsigned int count, bool fresh = false) {
        const unsigned int e = (unsigned int)element;
        if (!ET_SCHEDULE_DYNAMIC) {
            if (threadIdx.x == 0) red_release_add(rt.counters + e, 1u);
            return;
        }
        if (threadIdx.x >= 32u) return;
        if (batch.n == 32u) signal_flush(batch);
        if (threadIdx.x == batch.n) {
            // the consumer table's loads do not depend on the add: issued first, they
            // overlap its round trip; nothing reads the add's value until the flush
            batch.element = e;
            batch.count = target_of(e, count);
            batch.target = (fresh ? 1u : rt.epoch) * batch.count;
            batch.begin = __ldg(rt.consumer_offsets + e);
            batch.end = __ldg(rt.consumer_offsets + e + 1);
            batch.old = atom_acq_rel_add(rt.counters + e, 1u);
        }
        ++batch.n;
    }

    // Ends a signal statement (and a round of 32 signals): warp 0 walks the consumers of
    // every element its adds completed. Static: nothing to do.
    __device__ void signal_flush(SignalBatch& batch) {
        if (!ET_SCHEDULE_DYNAMIC || threadIdx.x >= 32u || batch.n == 0u) return;
        const bool mine = threadIdx.x < batch.n;
        unsigned int completed = __ballot_sync(~0u, mine && batch.old + 1u == batch.target);
        // an add past the target: a signal beyond the element's count, whose waiters were
        // released before this task's writes (only routed signals and those of a group with
        // a run-time condition can get here: resolution counts every other one). Elements
        // nobody waits on are free.
        const unsigned int over =
            __ballot_sync(~0u, mine && batch.end != batch.begin && (int)(batch.old + 1u - batch.target) > 0);
        if (over != 0u && threadIdx.x == (unsigned int)(__ffs(over) - 1)) overcount(batch);
        batch.n = 0;
        // orders the completing lanes' acquires before every lane's pushes below
        __syncwarp();
        while (completed != 0u) {
            const int src = __ffs(completed) - 1;
            completed &= completed - 1u;
            complete(__shfl_sync(~0u, batch.begin, src), __shfl_sync(~0u, batch.end, src));
        }
    }

    // ------------------------------------------------------------ dynamic schedule
    //
    // `rt.dyn_state` (zeroed before every launch; the event counters are not, see the epoch):
    //   [0] head     ring positions claimed by CTAs: the seeds first, then the ready slots
    //   [1] tail     ready slots claimed by pushers
    //   [2] waiting  CTAs idle on the ring, or done for good (the pop's watchdog)
    //   [3] local    tasks that never enter the ring: run from a CTA's local slot, or inactive
    //   [4 ..]       ready: n_tasks 64-bit slots {queue entry + 1, batch + 1 or 0}, 0 = empty
    //   [4 + 2n ..]  pending_done: per task, waited elements completed so far
    //
    // A task enters the schedule exactly once, in one of three ways:
    // - ready: its last incomplete waited element completes (the signaller whose add reaches
    //   the count walks the element's consumers; a consumer waiting on it alone skips its
    //   pending counter). The completing CTA keeps the first such task in its local slot and
    //   runs it after its current task, with no queue traffic; the others it pushes.
    // - early: a task whose waited elements are all signalled by one producer task is pushed
    //   in the batch of an ancestor (et_graph::schedule::EarlyBatches) when that ancestor is
    //   taken by a CTA, and waits on its events in place, like a static task: its hop is one
    //   signal, not a queue round trip. A batch spans several levels of a chain, so the
    //   dispatch runs ahead of the execution.
    // - a seed: ring positions below n_seeds read the seed table.
    //
    // Memory order: a push stores its slot with st.release after the task's inputs were
    // acquired (the completing add is acq_rel); a pop reads the slot with ld.acquire; and
    // every task also acquires its own elements in its waits, so the data a task reads is
    // ordered after its producers' writes whichever way it was dispatched.
    //
    // No CTA waits on a task that cannot run. A CTA is committed to one task at a time: the
    // one it runs, or the ring position it has claimed (positions are claimed in order, and
    // a CTA claims the next only after its task ended). Take the committed, unfinished task
    // committed first. If it was pushed ready, its waits hold already. If it is early, its
    // producer is either the batch root, taken before the batch was pushed, or an earlier
    // task of the same batch, in a lower ring position and so claimed earlier: either way
    // committed earlier, hence finished, so its waits hold too. So the oldest commitment
    // always runs to completion, and no CTA blocks on a task queued behind itself.
    //
    // The ring holds n_tasks - local entries; `local` only grows, so a CTA whose claimed
    // position is at or past n_tasks - local (read at any time) knows that position is never
    // filled and stops.

    __device__ __forceinline__ unsigned long long* ready_slots() const {
        return reinterpret_cast<unsigned long long*>(rt.dyn_state + 4);
    }
    __device__ __forceinline__ static unsigned long long slot_value(unsigned int entry, unsigned int batch) {
        return ((unsigned long long)batch << 32) | (unsigned long long)(entry + 1u);
    }
    // The high word's top bit of a slot value: the task was released by its last completion
    // (pushed or kept by `complete`), so its waits hold (see `poll`). Batches number far
    // fewer than 2^31.
    static constexpr unsigned long long RELEASED = 1ull << 63;

    // Warp 0: an element completed; release its consumers[begin, end) that became ready,
    // 32 at a time, one consumer per lane. A consumer whose guard this element is (c.w != 0:
    // the first wait of a group with a condition) is judged here, once: an inactive one
    // never enters the ring (it is counted with the local tasks, so the ring's end is still
    // known) and its pending counter is pushed out of reach, so that no later completion
    // releases it. Of the ready ones, the first runs here next (thread 0's local slot) when
    // the slot is free; the others get ring slots from one claim per round.
    // Inlined where a batch is judged; out of line it was slower still (RESULTS run 18).
    __device__ void complete(unsigned int begin, unsigned int end) {
        const unsigned int lane = threadIdx.x;
        unsigned int* pending_done = rt.dyn_state + 4 + 2 * rt.n_tasks;
        for (unsigned int base = begin; base < end; base += 32u) {
            uint4 c = make_uint4(0u, 0u, 0u, 0u); // {entry, pending at the start, batch, guard}
            bool ready = false, inactive = false;
            if (base + lane < end) {
                c = __ldg(rt.consumers + base + lane);
                if (c.w != 0u && !task_active(args, *this, c.x)) {
                    inactive = true;
                    if (c.y != 1u) atomicAdd(pending_done + task_of(c.x), ET_INACTIVE_PENDING);
                } else {
                    ready = c.y == 1u || atom_acq_rel_add(pending_done + task_of(c.x), 1u) + 1u == c.y;
                }
            }
            const unsigned int inactive_mask = __ballot_sync(~0u, inactive);
            const unsigned int ready_mask = __ballot_sync(~0u, ready);
            // lane 0 is thread 0, whose local slot the persistent loop takes from
            const unsigned int kept = __shfl_sync(~0u, local_next == 0ull ? ready_mask & (0u - ready_mask) : 0u, 0);
            const unsigned int pushed = ready_mask & ~kept;
            unsigned int slot = 0u;
            if (lane == 0u) {
                const unsigned int local = __popc(inactive_mask) + __popc(kept);
                if (local != 0u) atomicAdd(rt.dyn_state + 3, local); // no return value used: a reduction
                if (pushed != 0u) slot = atomicAdd(rt.dyn_state + 1, __popc(pushed));
            }
            slot = __shfl_sync(~0u, slot, 0);
            if (kept != 0u) {
                const int src = __ffs(kept) - 1;
                const unsigned int entry = __shfl_sync(~0u, c.x, src), batch = __shfl_sync(~0u, c.z, src);
                if (lane == 0u) local_next = slot_value(entry, batch) | RELEASED;
            }
            if ((pushed >> lane) & 1u) {
                const unsigned int rank = __popc(pushed & ((1u << lane) - 1u));
                st_release_u64(ready_slots() + slot + rank, slot_value(c.x, c.z) | RELEASED);
            }
        }
    }

    // Thread 0: claims the next ring position and waits for it; the slot value, or 0 when the
    // CTA is done for good or the kernel aborts.
    //
    // The pop's watchdog measures progress, not time: a correct kernel may wait on the ring
    // for as long as one long chain of tasks runs elsewhere. `waiting` counts the CTAs idle
    // on the ring (or done for good); the timer restarts whenever the tail moves or some CTA
    // is not waiting (it runs a task, which may push some). Only when every CTA has waited,
    // and nothing was pushed, for the watchdog's limit can no task ever become ready: that
    // is a stuck graph, and it aborts.
    __device__ unsigned long long pop_ring() {
        unsigned int* const st = rt.dyn_state;
        unsigned int* const waiting = st + 2;
        // the claim is relaxed, so the abort flag's load is in flight beside it
        const unsigned int h = atomicAdd(st, 1u);
        if (ld_acquire(rt.abort_flag) != 0) return 0ull;
        if (h < rt.n_seeds) {
            const uint2 s = __ldg(rt.seeds + h);
            return slot_value(s.x, s.y);
        }
        unsigned long long v = 0ull;
        if (h < rt.n_tasks) {
            v = ld_acquire_u64(ready_slots() + (h - rt.n_seeds));
            if (v != 0ull) return v;
        }
        if (h >= rt.n_tasks - ld_acquire(st + 3)) {
            atomicAdd(waiting, 1u); // never filled: idle for good
            return 0ull;
        }
        const unsigned long long* slot = ready_slots() + (h - rt.n_seeds);
        atomicAdd(waiting, 1u);
        unsigned int tail = ld_acquire(st + 1), backoff = 32;
        unsigned long long start = global_timer();
        for (unsigned int i = 1;; ++i) {
            if (i > ET_BUSY_POLLS) {
                __nanosleep(backoff);
                if (backoff < 256) backoff <<= 1;
            }
            v = ld_acquire_u64(slot);
            if (v != 0ull) break;
            if ((i & 15) != 0) continue;
            if (ld_acquire(rt.abort_flag) != 0) break;
            if (h >= rt.n_tasks - ld_acquire(st + 3)) return 0ull; // never filled: stays counted as waiting
            const unsigned int now_tail = ld_acquire(st + 1);
            const unsigned long long now = global_timer();
            if (now_tail != tail || ld_acquire(waiting) < gridDim.x) {
                tail = now_tail;
                start = now;
            } else if (now - start > rt.watchdog_ns) {
                raise(0xffffffffu, 0u, 1u);
                break;
            }
        }
        atomicSub(waiting, 1u);
        return v;
    }

    // Thread 0: the CTA's next task as a slot value (0: none left, or aborting): the local
    // slot first, else the ring. Only the ring checks the abort flag: a local task is ready,
    // so it runs to its end, and the next pop or unmet wait sees the flag.
    __device__ __forceinline__ unsigned long long take() {
        if (local_next != 0ull) {
            const unsigned long long v = local_next;
            local_next = 0ull;
            return v;
        }
        return pop_ring();
    }

    // Every thread: pushes batch `b` (the 1-based index a slot value carries), whose root
    // this CTA has just taken. Thread 0 claims the slots, the CTA fills them. The items are
    // in producer-before-consumer order, and so are their slots (the argument above).
    __device__ void push_batch(unsigned int b) {
        __shared__ unsigned int s_first, s_count, s_slot;
        if (threadIdx.x == 0) {
            const unsigned int first = __ldg(rt.batch_offsets + b - 1), last = __ldg(rt.batch_offsets + b);
            s_first = first;
            s_count = last - first;
            s_slot = atomicAdd(rt.dyn_state + 1, last - first);
        }
        __syncthreads();
        for (unsigned int j = threadIdx.x; j < s_count; j += blockDim.x) {
            const uint2 item = __ldg(rt.batch_items + s_first + j);
            st_release_u64(ready_slots() + s_slot + j, slot_value(item.x, item.y));
        }
    }

    // Next task for this CTA; false when there is none left (or on abort). Static: the
    // CTA's slice [cursor, end) of the queue table; dynamic: its local slot or the ring
    // (above), after which it pushes the batch the task roots, before running it.
    // A stuck static CTA is always stuck in a wait, which sees the abort flag, so the
    // static path does not poll it here.
    __device__ bool next(unsigned int& cursor, unsigned int end, unsigned int& out) {
        __shared__ unsigned int s_task;
        __shared__ int s_more;
        __shared__ unsigned int s_batch;
        if (threadIdx.x == 0) {
            s_more = 0;
            if (!ET_SCHEDULE_DYNAMIC) {
                if (cursor < end) {
                    s_task = upcoming;
                    s_more = 1;
                    // issue the load of the following entry now: it lands while this task runs
                    if (++cursor < end) upcoming = __ldg(rt.queue_tasks + cursor);
                }
            } else {
                const unsigned long long v = take();
                s_batch = (unsigned int)(v >> 32);
                if (v != 0ull) {
                    s_task = (unsigned int)v - 1u;
                    s_more = 1;
                }
            }
        }
        __syncthreads();
        if (ET_SCHEDULE_DYNAMIC) {
            const unsigned int batch = s_batch & 0x7fffffffu;
            released = (s_batch >> 31) != 0u;
            if (s_more && batch != 0u) push_batch(batch);
        }
        out = s_task;
        task = task_of(s_task);
        const int more = s_more;
        __syncthreads();
        return more != 0;
    }

    // Decodes a queue entry into its group and tile indices (row-major in the domain), in
    // 32-bit arithmetic (64-bit division is emulated and slow). The group is packed in the
    // entry's upper bits by the host (et_core::abi::TaskWords), so this is O(1) in the
    // number of groups.
    __device__ int decode(unsigned int entry, long long (&v)[ET_MAX_RANK]) const {
        const int g = (int)(entry >> task_shift);
        unsigned int rest = task_of(entry) - group_first[g];
        for (int d = ET_MAX_RANK - 1; d >= 0; --d) {
            const unsigned int ext = group_domain[g * ET_MAX_RANK + d];
            if (ext == 1u) { v[d] = 0; continue; }
            v[d] = (long long)(rest % ext);
            rest /= ext;
        }
        return g;
    }

    __device__ __forceinline__ void trace_begin(unsigned int t) {
        if (rt.trace && threadIdx.x == 0) {
            const unsigned long long now = global_timer();
            rt.trace[ET_TRACE_WORDS * t] = ((unsigned long long)sm_id() << 32) | blockIdx.x;
            rt.trace[ET_TRACE_WORDS * t + 1] = now;
            rt.trace[ET_TRACE_WORDS * t + 3] = now; // a task without a wait runs at once
        }
    }
    __device__ __forceinline__ void trace_end(unsigned int t) {
        if (rt.trace && threadIdx.x == 0) rt.trace[ET_TRACE_WORDS * t + 2] = global_timer();
    }
};

// The values of an integer type that a scalar argument may convert to; float types take
// any value, as the CPU backend never passes them an integer expression (no `TryFrom`).
template <class T> struct ScalarRange {
    static constexpr bool integral = false;
    static constexpr long long lo = 0, hi = 0;
};
#define ET_SCALAR_RANGE(T, L, H)                                                                                       \
    template <> struct ScalarRange<T> {                                                                                \
        static constexpr bool integral = true;                                                                         \
        static constexpr long long lo = L, hi = H;                                                                     \
    };
ET_SCALAR_RANGE(char, -128, 127)
ET_SCALAR_RANGE(signed char, -128, 127)
ET_SCALAR_RANGE(unsigned char, 0, 255)
ET_SCALAR_RANGE(short, -32768, 32767)
ET_SCALAR_RANGE(unsigned short, 0, 65535)
ET_SCALAR_RANGE(int, -2147483647LL - 1, 2147483647LL)
ET_SCALAR_RANGE(unsigned int, 0, 4294967295LL)
ET_SCALAR_RANGE(long, -9223372036854775807LL - 1, 9223372036854775807LL)
ET_SCALAR_RANGE(unsigned long, 0, 9223372036854775807LL)
ET_SCALAR_RANGE(long long, -9223372036854775807LL - 1, 9223372036854775807LL)
ET_SCALAR_RANGE(unsigned long long, 0, 9223372036854775807LL)
#undef ET_SCALAR_RANGE

// An integer scalar argument of an op call that is not a constant (an i64 of tile indices
// and dims): it converts to the op's parameter type, whatever that is, checking that the
// value fits as the CPU backend's `TryFrom` does. A value that does not fit aborts the
// kernel with the record [task, ET_SCALAR_FAULT, value, lo, hi, call << 16 | argument]
// and converts as 0, so that the op runs on an in-range value while the CTAs wind down.
struct ScalarArg {
    const Ctx& ctx;
    long long value;
    unsigned int site; // the op call's position in the body << 16 | the argument's position

    template <class T> __device__ __forceinline__ operator T() const {
        typedef ScalarRange<T> R;
        if (R::integral && (value < R::lo || value > R::hi)) {
            abort_with_record(ctx.rt, ctx.task, ET_SCALAR_FAULT, (unsigned long long)value, (unsigned long long)R::lo,
                              (unsigned long long)R::hi, site);
            return T(0);
        }
        return static_cast<T>(value);
    }
};

// The persistent loop of a megakernel: every CTA takes tasks until none is left and runs
// each through `dispatch(ctx, group, indices, tail)` (the generated switch over tile
// groups), then flushes the signals that the task's last statement left in `tail`.
// `task_shift` is ET_TASK_SHIFT (from the kernel's EtArgs declaration).
template <class Dispatch>
__device__ __forceinline__ void persistent_loop(const Runtime& rt, const void* args, int n_groups, int task_shift,
                                                const unsigned int* group_first, const unsigned int* group_domain,
                                                Dispatch dispatch) {
    __shared__ int s_abort;
    // the launch gives ET_SMEM_SLACK bytes more than the arena, to align it here
    extern __shared__ __align__(128) unsigned char et_dynamic_smem[];
    unsigned char* arena = et_dynamic_smem + ((128u - (smem_addr(et_dynamic_smem) & 127u)) & 127u);
    if (threadIdx.x == 0) s_abort = 0;
    arena_init(arena);
    __syncthreads();
    Ctx ctx(rt, args, &s_abort, n_groups, task_shift, group_first, group_domain, arena);
    unsigned int cursor = 0, end = 0, task = 0;
    // the host launches a module with the schedule it was compiled for
    if ((rt.dynamic != 0) != (ET_SCHEDULE_DYNAMIC != 0)) __trap();
    if (!ET_SCHEDULE_DYNAMIC && threadIdx.x == 0) {
        cursor = __ldg(rt.queue_offsets + blockIdx.x);
        end = __ldg(rt.queue_offsets + blockIdx.x + 1);
        if (cursor < end) ctx.upcoming = __ldg(rt.queue_tasks + cursor);
    }
    while (ctx.next(cursor, end, task)) {
        long long v[ET_MAX_RANK];
        const int g = ctx.decode(task, v);
        ctx.trace_begin(ctx.task);
        // the batch of the task's last statement when it is a signal: flushed here, so that
        // the dynamic schedule's consumer walk is inlined once, not once a group
        SignalBatch tail;
        dispatch(ctx, g, v, tail);
        ctx.signal_flush(tail);
        if (threadIdx.x == 0) arena_retire(arena);
        __syncthreads();
        if (s_abort) return;
        ctx.trace_end(ctx.task);
    }
}

} // namespace et
