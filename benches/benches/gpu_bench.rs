//! GPU benchmarks of et, printed as a table (and as JSON lines with `--json FILE`):
//!
//! - one dependency hop: a chain of tasks on different SMs, time per task (static, and
//!   dynamic through early dispatch and through the completion path's local slot);
//! - launch overhead of an empty megakernel (host wall time per launch, and kernel time);
//! - cold NVRTC compile and cached load of the split-K kernels;
//! - split-K GEMM as one megakernel against the same tiles as two kernels.
//!
//!     cargo bench -p et-benches --bench gpu_bench -- [--json results.jsonl] [--trace DIR]

use std::io::Write;
use std::time::Instant;

use et_benches::{empty, hop_chain, median, splitk_partials, splitk_reduce};
use et_core::prelude::*;
use et_core::relative_error;
use et_device::{Compiler, Cuda};
use splitk::{K_SLICE, SPLITS, TILE, gemm_reference, split_row_sum, splitk_gemm};

struct Out {
    json: Option<std::fs::File>,
}

impl Out {
    fn row(&mut self, name: &str, value: f64, unit: &str, note: &str) {
        println!("{name:<48} {value:>12.3} {unit:<6} {note}");
        if let Some(f) = &mut self.json {
            let _ = writeln!(f, "{{\"name\":\"{name}\",\"value\":{value},\"unit\":\"{unit}\",\"note\":\"{note}\"}}");
        }
    }
}

/// GPU benchmarks of et (needs a CUDA GPU).
#[derive(clap::Parser, Debug)]
#[command(about)]
struct Args {
    /// Also write every figure as a JSON line to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Write a Perfetto trace of one launch of each dynamic hop chain (1000 steps) into
    /// this directory, and print its figures per tile group: where a hop's time goes.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Accepted and ignored: `cargo bench` passes it to harness-less benches.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    use clap::Parser;
    let args = Args::parse();
    let json = args.json.map(|p| std::fs::File::create(&p).map_err(|e| format!("--json {}: {e}", p.display())));
    let mut out = Out { json: json.transpose()? };
    let gpu = Cuda::new(0)?;
    println!("{}", gpu.describe());

    bare_cuda(&gpu, &mut out)?;
    compile_times(&gpu, &mut out)?;
    hops(&gpu, &mut out)?;
    if let Some(dir) = &args.trace {
        hop_traces(&gpu, dir)?;
    }
    launch_overhead(&gpu, &mut out)?;
    splitk_vs_two_kernels(&gpu, &mut out)?;
    Ok(())
}

