//! Decode operators at memory bandwidth (issue 9, "Benchmarks"): every figure is the
//! kernel time of a megakernel launch (CUDA events, `LaunchReport::elapsed`), the median
//! of N runs after warm-up runs, with fresh random activations every run and weights
//! rotated among copies whose total is at least 4x the 60 MB L2 (or one tensor that big),
//! so nothing is served from the cache. Achieved bandwidth = the bytes the op must move
//! (weights or KV cache + activations in + out) / kernel time, also as a percentage of
//! the device-to-device copy bandwidth measured at the start of the same run. Each
//! kernel's result is checked against a CPU reference (a sample of rows where the full
//! reference is slow) before it is timed; a wrong kernel gets no time, only an error.
//!
//! Sections (`--only a,b`): `bw` (copy and read-only floor), `gemv`, `norm`, `rope`,
//! `attn` (split-KV), `heads` (whole-head attention as the Llama step runs it from batch
//! 32), `chain` (prefetched GEMV chain). The GEMV section can be narrowed to batch sizes
//! (`--batches 1,64`) and shapes (`--ops gate,qkv`), for example to profile one kernel.
//!
//!     cargo bench -p et-benches --bench ops_bench -- [--json ops.jsonl] [--quick]
//!     .gpu/bin/ops_bench --json ops.jsonl        # after scripts/pack-gpu

use std::io::Write;
use std::time::Duration;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use et_benches::bandwidth::{COPY_BYTES, copy_bandwidth};
use et_benches::median;
use et_benches::ops::*;
use et_core::LaunchReport;
use et_core::ops::decode::llama3_inv_freq;
use et_core::prelude::*;
use et_device::{Cuda, CudaTensor};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The H200's L2 (60 MB): a rotation's total must be several times this.
const L2_BYTES: usize = 60 << 20;
/// What a rotation of weights (or of KV caches, or a resident run's data) must reach.
const POOL_BYTES: usize = 4 * L2_BYTES;

/// GPU benchmarks of the decode operators (needs a CUDA GPU).
#[derive(clap::Parser, Debug)]
#[command(about)]
struct Args {
    /// Also write every row as a JSON line to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// 1 warm-up and 5 timed runs per figure instead of 3 and 25.
    #[arg(long)]
    quick: bool,
    /// Run only these sections (comma-separated): bw, gemv, norm, rope, attn, heads, chain.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// The GEMV section measures only these batch sizes (comma-separated; all by default).
    #[arg(long, value_delimiter = ',')]
    batches: Vec<usize>,
    /// The GEMV section measures only the ops whose name contains one of these
    /// (comma-separated, e.g. `gate,qkv`; all by default).
    #[arg(long, value_delimiter = ',')]
    ops: Vec<String>,
    /// Accepted and ignored: `cargo bench` passes it to harness-less benches.
    #[arg(long, hide = true)]
    bench: bool,
}

/// How to read the table (printed first).
const LEGEND: &str = "\
time us  kernel time of one op (CUDA events of the megakernel launch, median)
GB/s     bytes the op must move (weights or KV cache + activations in and out) / time
% copy   that bandwidth as a fraction of the device-to-device copy measured first
form     standalone: one launch per op (its ramp-up and tail included), weights rotated;
         resident: the same op repeated in ONE launch (GEMV: L layers chained by events,
         layer l+1 waiting for all of layer l; others: many independent tiles), per-op time;
         resident chain: dependent GEMV steps, time per step
tiles    rows (or positions) per task x tasks; split-K: tile x split tasks + reducers
B        batch rows (sequences); every result was checked against a CPU reference first";

/// Warm-up and timed runs per figure.
#[derive(Clone, Copy)]
struct Runs {
    warm: usize,
    timed: usize,
}

/// The table on stdout and the JSON lines.
struct Out {
    json: Option<std::fs::File>,
    /// Device-to-device copy bandwidth of this run (bytes/s), the 100% of the table.
    copy_bw: f64,
    runs: Runs,
}

/// One figure: what ran and how long it took.
struct Row<'a> {
    op: &'a str,
    shape: &'a str,
    batch: usize,
    form: &'a str,
    tile: &'a str,
    /// Median kernel time of one op (a resident run's time divided by its repetitions).
    secs: f64,
    /// Bytes the op must move; 0 where a bandwidth means nothing (synchronisation only).
    bytes: f64,
    note: &'a str,
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl Out {
    fn header(&self) {
        println!(
            "\n{:<34} {:<26} {:>5} {:<22} {:<30} {:>10} {:>8} {:>7}  note",
            "op", "shape", "B", "form", "tiles", "time us", "GB/s", "% copy"
        );
        println!("{}", "-".repeat(150));
    }

    fn row(&mut self, r: Row<'_>) {
        let us = r.secs * 1e6;
        let (gbs, pct) = if r.bytes > 0.0 {
            let bw = r.bytes / r.secs;
            (format!("{:.0}", bw / 1e9), format!("{:.1}%", 100.0 * bw / self.copy_bw))
        } else {
            ("-".into(), "-".into())
        };
        let batch = if r.batch == 0 { "-".to_string() } else { r.batch.to_string() };
        println!(
            "{:<34} {:<26} {:>5} {:<22} {:<30} {:>10.2} {:>8} {:>7}  {}",
            r.op, r.shape, batch, r.form, r.tile, us, gbs, pct, r.note
        );
        if let Some(f) = &mut self.json {
            let bw = if r.bytes > 0.0 { r.bytes / r.secs } else { 0.0 };
            let line = format!(
                "{{\"op\":{},\"shape\":{},\"batch\":{},\"form\":{},\"tiles\":{},\"time_us\":{},\"bytes\":{},\"gb_per_s\":{},\"fraction_of_copy\":{},\"runs\":{},\"note\":{}}}",
                json_str(r.op),
                json_str(r.shape),
                r.batch,
                json_str(r.form),
                json_str(r.tile),
                us,
                r.bytes,
                bw / 1e9,
                if self.copy_bw > 0.0 { bw / self.copy_bw } else { 0.0 },
                self.runs.timed,
                json_str(r.note)
            );
            if let Err(e) = writeln!(f, "{line}") {
                eprintln!("warning: writing the JSON line failed: {e}");
            }
        }
    }
}

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("ops_bench: some sections FAILED (see the errors above); their figures are missing");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// Runs the sections; `Ok(false)` when one of them failed (the others still ran).
fn run() -> Res<bool> {
    use clap::Parser;
    let args = Args::parse();
    let json = args.json.as_ref().map(|p| std::fs::File::create(p).map_err(|e| format!("--json {}: {e}", p.display())));
    let runs = if args.quick { Runs { warm: 1, timed: 5 } } else { Runs { warm: 3, timed: 25 } };
    let mut out = Out { json: json.transpose()?, copy_bw: 0.0, runs };
    let gpu = Cuda::new(0)?;
    println!("{}; medians of {} runs after {} warm-up runs", gpu.describe(), runs.timed, runs.warm);
    println!("{LEGEND}");
    let wanted = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    for o in &args.only {
        if !["bw", "gemv", "norm", "rope", "attn", "heads", "chain"].contains(&o.as_str()) {
            return Err(format!("--only: unknown section `{o}` (bw, gemv, norm, rope, attn, heads, chain)").into());
        }
    }
    // the copy bandwidth is the 100% of every other row: always measured
    let t0 = std::time::Instant::now();
    bandwidth(&gpu, &mut out)?;
    let mut ok = true;
    let gemv = |gpu: &Cuda, out: &mut Out| gemv_all(gpu, out, &args.batches, &args.ops);
    type Section<'a> = &'a dyn Fn(&Cuda, &mut Out) -> Res<()>;
    let sections: [(&str, Section); 6] = [
        ("gemv", &gemv),
        ("norm", &norm_all),
        ("rope", &rope_all),
        ("attn", &attn_all),
        ("heads", &heads_all),
        ("chain", &chain_all),
    ];
    for (name, f) in sections {
        if !wanted(name) {
            continue;
        }
        out.header();
        if let Err(e) = f(&gpu, &mut out) {
            eprintln!("error in section `{name}`: {e}");
            println!("section `{name}` FAILED: {e}");
            ok = false;
        }
    }
    println!("\ntotal wall time {:.1} s", t0.elapsed().as_secs_f64());
    Ok(ok)
}