/// The floor under et's figures: an empty kernel and a chain of cross-SM hops written
/// directly in CUDA (one counter, acquire spin, release add), no et runtime.
fn bare_cuda(gpu: &Cuda, out: &mut Out) -> Result<(), Box<dyn std::error::Error>> {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let src = r#"
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void hop_chain(unsigned int* counter, unsigned int hops) {
    if (threadIdx.x != 0) return;
    for (unsigned int i = blockIdx.x; i < hops; i += gridDim.x) {
        unsigned int v;
        do { asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory"); } while (v < i);
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" :: "l"(counter), "r"(1u) : "memory");
    }
}
"#;
    let (image, _) = gpu.compiler().compile_source("bare_cuda", src)?;
    let module = gpu.context().load_module(cudarc::nvrtc::Ptx::from_binary(image.image.clone()))?;
    let empty = module.load_function("empty_kernel")?;
    let chain = module.load_function("hop_chain")?;
    let stream = gpu.stream();
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let (start, end) = (gpu.context().new_event(timing)?, gpu.context().new_event(timing)?);
    let grid = LaunchConfig { grid_dim: (gpu.sm_count() as u32, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    let (mut wall, mut kernel) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        let t0 = Instant::now();
        start.record(stream)?;
        // SAFETY: `empty_kernel` takes no arguments.
        unsafe { stream.launch_builder(&empty).launch(grid) }?;
        end.record(stream)?;
        stream.synchronize()?;
        wall.push(t0.elapsed().as_secs_f64());
        kernel.push(start.elapsed_ms(&end)? as f64 / 1e3);
    }
    out.row("bare CUDA empty kernel: host wall per launch", median(&wall) * 1e6, "us", "median of 200; launch + sync");
    out.row(
        "bare CUDA empty kernel: kernel time (events)",
        median(&kernel) * 1e6,
        "us",
        "median of 200; 132 x 128 threads",
    );
    let hops = 10_000u32;
    let mut counter = stream.alloc_zeros::<u32>(1)?;
    let mut times = Vec::new();
    for _ in 0..20 {
        stream.memset_zeros(&mut counter)?;
        start.record(stream)?;
        let mut b = stream.launch_builder(&chain);
        b.arg(&mut counter).arg(&hops);
        // SAFETY: `hop_chain(unsigned int*, unsigned int)` with a live one-word counter;
        // 132 CTAs of 128 threads are co-resident on an H200.
        unsafe { b.launch(grid) }?;
        end.record(stream)?;
        stream.synchronize()?;
        times.push(start.elapsed_ms(&end)? as f64 / 1e3);
    }
    out.row(
        "bare CUDA dependency hop (cross-SM)",
        median(&times) / hops as f64 * 1e6,
        "us",
        "median of 20, chain of 10000",
    );
    Ok(())
}

fn compile_times(gpu: &Cuda, out: &mut Out) -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("et-bench-cache-{}", std::process::id()));
    for k in [&splitk_gemm::KERNEL, &split_row_sum::KERNEL] {
        let cold = Compiler::new(gpu.compiler().arch())?.with_cache_dir(Some(dir.clone()));
        let t0 = Instant::now();
        let (a, compiled) = cold.compile_kernel(k, k.graph.schedule)?;
        let cold_s = t0.elapsed().as_secs_f64();
        assert!(compiled);
        let warm = Compiler::new(gpu.compiler().arch())?.with_cache_dir(Some(dir.clone()));
        let t0 = Instant::now();
        let (b, compiled) = warm.compile_kernel(k, k.graph.schedule)?;
        let warm_s = t0.elapsed().as_secs_f64();
        assert!(!compiled && b.from_disk_cache && a.image == b.image);
        out.row(
            &format!("compile {} (NVRTC, cold)", k.name()),
            cold_s * 1e3,
            "ms",
            &format!("{} bytes of CUBIN", a.image.len()),
        );
        out.row(&format!("load {} from the disk cache", k.name()), warm_s * 1e3, "ms", "second process start");
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// A chain whose step `i` waits on `c[i]` (step `i - 1`) and `k[i]` (its own kick task, a
/// seed): with two producers no step is dispatched early, so under the dynamic schedule
/// each hop is the completion path: the signal's add completes `c[i + 1]`, and the
/// completing CTA takes step `i + 1` into its local slot and runs it next.
#[megakernel(threads = 128)]
pub fn two_producer_hops(anchor: &Tensor<f32, { [N + 1] }>) {
    let c = event!([N + 1]);
    let k = event!([N]);
    tile!(start[z] in [1] {
        signal!(c[0]);
    });
    tile!(kick[i] in [N] {
        signal!(k[i]);
    });
    tile!(step[i] in [N] {
        wait!(k[i]);
        wait!(c[i]);
        signal!(c[i + 1]);
    });
}

/// One traced launch of each dynamic hop chain, its per-group figures printed: a step's
/// wait (its polls), its work (the signal and the consumer walk are in it) and what is
/// left of a hop between one step's end and the next one's start (taking the task).
fn hop_traces(gpu: &Cuda, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--trace {}: {e}", dir.display()))?;
    let n = 1000;
    let anchor = gpu.upload(&Tensor::<f32>::zeros(&[n + 1]))?;
    // hop_chain has N + 1 tasks in a chain, two_producer_hops N steps
    for (name, two, hops) in [("hop_chain", false, n + 1), ("two_producer_hops", true, n)] {
        let file = dir.join(format!("{name}.json"));
        let mut opts = LaunchOptions { schedule: Some(ScheduleKind::Dynamic), trace: None, ..Default::default() };
        let launch = |opts: &LaunchOptions| {
            if two {
                two_producer_hops::launch_with(gpu, opts, &anchor)
            } else {
                hop_chain::launch_with(gpu, opts, &anchor)
            }
        };
        launch(&opts)?; // warm-up (compile, schedule upload)
        opts.trace = Some(file.clone());
        let report = launch(&opts)?;
        let text = std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
        let summary = et_benches::trace_report::summarize(&text, None)?;
        println!(
            "\n{name}, dynamic, traced ({} us a step with the trace's stores): {}",
            report.elapsed.as_secs_f64() * 1e6 / hops as f64,
            file.display()
        );
        print!("{}", et_benches::trace_report::table(&summary));
    }
    Ok(())
}

fn hops(gpu: &Cuda, out: &mut Out) -> Result<(), Box<dyn std::error::Error>> {
    for n in [1000usize, 10000] {
        let anchor = gpu.upload(&Tensor::<f32>::zeros(&[n + 1]))?;
        // round-robin places consecutive tasks of the chain on consecutive CTAs; one CTA
        // keeps the whole chain on one SM
        let runs = [
            (ScheduleKind::Static, None, "static, cross-SM"),
            (ScheduleKind::Static, Some(1), "static, same SM"),
            (ScheduleKind::Dynamic, None, "dynamic: early dispatch, waits in place"),
        ];
        for (schedule, workers, what) in runs {
            let placement = Placement::RoundRobin;
            let opts =
                LaunchOptions { schedule: Some(schedule), placement, workers, trace: None, ..Default::default() };
            hop_chain::launch_with(gpu, &opts, &anchor)?; // warm-up (compile, schedule upload)
            let times: Vec<f64> = (0..20)
                .map(|_| hop_chain::launch_with(gpu, &opts, &anchor).map(|r| r.elapsed.as_secs_f64()))
                .collect::<Result<_, _>>()?;
            let per = median(&times) / (n as f64 + 1.0) * 1e6;
            out.row(&format!("dependency hop, chain of {n} ({what})"), per, "us", "median of 20, kernel time / tasks");
        }
        // the dynamic schedule's completion path, where early dispatch does not apply
        let opts = LaunchOptions { schedule: Some(ScheduleKind::Dynamic), trace: None, ..Default::default() };
        two_producer_hops::launch_with(gpu, &opts, &anchor)?;
        let times: Vec<f64> = (0..20)
            .map(|_| two_producer_hops::launch_with(gpu, &opts, &anchor).map(|r| r.elapsed.as_secs_f64()))
            .collect::<Result<_, _>>()?;
        out.row(
            &format!("dependency hop, chain of {n} (dynamic: two producers a step, local slot)"),
            median(&times) / n as f64 * 1e6,
            "us",
            "median of 20, kernel time / steps",
        );
    }
    Ok(())
}

fn launch_overhead(gpu: &Cuda, out: &mut Out) -> Result<(), Box<dyn std::error::Error>> {
    let anchor = gpu.upload(&Tensor::<f32>::zeros(&[1]))?;
    empty::launch(gpu, &anchor)?;
    let mut wall = Vec::new();
    let mut kernel = Vec::new();
    for _ in 0..200 {
        let t0 = Instant::now();
        let r = empty::launch(gpu, &anchor)?;
        wall.push(t0.elapsed().as_secs_f64());
        kernel.push(r.elapsed.as_secs_f64());
    }
    out.row(
        "empty megakernel: host wall per launch",
        median(&wall) * 1e6,
        "us",
        "median of 200; resolve + launch + sync + checks",
    );
    out.row(
        "empty megakernel: kernel time (events)",
        median(&kernel) * 1e6,
        "us",
        "median of 200; one task on 132 CTAs",
    );
    Ok(())
}

fn splitk_vs_two_kernels(gpu: &Cuda, out: &mut Out) -> Result<(), Box<dyn std::error::Error>> {
    for (mt, nt) in [(8usize, 8usize), (32, 32)] {
        let (m, n, k) = (mt * TILE, nt * TILE, SPLITS * K_SLICE);
        let mut mega = Vec::new();
        let mut mega_dynamic = Vec::new();
        let mut two = Vec::new();
        for rep in 0..10u64 {
            // fresh random inputs every repetition, outputs poisoned
            let a = Tensor::<bf16>::random(&[m, k], 1000 + rep);
            let b = Tensor::<bf16>::random(&[k, n], 2000 + rep);
            let (da, db) = (gpu.upload(&a)?, gpu.upload(&b)?);
            let mut part = gpu.poisoned::<f32>(&[m * SPLITS, n])?;
            let mut c = gpu.poisoned::<bf16>(&[m, n])?;
            let r = splitk_gemm::launch(gpu, &da, &db, &mut part, &mut c)?;
            if rep > 0 {
                mega.push(r.elapsed.as_secs_f64());
            }
            let dynamic = LaunchOptions { schedule: Some(ScheduleKind::Dynamic), trace: None, ..Default::default() };
            let mut c3 = gpu.poisoned::<bf16>(&[m, n])?;
            let r = splitk_gemm::launch_with(gpu, &dynamic, &da, &db, &mut part, &mut c3)?;
            if rep > 0 {
                mega_dynamic.push(r.elapsed.as_secs_f64());
            }
            if rep == 1 {
                let err = relative_error(&gpu.download(&c)?, &gemm_reference(&a, &b));
                assert!(err < 1e-2, "megakernel error {err}");
            }
            let mut part2 = gpu.poisoned::<f32>(&[m * SPLITS, n])?;
            let mut c2 = gpu.poisoned::<bf16>(&[m, n])?;
            let r1 = splitk_partials::launch(gpu, &da, &db, &mut part2)?;
            let r2 = splitk_reduce::launch(gpu, &part2, &mut c2)?;
            if rep > 0 {
                two.push(r1.elapsed.as_secs_f64() + r2.elapsed.as_secs_f64());
            }
            if rep == 1 {
                let err = relative_error(&gpu.download(&c2)?, &gpu.download(&c)?);
                assert!(err == 0.0, "two-kernel result differs from the megakernel: {err}");
                let err = relative_error(&gpu.download(&c3)?, &gpu.download(&c)?);
                assert!(err == 0.0, "the dynamic schedule's result differs from the static one: {err}");
            }
        }
        let (tm, tt) = (median(&mega), median(&two));
        let bytes = (2 * m * k + 2 * k * n + 2 * 4 * SPLITS * m * n + 2 * m * n) as f64;
        let flops = 2.0 * (m * n * k) as f64;
        let note = format!("M=N={m}, K={k}; median of 9, fresh inputs");
        out.row(&format!("splitk GEMM {m}x{n}: megakernel"), tm * 1e6, "us", &note);
        out.row(
            &format!("splitk GEMM {m}x{n}: megakernel, dynamic schedule"),
            median(&mega_dynamic) * 1e6,
            "us",
            &note,
        );
        out.row(
            &format!("splitk GEMM {m}x{n}: two kernels (sum of kernel times)"),
            tt * 1e6,
            "us",
            "launch gaps not included",
        );
        out.row(&format!("splitk GEMM {m}x{n}: two kernels / megakernel"), tt / tm, "x", "kernel time ratio");
        out.row(
            &format!("splitk GEMM {m}x{n}: megakernel throughput"),
            flops / tm / 1e12,
            "TFLOP/s",
            &format!("{:.0} GB/s over {:.1} MB moved", bytes / tm / 1e9, bytes / 1e6),
        );
    }
    Ok(())
}