/// Median kernel time of `f(i)` over the timed runs, after the warm-up runs (`i` counts
/// every call from 0, so a rotation index is `i % copies`).
fn measure(runs: Runs, mut f: impl FnMut(usize) -> Res<Duration>) -> Res<f64> {
    for i in 0..runs.warm {
        f(i)?;
    }
    let mut v = Vec::with_capacity(runs.timed);
    for i in 0..runs.timed {
        v.push(f(runs.warm + i)?.as_secs_f64());
    }
    Ok(median(&v))
}

fn elapsed(r: et_core::Result<LaunchReport>) -> Res<Duration> {
    Ok(r?.elapsed)
}

// ---------------------------------------------------------------------------------------
// Inputs and checks

/// `n` bf16 uniform in `[-scale, scale)`, from SplitMix64 streams in parallel (the pools
/// are up to a billion elements).
fn random_bf16(n: usize, seed: u64, scale: f32) -> Vec<bf16> {
    let mut v = vec![bf16::from_f32(0.0); n];
    let threads = std::thread::available_parallelism().map_or(4, |t| t.get()).clamp(1, 32);
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (i, c) in v.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut state =
                    seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for e in c {
                    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^= z >> 31;
                    let u = (z >> 40) as f32 / (1u64 << 24) as f32;
                    *e = bf16::from_f32((u * 2.0 - 1.0) * scale);
                }
            });
        }
    });
    v
}

fn random_tensor(shape: &[usize], seed: u64, scale: f32) -> Res<Tensor<bf16>> {
    Ok(Tensor::from_vec(shape, random_bf16(shape.iter().product(), seed, scale))?)
}

/// Compares sampled outputs: `|got - want| / |want|` over the sample (norms), which must
/// be at most `tol` and finite (a poisoned output is NaN and fails).
struct Sample {
    what: String,
    err2: f64,
    ref2: f64,
    n: usize,
}

impl Sample {
    fn new(what: impl Into<String>) -> Self {
        Sample { what: what.into(), err2: 0.0, ref2: 0.0, n: 0 }
    }

    fn add(&mut self, got: f32, want: f32) {
        let d = got as f64 - want as f64;
        // NaN propagates into err2 and fails the check
        self.err2 += d * d;
        self.ref2 += want as f64 * want as f64;
        self.n += 1;
    }

    /// bf16 outputs round at 2^-9 relative, f32 sums in another order differ by far less:
    /// 1e-2 of the norm is well above that and well below a wrong row, tile or split.
    fn check(&self, tol: f64) -> Res<()> {
        let rel = (self.err2 / self.ref2.max(1e-30)).sqrt();
        if self.n == 0 || rel.is_nan() || rel > tol {
            return Err(format!(
                "{}: relative error {rel:.3e} over {} sampled values > {tol} (wrong result)",
                self.what, self.n
            )
            .into());
        }
        Ok(())
    }
}

const TOL: f64 = 1e-2;

/// Evenly spread sample indices in `0..n`, first and last included.
fn spread(n: usize, count: usize) -> Vec<usize> {
    let count = count.min(n).max(1);
    let mut v: Vec<usize> = (0..count).map(|i| if count == 1 { 0 } else { i * (n - 1) / (count - 1) }).collect();
    v.dedup();
    v
}

fn dot(a: &[bf16], b: &[bf16]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x.to_f32() * y.to_f32()).sum()
}

// ---------------------------------------------------------------------------------------
// 1. Copy bandwidth and a read-only floor

const READ_FLOOR_CU: &str = r#"
// Reads n16 16-byte words (non-coherent, L1 bypassed, 4 loads in flight per thread) and
// folds them into a word that is stored only if it equals a constant: the loads stay.
extern "C" __global__ void read_floor(const uint4* p, unsigned long long n16, unsigned int* sink) {
    unsigned int acc = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p + i + u * stride));
#pragma unroll
        for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) { const uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
    if (acc == 0x9e3779b9u) sink[0] = acc;
}
"#;

fn bandwidth(gpu: &Cuda, out: &mut Out) -> Res<()> {
    let n: usize = COPY_BYTES;
    let stream = gpu.stream();
    let src = stream.alloc_zeros::<u8>(n)?;
    let mut sink = stream.alloc_zeros::<u32>(1)?;
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let (start, end) = (gpu.context().new_event(timing)?, gpu.context().new_event(timing)?);
    out.copy_bw = copy_bandwidth(gpu, out.runs.warm, out.runs.timed)?;
    let copy = 2.0 * n as f64 / out.copy_bw;
    let (image, _) = gpu.compiler().compile_source("read_floor", READ_FLOOR_CU)?;
    let module = gpu.context().load_module(cudarc::nvrtc::Ptx::from_binary(image.image.clone()))?;
    let read = module.load_function("read_floor")?;
    let n16 = (n / 16) as u64;
    let cfg = LaunchConfig { grid_dim: (gpu.sm_count() as u32 * 4, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 };
    let floor = measure(out.runs, |_| {
        start.record(stream)?;
        let mut b = stream.launch_builder(&read);
        b.arg(&src).arg(&n16).arg(&mut sink);
        // SAFETY: `read_floor(const uint4*, unsigned long long, unsigned int*)`: `src` holds
        // n16 16-byte words (a 1 GiB allocation is 256-byte aligned), `sink` one word.
        unsafe { b.launch(cfg) }?;
        end.record(stream)?;
        stream.synchronize()?;
        Ok(Duration::from_secs_f64(start.elapsed_ms(&end)? as f64 / 1e3))
    })?;
    out.header();
    out.row(Row {
        op: "copy (cuMemcpyDtoD)",
        shape: "1 GiB",
        batch: 0,
        form: "one copy",
        tile: "-",
        secs: copy,
        bytes: 2.0 * n as f64,
        note: "read + written bytes: the 100% of this table",
    });
    out.row(Row {
        op: "read-only floor (CUDA)",
        shape: "1 GiB",
        batch: 0,
        form: "one kernel",
        tile: "4 CTAs x 512 per SM",
        secs: floor,
        bytes: n as f64,
        note: "plain CUDA, 16-byte nc loads: what a read-bound op could reach",
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. GEMV at Llama-3.1-8B shapes

/// Which GEMV form a kernel computes.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Silu,
    /// split-K with this many splits (partials `[L * S, B, N]` in f32)
    SplitK(usize),
}

/// Launches a GEMV megakernel: weights (1, or gate and up), x, partials, y.
type GemvLaunch<'a> = &'a dyn Fn(
    &Cuda,
    &[&CudaTensor<bf16>],
    &CudaTensor<bf16>,
    &mut CudaTensor<f32>,
    &mut CudaTensor<bf16>,
) -> et_core::Result<LaunchReport>;

/// One GEMV figure set: the shape, the batch, the kind, the kernel and its tiling.
struct Gemv<'a> {
    op: &'a str,
    n: usize,
    k: usize,
    batch: usize,
    kind: Kind,
    tile: String,
    launch: GemvLaunch<'a>,
    /// Time the standalone form (one launch of one layer).
    standalone: bool,
    /// Also time the resident form (L layers in one launch).
    resident: bool,
}

/// The weight pools of one shape: `copies` random `[N, K]` layers stacked (gate and up:
/// two pools), on the host for the checks and on the device.
struct Pool {
    host: Vec<Tensor<bf16>>,
    dev: Vec<CudaTensor<bf16>>,
    copies: usize,
}

fn gemv_pool(gpu: &Cuda, n: usize, k: usize, mats: usize, seed: u64) -> Res<Pool> {
    let layer = mats * n * k * 2;
    let copies = POOL_BYTES.div_ceil(layer).max(4);
    let mut host = Vec::new();
    let mut dev = Vec::new();
    for m in 0..mats {
        let t = random_tensor(&[copies * n, k], seed + m as u64, 1.0)?;
        dev.push(gpu.upload(&t)?);
        host.push(t);
    }
    Ok(Pool { host, dev, copies })
}

/// Checks `y` (layer `l` of `[L * B, N]`, downloaded) against the host weights of copy
/// `copy` at sampled output columns, every batch row.
fn check_gemv(
    g: &Gemv<'_>,
    pool: &Pool,
    x: &Tensor<bf16>,
    y: &Tensor<bf16>,
    l: usize,
    copy: usize,
    what: &str,
) -> Res<()> {
    let (n, k, b) = (g.n, g.k, g.batch);
    let mut s = Sample::new(format!("{} {}x{} B={} {what}", g.op, n, k, b));
    let (xs, ys) = (x.as_slice(), y.as_slice());
    for col in spread(n, 40) {
        let row = |m: usize| &pool.host[m].as_slice()[(copy * n + col) * k..(copy * n + col + 1) * k];
        for bi in 0..b {
            let xb = &xs[bi * k..(bi + 1) * k];
            let want = match g.kind {
                Kind::Silu => {
                    let (gate, up) = (dot(row(0), xb), dot(row(1), xb));
                    gate / (1.0 + (-gate).exp()) * up
                }
                _ => dot(row(0), xb),
            };
            s.add(ys[(l * b + bi) * n + col].to_f32(), want);
        }
    }
    s.check(TOL)
}

fn gemv_bytes(g: &Gemv<'_>, mats: usize) -> f64 {
    (mats * g.n * g.k * 2 + g.batch * g.k * 2 + g.batch * g.n * 2) as f64
}

/// Times one GEMV standalone (one launch of one layer, weights rotated among the pool's
/// copies) and, if asked, resident (all the pool's copies as layers of one launch).
fn gemv_one(gpu: &Cuda, out: &mut Out, g: &Gemv<'_>, pool: &Pool, seed: u64) -> Res<()> {
    let (n, k, b) = (g.n, g.k, g.batch);
    let mats = pool.dev.len();
    let splits = if let Kind::SplitK(s) = g.kind { s } else { 1 };
    let shape = format!("{k}->{n}");
    let fresh_x = |i: usize| -> Res<(Tensor<bf16>, CudaTensor<bf16>)> {
        let x = random_tensor(&[b, k], seed * 1000 + i as u64, 1.0)?;
        let d = gpu.upload(&x)?;
        Ok((x, d))
    };
    // standalone: L = 1, copy i % copies
    if g.standalone {
        let mut y = gpu.poisoned::<bf16>(&[b, n])?;
        let mut part = gpu.poisoned::<f32>(&[splits, b, n])?;
        let launch_copy = |c: usize, x: &CudaTensor<bf16>, part: &mut CudaTensor<f32>, y: &mut CudaTensor<bf16>| {
            let views = pool.dev.iter().map(|d| d.rows(c * n..(c + 1) * n)).collect::<Result<Vec<_>, _>>()?;
            let ws: Vec<&CudaTensor<bf16>> = views.iter().map(|v| &**v).collect();
            elapsed((g.launch)(gpu, &ws, x, part, y))
        };
        let (xh, xd) = fresh_x(0)?;
        launch_copy(1 % pool.copies, &xd, &mut part, &mut y)?;
        check_gemv(g, pool, &xh, &gpu.download(&y)?, 0, 1 % pool.copies, "standalone")?;
        let t = measure(out.runs, |i| {
            let (_, xd) = fresh_x(i + 1)?;
            launch_copy(i % pool.copies, &xd, &mut part, &mut y)
        })?;
        out.row(Row {
            op: g.op,
            shape: &shape,
            batch: b,
            form: "standalone",
            tile: &g.tile,
            secs: t,
            bytes: gemv_bytes(g, mats),
            note: &format!(
                "{} weight copies rotated ({:.0} MB)",
                pool.copies,
                (pool.copies * mats * n * k * 2) as f64 / 1e6
            ),
        });
    }
    if !g.resident {
        return Ok(());
    }
    // resident: L = copies layers, each waiting for the whole previous layer
    let layers = pool.copies;
    let mut y = gpu.poisoned::<bf16>(&[layers * b, n])?;
    let mut part = gpu.poisoned::<f32>(&[layers * splits, b, n])?;
    let ws: Vec<&CudaTensor<bf16>> = pool.dev.iter().collect();
    let (xh, xd) = fresh_x(500)?;
    elapsed((g.launch)(gpu, &ws, &xd, &mut part, &mut y))?;
    let yh = gpu.download(&y)?;
    check_gemv(g, pool, &xh, &yh, 0, 0, "resident, layer 0")?;
    check_gemv(g, pool, &xh, &yh, layers - 1, layers - 1, "resident, last layer")?;
    let t = measure(out.runs, |i| {
        let (_, xd) = fresh_x(600 + i)?;
        elapsed((g.launch)(gpu, &ws, &xd, &mut part, &mut y))
    })?;
    out.row(Row {
        op: g.op,
        shape: &shape,
        batch: b,
        form: &format!("resident, {layers} layers"),
        tile: &g.tile,
        secs: t / layers as f64,
        bytes: gemv_bytes(g, mats),
        note: &format!("per GEMV; {:.1} us per launch", t * 1e6),
    });
    Ok(())
}

/// The launch closures of the three kernel kinds.
macro_rules! plain {
    ($k:ident) => {
        &|gpu: &Cuda,
          w: &[&CudaTensor<bf16>],
          x: &CudaTensor<bf16>,
          _: &mut CudaTensor<f32>,
          y: &mut CudaTensor<bf16>| { $k::launch(gpu, w[0], x, y) }
    };
}
macro_rules! silu {
    ($k:ident) => {
        &|gpu: &Cuda,
          w: &[&CudaTensor<bf16>],
          x: &CudaTensor<bf16>,
          _: &mut CudaTensor<f32>,
          y: &mut CudaTensor<bf16>| { $k::launch(gpu, w[0], w[1], x, y) }
    };
}
macro_rules! splitk {
    ($k:ident) => {
        &|gpu: &Cuda,
          w: &[&CudaTensor<bf16>],
          x: &CudaTensor<bf16>,
          p: &mut CudaTensor<f32>,
          y: &mut CudaTensor<bf16>| { $k::launch(gpu, w[0], x, p, y) }
    };
}

fn gemv_all(gpu: &Cuda, out: &mut Out, batches: &[usize], ops: &[String]) -> Res<()> {
    let tasks = |nt: usize, rt: usize| format!("{nt} rows x {rt} tasks");
    let no_prefetch = |nt: usize, rt: usize| format!("{nt} rows x {rt}, no prefetch");
    let split = |nt: usize, rt: usize, s: usize, ks: usize| format!("{nt}x{ks} x {} + reduce {}", rt * s, rt * 8);
    // (op, N, K, kernels at B = 1, 8, 16, 64 as (batch, kind, tile, launch)), pool per shape
    type Entry<'a> = (usize, Kind, String, GemvLaunch<'a>);
    let shapes: Vec<(&str, usize, usize, usize, Vec<Entry<'_>>)> = vec![
        (
            "gemv o-proj (matvec)",
            4096,
            4096,
            1,
            vec![
                (1, Kind::Plain, tasks(32, 128), plain!(gemv_q_b1)),
                (1, Kind::Plain, no_prefetch(32, 128), plain!(gemv_q_b1_np)),
                (1, Kind::Plain, tasks(16, 256), plain!(gemv_q_b1_nt16)),
                (1, Kind::Plain, tasks(64, 64), plain!(gemv_q_b1_nt64)),
                (16, Kind::Plain, tasks(32, 128), plain!(gemv_q_b16)),
                (16, Kind::Plain, tasks(16, 256), plain!(gemv_q_b16_nt16)),
                (16, Kind::Plain, tasks(64, 64), plain!(gemv_q_b16_nt64)),
                (16, Kind::SplitK(8), split(256, 16, 8, 512), splitk!(splitk_q_b16)),
                (64, Kind::Plain, tasks(32, 128), plain!(gemv_q_b64)),
                (64, Kind::SplitK(8), split(256, 16, 8, 512), splitk!(splitk_q_b64)),
            ],
        ),
        (
            "gemv qkv (matvec)",
            6144,
            4096,
            1,
            vec![
                (1, Kind::Plain, tasks(48, 128), plain!(gemv_qkv_b1)),
                (1, Kind::Plain, no_prefetch(48, 128), plain!(gemv_qkv_b1_np)),
                (8, Kind::Plain, tasks(48, 128), plain!(gemv_qkv_b8)),
                (16, Kind::Plain, tasks(48, 128), plain!(gemv_qkv_b16)),
                (16, Kind::SplitK(4), split(192, 32, 4, 1024), splitk!(splitk_qkv_b16)),
                (64, Kind::Plain, tasks(48, 128), plain!(gemv_qkv_b64)),
                (64, Kind::SplitK(4), split(192, 32, 4, 1024), splitk!(splitk_qkv_b64)),
            ],
        ),
        (
            "gemv gate/up (silu)",
            14336,
            4096,
            2,
            vec![
                (1, Kind::Silu, tasks(112, 128), silu!(gemv_gateup_b1)),
                (1, Kind::Silu, no_prefetch(112, 128), silu!(gemv_gateup_b1_np)),
                (8, Kind::Silu, tasks(112, 128), silu!(gemv_gateup_b8)),
                (16, Kind::Silu, tasks(112, 128), silu!(gemv_gateup_b16)),
                (64, Kind::Silu, tasks(112, 128), silu!(gemv_gateup_b64)),
            ],
        ),
        (
            "gemv down (matvec)",
            4096,
            14336,
            1,
            vec![
                (1, Kind::Plain, tasks(32, 128), plain!(gemv_down_b1)),
                (1, Kind::Plain, no_prefetch(32, 128), plain!(gemv_down_b1_np)),
                (8, Kind::Plain, tasks(32, 128), plain!(gemv_down_b8)),
                (16, Kind::Plain, tasks(32, 128), plain!(gemv_down_b16)),
                (16, Kind::SplitK(8), split(256, 16, 8, 1792), splitk!(splitk_down_b16)),
                (64, Kind::Plain, tasks(32, 128), plain!(gemv_down_b64)),
                (64, Kind::SplitK(8), split(256, 16, 8, 1792), splitk!(splitk_down_b64)),
            ],
        ),
    ];
    let mut failed = Vec::new();
    for (si, (op, n, k, mats, entries)) in shapes.into_iter().enumerate() {
        if !ops.is_empty() && !ops.iter().any(|o| op.contains(o.as_str())) {
            continue;
        }
        if !batches.is_empty() && !entries.iter().any(|e| batches.contains(&e.0)) {
            continue;
        }
        let pool = gemv_pool(gpu, n, k, mats, 10 + 10 * si as u64)?;
        for (ei, (batch, kind, tile, launch)) in entries.into_iter().enumerate() {
            if !batches.is_empty() && !batches.contains(&batch) {
                continue;
            }
            let label = match kind {
                Kind::SplitK(_) => op.replace("(matvec)", "(split-K)"),
                _ => op.to_string(),
            };
            // the sweep entries (tile sizes other than the chosen one) run standalone only
            let resident = !tile.starts_with("16 rows") && !tile.starts_with("64 rows");
            // without the prefetch one layer is the prefetching kernel's first layer: resident only
            let standalone = !tile.ends_with("no prefetch");
            let g = Gemv { op: &label, n, k, batch, kind, tile, launch, standalone, resident };
            // a failed check or launch loses this row, not the section
            if let Err(e) = gemv_one(gpu, out, &g, &pool, 1000 + 100 * si as u64 + ei as u64) {
                println!("{label:<34} {:<26} {batch:>5} FAILED: {e}", format!("{k}->{n}"));
                failed.push(format!("{label} B={batch} ({}): {e}", g.tile));
            }
        }
    }
    if failed.is_empty() { Ok(()) } else { Err(failed.join("; ").into()) }
}

// ---------------------------------------------------------------------------------------
// 3a. RMSNorm

fn norm_all(gpu: &Cuda, out: &mut Out) -> Res<()> {
    const D: usize = 4096;
    type NormLaunch<'a> =
        &'a dyn Fn(&Cuda, &CudaTensor<bf16>, &CudaTensor<bf16>, &mut CudaTensor<bf16>) -> et_core::Result<LaunchReport>;
    let kernels: [(usize, NormLaunch<'_>); 2] =
        [(1, &|g, x, w, y| norm_b1::launch(g, x, w, y)), (16, &|g, x, w, y| norm_b16::launch(g, x, w, y))];
    let w_host = random_tensor(&[D], 77, 1.0)?;
    let w = gpu.upload(&w_host)?;
    for (batch, launch) in kernels {
        let tile_bytes = 2 * batch * D * 2 + D * 2;
        let tiles = POOL_BYTES.div_ceil(2 * batch * D * 2).next_power_of_two();
        let x_host = random_tensor(&[tiles * batch, D], 78 + batch as u64, 1.0)?;
        let x = gpu.upload(&x_host)?;
        let check = |y: &Tensor<bf16>, first_row: usize, rows: usize, what: &str| -> Res<()> {
            let mut s = Sample::new(format!("rms_norm B={batch} {what}"));
            for r in spread(rows, 24) {
                let xr = &x_host.as_slice()[(first_row + r) * D..(first_row + r + 1) * D];
                let inv = 1.0 / (xr.iter().map(|v| v.to_f32() * v.to_f32()).sum::<f32>() / D as f32 + 1e-5).sqrt();
                for c in spread(D, 64) {
                    s.add(y.as_slice()[r * D + c].to_f32(), xr[c].to_f32() * inv * w_host.as_slice()[c].to_f32());
                }
            }
            s.check(TOL)
        };
        // one decode step: one tile, rotated through the pool
        let mut y = gpu.poisoned::<bf16>(&[batch, D])?;
        elapsed(launch(gpu, &*x.rows(batch..2 * batch)?, &w, &mut y))?;
        check(&gpu.download(&y)?, batch, batch, "one tile")?;
        let t = measure(out.runs, |i| {
            let j = i % tiles;
            elapsed(launch(gpu, &*x.rows(j * batch..(j + 1) * batch)?, &w, &mut y))
        })?;
        let shape = format!("[{batch}, {D}]");
        out.row(Row {
            op: "rms_norm",
            shape: &shape,
            batch,
            form: "standalone",
            tile: &format!("{batch} rows x 1 task"),
            secs: t,
            bytes: tile_bytes as f64,
            note: "one decode step: a latency, not a bandwidth",
        });
        let mut y = gpu.poisoned::<bf16>(&[tiles * batch, D])?;
        elapsed(launch(gpu, &x, &w, &mut y))?;
        check(&gpu.download(&y)?, 0, tiles * batch, "resident")?;
        let t = measure(out.runs, |_| elapsed(launch(gpu, &x, &w, &mut y)))?;
        out.row(Row {
            op: "rms_norm",
            shape: &shape,
            batch,
            form: &format!("resident, {tiles} tiles"),
            tile: &format!("{batch} rows x {tiles} tasks"),
            secs: t,
            bytes: (tiles * tile_bytes) as f64,
            note: &format!("{tiles} independent [{batch}, {D}] tiles in one launch"),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3b. RoPE + KV append

/// The bytes one sequence's RoPE + append must move: q and k read and written, v read,
/// one k row and one v row per KV head written to the cache.
const ROPE_SEQ_BYTES: usize = 32 * 128 * 2 * 2 + 8 * 128 * 2 * 2 + 8 * 128 * 2 + 2 * 8 * 128 * 2;

/// RoPE exactly as the op computes it (f64 angle, f32 rotation, one rounding).
fn rope_ref(row: &[bf16], p: i32) -> Vec<f32> {
    let d = row.len();
    let mut o = vec![0f32; d];
    for e in 0..d / 2 {
        // the kernel's constants: theta 500000, factor 8, low 1, high 4, original 8192
        let f = llama3_inv_freq(e, d, 500000.0, 8.0, 1.0, 4.0, 8192.0);
        let (s, c) = (p as f64 * f).sin_cos();
        let (s, c) = (s as f32, c as f32);
        let (a, b) = (row[e].to_f32(), row[e + d / 2].to_f32());
        o[e] = a * c - b * s;
        o[e + d / 2] = b * c + a * s;
    }
    o
}

fn rope_all(gpu: &Cuda, out: &mut Out) -> Res<()> {
    const LC: usize = 16;
    let ns_all = POOL_BYTES.div_ceil(ROPE_SEQ_BYTES).div_ceil(1024) * 1024;
    let q_host = random_tensor(&[ns_all * 32, 128], 90, 1.0)?;
    let k_host = random_tensor(&[ns_all * 8, 128], 91, 1.0)?;
    let v_host = random_tensor(&[ns_all * 8, 128], 92, 1.0)?;
    let pos_host = Tensor::from_vec(&[ns_all], (0..ns_all).map(|s| ((s * 7 + 3) % LC) as i32).collect())?;
    let mut q = gpu.upload(&q_host)?;
    let mut k = gpu.upload(&k_host)?;
    let v = gpu.upload(&v_host)?;
    let pos = gpu.upload(&pos_host)?;
    let mut kc = gpu.poisoned::<bf16>(&[ns_all * 8, LC, 128])?;
    let mut vc = gpu.poisoned::<bf16>(&[ns_all * 8, LC, 128])?;
    // checks sequences `seqs` (absolute indices) after their first RoPE + append
    let check = |q: &CudaTensor<bf16>,
                 k: &CudaTensor<bf16>,
                 kc: &CudaTensor<bf16>,
                 vc: &CudaTensor<bf16>,
                 seqs: &[usize],
                 what: &str|
     -> Res<()> {
        let (qd, kd, kcd, vcd) = (gpu.download(q)?, gpu.download(k)?, gpu.download(kc)?, gpu.download(vc)?);
        let mut s = Sample::new(format!("rope + kv_append {what}"));
        for &sq in seqs {
            let p = pos_host.as_slice()[sq];
            for h in 0..32 {
                let r = (sq * 32 + h) * 128;
                for (c, want) in rope_ref(&q_host.as_slice()[r..r + 128], p).into_iter().enumerate() {
                    s.add(qd.as_slice()[r + c].to_f32(), want);
                }
            }
            for h in 0..8 {
                let r = (sq * 8 + h) * 128;
                let kr = rope_ref(&k_host.as_slice()[r..r + 128], p);
                let cache = ((sq * 8 + h) * LC + p as usize) * 128;
                for (c, &want) in kr.iter().enumerate() {
                    s.add(kd.as_slice()[r + c].to_f32(), want);
                    s.add(kcd.as_slice()[cache + c].to_f32(), want);
                    s.add(vcd.as_slice()[cache + c].to_f32(), v_host.as_slice()[r + c].to_f32());
                }
            }
        }
        s.check(TOL)
    };
    // resident: every sequence in one launch, first one task per (sequence, KV head), then
    // one per block of 8 and of 16 sequences; each form's first launch runs on fresh data
    // and is checked
    for blocks in [1usize, 8, 16] {
        let (mut q, mut k) = (gpu.upload(&q_host)?, gpu.upload(&k_host)?);
        let mut kc = gpu.poisoned::<bf16>(&[ns_all * 8, LC, 128])?;
        let mut vc = gpu.poisoned::<bf16>(&[ns_all * 8, LC, 128])?;
        let launch = |q: &mut CudaTensor<bf16>,
                      k: &mut CudaTensor<bf16>,
                      kc: &mut CudaTensor<bf16>,
                      vc: &mut CudaTensor<bf16>| {
            elapsed(match blocks {
                8 => rope_append_blocks::launch(gpu, q, k, &v, &pos, kc, vc),
                16 => rope_append_blocks16::launch(gpu, q, k, &v, &pos, kc, vc),
                _ => rope_append::launch(gpu, q, k, &v, &pos, kc, vc),
            })
        };
        launch(&mut q, &mut k, &mut kc, &mut vc)?;
        let what = if blocks > 1 { format!("resident, {blocks} sequences a task") } else { "resident".into() };
        check(&q, &k, &kc, &vc, &spread(ns_all, 16), &what)?;
        let t = measure(out.runs, |_| launch(&mut q, &mut k, &mut kc, &mut vc))?;
        out.row(Row {
            op: "rope_llama3 + kv_append",
            shape: "q 32x128, kv 8x128",
            batch: ns_all,
            form: "resident",
            tile: &if blocks > 1 {
                format!("{blocks} seqs x {} tasks", ns_all / blocks)
            } else {
                format!("(seq, kv head) x {} tasks", ns_all * 8)
            },
            secs: t,
            bytes: (ns_all * ROPE_SEQ_BYTES) as f64,
            note: &format!("{ns_all} sequences in one launch; q, k rotated in place each run"),
        });
    }
    for batch in [1usize, 16] {
        let groups = ns_all / batch;
        let one = |j: usize,
                   q: &mut CudaTensor<bf16>,
                   k: &mut CudaTensor<bf16>,
                   kc: &mut CudaTensor<bf16>,
                   vc: &mut CudaTensor<bf16>| {
            let (s0, s1) = (j * batch, (j + 1) * batch);
            elapsed(rope_append::launch(
                gpu,
                &mut *q.rows_mut(s0 * 32..s1 * 32)?,
                &mut *k.rows_mut(s0 * 8..s1 * 8)?,
                &*v.rows(s0 * 8..s1 * 8)?,
                &*pos.rows(s0..s1)?,
                &mut *kc.rows_mut(s0 * 8..s1 * 8)?,
                &mut *vc.rows_mut(s0 * 8..s1 * 8)?,
            ))
        };
        // a check on fresh data: the host copies again for the group checked
        let (mut q2, mut k2) = (gpu.upload(&q_host)?, gpu.upload(&k_host)?);
        let (mut kc2, mut vc2) =
            (gpu.poisoned::<bf16>(&[ns_all * 8, LC, 128])?, gpu.poisoned::<bf16>(&[ns_all * 8, LC, 128])?);
        one(1, &mut q2, &mut k2, &mut kc2, &mut vc2)?;
        check(&q2, &k2, &kc2, &vc2, &(batch..2 * batch).collect::<Vec<_>>(), &format!("B={batch}"))?;
        drop((q2, k2, kc2, vc2));
        let t = measure(out.runs, |i| one(i % groups, &mut q, &mut k, &mut kc, &mut vc))?;
        out.row(Row {
            op: "rope_llama3 + kv_append",
            shape: "q 32x128, kv 8x128",
            batch,
            form: "standalone",
            tile: &format!("(seq, kv head) x {} tasks", batch * 8),
            secs: t,
            bytes: (batch * ROPE_SEQ_BYTES) as f64,
            note: "one decode step: a latency, not a bandwidth",
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3c. Split-KV decode attention

/// One query row `q` attending to `lk` cache rows by the definition (f32): softmax of the
/// scores `q · k_at(r, ..) / sqrt(d)`, then the weighted sum of `v_at(r, ..)`; `d` outputs.
fn attend_ref(
    q: &[f32],
    lk: usize,
    k_at: impl Fn(usize, usize) -> f32,
    v_at: impl Fn(usize, usize) -> f32,
) -> Vec<f32> {
    let d = q.len();
    let scale = 1.0 / (d as f32).sqrt();
    let sc: Vec<f32> = (0..lk).map(|r| scale * (0..d).map(|i| q[i] * k_at(r, i)).sum::<f32>()).collect();
    let m = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = sc.iter().map(|v| (v - m).exp()).collect();
    let den: f32 = e.iter().sum();
    (0..d).map(|i| (0..lk).map(|r| e[r] * v_at(r, i)).sum::<f32>() / den).collect()
}

#[allow(clippy::type_complexity)]
type AttnLaunch<'a> = &'a dyn Fn(
    &Cuda,
    &CudaTensor<bf16>,
    &CudaTensor<bf16>,
    &CudaTensor<bf16>,
    &CudaTensor<i32>,
    &mut CudaTensor<f32>,
    &mut CudaTensor<f32>,
    &mut CudaTensor<bf16>,
) -> et_core::Result<LaunchReport>;

macro_rules! attn {
    ($k:ident) => {
        &|g: &Cuda,
          q: &CudaTensor<bf16>,
          kc: &CudaTensor<bf16>,
          vc: &CudaTensor<bf16>,
          len: &CudaTensor<i32>,
          o: &mut CudaTensor<f32>,
          ml: &mut CudaTensor<f32>,
          y: &mut CudaTensor<bf16>| { $k::launch(g, q, kc, vc, len, o, ml, y) }
    };
}

fn attn_all(gpu: &Cuda, out: &mut Out) -> Res<()> {
    const HK: usize = 8;
    const G: usize = 4;
    const D: usize = 128;
    let configs: [(usize, usize, usize, usize, AttnLaunch<'_>); 4] = [
        (1, 1024, 32, 32, attn!(attn_b1_l1k)),
        (1, 8192, 256, 32, attn!(attn_b1_l8k)),
        (16, 1024, 512, 2, attn!(attn_b16_l1k)),
        (16, 8192, 4096, 2, attn!(attn_b16_l8k)),
    ];
    for (ci, (batch, lk, chunk, splits, launch)) in configs.into_iter().enumerate() {
        let kv_bytes = 2 * batch * HK * lk * D * 2;
        let copies = POOL_BYTES.div_ceil(kv_bytes).max(1);
        let seed = 200 + 10 * ci as u64;
        let q_host = random_tensor(&[copies * batch * HK * G, D], seed, 1.0)?;
        let k_host = random_tensor(&[copies * batch * HK, lk, D], seed + 1, 1.0)?;
        let v_host = random_tensor(&[copies * batch * HK, lk, D], seed + 2, 1.0)?;
        let (q, kc, vc) = (gpu.upload(&q_host)?, gpu.upload(&k_host)?, gpu.upload(&v_host)?);
        let len = gpu.upload(&Tensor::from_vec(&[batch], vec![lk as i32; batch])?)?;
        let mut o = gpu.poisoned::<f32>(&[batch * HK * splits * G, D])?;
        let mut ml = gpu.poisoned::<f32>(&[batch * HK * splits * G, 2])?;
        let mut y = gpu.poisoned::<bf16>(&[batch * HK * G, D])?;
        let one = |c: usize, o: &mut CudaTensor<f32>, ml: &mut CudaTensor<f32>, y: &mut CudaTensor<bf16>| {
            let (h0, h1) = (c * batch * HK, (c + 1) * batch * HK);
            elapsed(launch(gpu, &*q.rows(h0 * G..h1 * G)?, &*kc.rows(h0..h1)?, &*vc.rows(h0..h1)?, &len, o, ml, y))
        };
        let c = copies - 1;
        one(c, &mut o, &mut ml, &mut y)?;
        let yd = gpu.download(&y)?;
        let mut s = Sample::new(format!("attention B={batch} L={lk}"));
        for b in spread(batch, 3) {
            for h in [0, HK - 1] {
                let bh = c * batch * HK + b * HK + h;
                let kr = &k_host.as_slice()[bh * lk * D..(bh + 1) * lk * D];
                let vr = &v_host.as_slice()[bh * lk * D..(bh + 1) * lk * D];
                for g in 0..G {
                    let q: Vec<f32> =
                        q_host.as_slice()[(bh * G + g) * D..(bh * G + g + 1) * D].iter().map(|x| x.to_f32()).collect();
                    let want = attend_ref(&q, lk, |p, i| kr[p * D + i].to_f32(), |p, i| vr[p * D + i].to_f32());
                    for (i, w) in want.into_iter().enumerate() {
                        s.add(yd.as_slice()[((b * HK + h) * G + g) * D + i].to_f32(), w);
                    }
                }
            }
        }
        s.check(TOL)?;
        let t = measure(out.runs, |i| one(i % copies, &mut o, &mut ml, &mut y))?;
        let bytes = kv_bytes + 2 * batch * HK * G * D * 2;
        out.row(Row {
            op: "attention split-KV",
            shape: &format!("KV {lk}, 8 kv x 4 q, d128"),
            batch,
            form: "standalone",
            tile: &format!("{chunk} pos x {} + merge {}", batch * HK * splits, batch * HK),
            secs: t,
            bytes: bytes as f64,
            note: &format!(
                "K+V+q+out; {copies} cache copies rotated ({:.0} MB); f32 partials not counted",
                (copies * kv_bytes) as f64 / 1e6
            ),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3d. Whole-head decode attention (the Llama step's form from batch 32)

#[allow(clippy::type_complexity)]
type HeadsLaunch<'a> = &'a dyn Fn(
    &Cuda,
    &CudaTensor<bf16>,
    &CudaTensor<i32>,
    &CudaTensor<f32>,
    &mut CudaTensor<bf16>,
    &mut CudaTensor<bf16>,
    &mut CudaTensor<bf16>,
) -> et_core::Result<LaunchReport>;

macro_rules! heads {
    ($k:ident) => {
        &|g: &Cuda,
          qkv: &CudaTensor<bf16>,
          pos: &CudaTensor<i32>,
          cs: &CudaTensor<f32>,
          kc: &mut CudaTensor<bf16>,
          vc: &mut CudaTensor<bf16>,
          y: &mut CudaTensor<bf16>| { $k::launch(g, qkv, pos, cs, kc, vc, y) }
    };
}

/// One KV head of one sequence by the definition: RoPE of its queries and new key
/// (rounded to bf16 as the op stores them), the cache's first `lk - 1` rows and the new
/// key and value as row `lk - 1`, softmax; `g` rows of `d` outputs. `qkv` is the head's
/// part of the QKV row: its `g` query heads, the key, the value.
fn heads_ref(qkv: &[bf16], kc: &[bf16], vc: &[bf16], p: i32, g: usize, d: usize) -> Vec<f32> {
    let lk = kc.len() / d;
    let turn =
        |row: &[bf16]| -> Vec<f32> { rope_ref(row, p).into_iter().map(|x| bf16::from_f32(x).to_f32()).collect() };
    let key = turn(&qkv[g * d..(g + 1) * d]);
    let value: Vec<f32> = qkv[(g + 1) * d..(g + 2) * d].iter().map(|x| x.to_f32()).collect();
    let k_at = |r: usize, i: usize| if r + 1 == lk { key[i] } else { kc[r * d + i].to_f32() };
    let v_at = |r: usize, i: usize| if r + 1 == lk { value[i] } else { vc[r * d + i].to_f32() };
    (0..g).flat_map(|gi| attend_ref(&turn(&qkv[gi * d..(gi + 1) * d]), lk, k_at, v_at)).collect()
}

fn heads_all(gpu: &Cuda, out: &mut Out) -> Res<()> {
    const HK: usize = 8;
    const G: usize = 4;
    const D: usize = 128;
    // (batch, cache length, KV heads a task, the tensor-core fold (or `_simt`), kernel)
    let configs: [(usize, usize, usize, bool, HeadsLaunch<'_>); 6] = [
        (64, 1024, 4, true, heads!(heads_b64_l1k)),
        (64, 1024, 4, false, heads!(heads_b64_l1k_simt)),
        (32, 1024, 2, true, heads!(heads_b32_l1k)),
        (32, 1024, 2, false, heads!(heads_b32_l1k_simt)),
        (64, 8192, 4, true, heads!(heads_b64_l8k)),
        (32, 8192, 2, true, heads!(heads_b32_l8k)),
    ];
    for (ci, (batch, lk, h, tc, launch)) in configs.into_iter().enumerate() {
        let fold = if tc { "tensor cores" } else { "CUDA cores" };
        let kv_bytes = 2 * batch * HK * lk * D * 2;
        let copies = POOL_BYTES.div_ceil(kv_bytes).max(1);
        let row = HK * (G + 2) * D;
        let seed = 300 + 10 * ci as u64;
        let qkv_host = random_tensor(&[copies * batch, row], seed, 1.0)?;
        let k_host = random_tensor(&[copies * batch * HK, lk, D], seed + 1, 1.0)?;
        let v_host = random_tensor(&[copies * batch * HK, lk, D], seed + 2, 1.0)?;
        // every sequence at the cache's last position: the fold reads all of it
        let p = lk as i32 - 1;
        let cs_row: Vec<f32> = {
            let angles: Vec<f64> =
                (0..D / 2).map(|e| p as f64 * llama3_inv_freq(e, D, 500000.0, 8.0, 1.0, 4.0, 8192.0)).collect();
            angles.iter().map(|a| a.cos() as f32).chain(angles.iter().map(|a| a.sin() as f32)).collect()
        };
        let cs = gpu.upload(&Tensor::from_vec(&[batch, D], cs_row.repeat(batch))?)?;
        let pos = gpu.upload(&Tensor::from_vec(&[batch], vec![p; batch])?)?;
        let qkv = gpu.upload(&qkv_host)?;
        let (mut kc, mut vc) = (gpu.upload(&k_host)?, gpu.upload(&v_host)?);
        let mut y = gpu.poisoned::<bf16>(&[batch, HK * G * D])?;
        let one = |c: usize, kc: &mut CudaTensor<bf16>, vc: &mut CudaTensor<bf16>, y: &mut CudaTensor<bf16>| {
            let (h0, h1) = (c * batch * HK, (c + 1) * batch * HK);
            elapsed(launch(
                gpu,
                &*qkv.rows(c * batch..(c + 1) * batch)?,
                &pos,
                &cs,
                &mut *kc.rows_mut(h0..h1)?,
                &mut *vc.rows_mut(h0..h1)?,
                y,
            ))
        };
        let c = copies - 1;
        one(c, &mut kc, &mut vc, &mut y)?;
        let yd = gpu.download(&y)?;
        let mut s = Sample::new(format!("whole-head attention B={batch} L={lk} ({fold})"));
        for b in spread(batch, 3) {
            for kh in [0, HK - 1] {
                let bh = (c * batch + b) * HK + kh;
                let q = &qkv_host.as_slice()[(c * batch + b) * row + kh * (G + 2) * D..][..(G + 2) * D];
                let want = heads_ref(
                    q,
                    &k_host.as_slice()[bh * lk * D..(bh + 1) * lk * D],
                    &v_host.as_slice()[bh * lk * D..(bh + 1) * lk * D],
                    p,
                    G,
                    D,
                );
                for (i, w) in want.into_iter().enumerate() {
                    s.add(yd.as_slice()[b * HK * G * D + kh * G * D + i].to_f32(), w);
                }
            }
        }
        s.check(TOL)?;
        let t = measure(out.runs, |i| one(i % copies, &mut kc, &mut vc, &mut y))?;
        out.row(Row {
            op: if tc { "attention whole heads" } else { "attention whole heads (simt)" },
            shape: &format!("KV {lk}, 8 kv x 4 q, d128"),
            batch,
            form: "standalone",
            tile: &format!("{h} heads x {} tasks", batch * HK / h),
            secs: t,
            bytes: (kv_bytes + batch * (row + HK * G * D) * 2) as f64,
            note: &format!(
                "K+V+qkv+out, {fold}; {copies} cache copies rotated ({:.0} MB)",
                (copies * kv_bytes) as f64 / 1e6
            ),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 4. The prefetched GEMV chain

type ChainLaunch<'a> =
    &'a dyn Fn(&Cuda, &CudaTensor<bf16>, &CudaTensor<bf16>, &mut CudaTensor<bf16>) -> et_core::Result<LaunchReport>;

fn chain_all(gpu: &Cuda, out: &mut Out) -> Res<()> {
    let configs: [(usize, usize, usize, ChainLaunch<'_>, ChainLaunch<'_>); 4] = [
        (1024, 8, 128, &|g, w, x, h| chain_pre_1k::launch(g, w, x, h), &|g, w, x, h| chain_post_1k::launch(g, w, x, h)),
        (2048, 16, 128, &|g, w, x, h| chain_pre_2k::launch(g, w, x, h), &|g, w, x, h| {
            chain_post_2k::launch(g, w, x, h)
        }),
        (4096, 16, 256, &|g, w, x, h| chain_pre_4k::launch(g, w, x, h), &|g, w, x, h| {
            chain_post_4k::launch(g, w, x, h)
        }),
        (4096, 32, 128, &|g, w, x, h| chain_pre_4k_32::launch(g, w, x, h), &|g, w, x, h| {
            chain_post_4k_32::launch(g, w, x, h)
        }),
    ];
    let mut hops = std::collections::HashMap::new();
    for (ci, (d, nt, rt, pre, post)) in configs.into_iter().enumerate() {
        let step_bytes = d * d * 2;
        let steps = POOL_BYTES.div_ceil(step_bytes).max(8).next_power_of_two();
        // the synchronisation of the same chain with no op: its per-step time is the hop
        if let std::collections::hash_map::Entry::Vacant(e) = hops.entry(rt) {
            let anchor = gpu.upload(&Tensor::<f32>::zeros(&[steps]))?;
            let sync = |g: &Cuda, a: &CudaTensor<f32>| match rt {
                128 => chain_sync_128::launch(g, a),
                _ => chain_sync_256::launch(g, a),
            };
            let t = measure(out.runs, |_| elapsed(sync(gpu, &anchor)))? / steps as f64;
            out.row(Row {
                op: "chain sync only (hop)",
                shape: &format!("{steps} steps"),
                batch: 0,
                form: "resident chain",
                tile: &format!("{rt} tasks per step"),
                secs: t,
                bytes: 0.0,
                note: "per step: each task waits for all of the previous step (range wait)",
            });
            e.insert(t);
        }
        let hop = hops[&rt];
        // weights scaled so that activations keep their size along the chain
        let w_host = random_tensor(&[steps * d, d], 300 + ci as u64, (3.0 / d as f32).sqrt())?;
        let w = gpu.upload(&w_host)?;
        let transfer = (step_bytes + 4 * d) as f64 / out.copy_bw;
        let target = transfer.max(hop);
        for (what, launch) in [("prefetch before wait", pre), ("copy after wait", post)] {
            let x_host = random_tensor(&[1, d], 400 + ci as u64, 1.0)?;
            let x = gpu.upload(&x_host)?;
            let mut h = gpu.poisoned::<bf16>(&[steps, d])?;
            elapsed(launch(gpu, &w, &x, &mut h))?;
            // every step against W[l] times the kernel's own previous step (no drift)
            let hd = gpu.download(&h)?;
            let mut s = Sample::new(format!("gemv chain {d} ({what})"));
            for l in 0..steps {
                let input = if l == 0 { x_host.as_slice() } else { &hd.as_slice()[(l - 1) * d..l * d] };
                for r in spread(d, 32) {
                    let want = dot(&w_host.as_slice()[(l * d + r) * d..(l * d + r + 1) * d], input);
                    s.add(hd.as_slice()[l * d + r].to_f32(), want);
                }
            }
            s.check(TOL)?;
            let t = measure(out.runs, |i| {
                let xd = gpu.upload(&random_tensor(&[1, d], 500 + i as u64, 1.0)?)?;
                elapsed(launch(gpu, &w, &xd, &mut h))
            })? / steps as f64;
            out.row(Row {
                op: &format!("gemv chain, {what}"),
                shape: &format!("{d}->{d}, {steps} steps"),
                batch: 1,
                form: "resident chain",
                tile: &format!("{nt} rows x {rt} tasks"),
                secs: t,
                bytes: (step_bytes + 4 * d) as f64,
                note: &format!(
                    "per step; max(transfer {:.2}, hop {:.2}) = {:.2} us: {:.2}x of it",
                    transfer * 1e6,
                    hop * 1e6,
                    target * 1e6,
                    t / target
                ),
            });
        }
    }
    Ok(())
}
