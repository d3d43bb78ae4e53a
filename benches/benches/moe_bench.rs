//! The MoE layer on the GPU (issue 11): the megakernel with routing inside the launch
//! (static and dynamic schedule) against the same tile ops launched kernel-per-operator
//! from Rust (`et_benches::moe_baseline`: with the host sync for the group sizes, and at
//! capacity without it), and PyTorch's figures from the same card (`--torch-json`, the
//! output of `moe_torch.py`), for each token count with a stamped megakernel and each
//! routing skew.
//!
//! Latency is the median of N runs after warm-up, each timed with CUDA events, the input
//! rotated over fresh token sets of the same skew (so the experts a run reads are not the
//! ones the previous run left in L2, unless the skew routes every token to the same ones);
//! the floor is the bytes of the experts touched, the router and the tokens over the 1 GiB
//! device-to-device copy bandwidth measured at the start of the same run.
//!
//!     cargo bench -p et-benches --bench moe_bench -- --json moe.jsonl
//!     .gpu/bin/moe_bench --torch-json moe_torch.jsonl --json moe.jsonl --trace traces/

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use et_benches::bandwidth::copy_bandwidth;
use et_benches::moe_baseline::floor::{floor_ms, layer_bytes, touched_experts};
use et_benches::moe_baseline::report::{self, MoeRow, Record};
use et_benches::moe_baseline::torch::torch_rows;
use et_benches::moe_baseline::{Mode, MoeBaseline};
use et_benches::{JsonLines, median, read_torch_json};
use et_core::{Backend, LaunchOptions, ScheduleKind, Tensor, bf16};
use et_device::Cuda;
use moe::layer::{MegaLayer, stamped_tokens};
use moe::{MoeConfig, MoeWeights, Output, weights};

/// MoE layer: megakernel vs kernel-per-operator vs PyTorch (needs a CUDA GPU).
#[derive(clap::Parser, Debug)]
struct Args {
    /// Layer shapes: qwen3-moe or tiny.
    #[arg(long, default_value = "qwen3-moe")]
    config: String,
    /// Token counts (comma-separated; default: every count the megakernel is stamped for).
    #[arg(long, value_delimiter = ',')]
    tokens: Vec<usize>,
    /// Routing skews in [0, 1] (comma-separated): the share of tokens biased onto experts 0..K.
    #[arg(long, value_delimiter = ',', default_value = "0,0.5,1")]
    skew: Vec<f64>,
    /// Megakernel schedules to measure (comma-separated: static, dynamic).
    #[arg(long, value_delimiter = ',', value_parser = et_benches::parse_schedule, default_value = "static,dynamic")]
    schedules: Vec<ScheduleKind>,
    /// Timed runs per figure (the median is reported).
    #[arg(long, default_value_t = 50)]
    runs: usize,
    /// Warm-up runs before the timed ones.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Fresh token sets per token count and skew, rotated over the runs.
    #[arg(long, default_value_t = 8)]
    inputs: usize,
    /// Seed of the random weights and token sets.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
    /// Write every row as a JSON line to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// JSON lines of `moe_torch.py` (stdout) to include; repeatable.
    #[arg(long)]
    torch_json: Vec<PathBuf>,
    /// Write a Perfetto trace of one megakernel launch per schedule, token count and skew
    /// into this directory.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Accepted and ignored: `cargo bench` passes it to harness-less benches.
    #[arg(long, hide = true)]
    bench: bool,
}

type Res<T> = Result<T, String>;

fn main() {
    use clap::Parser;
    if let Err(e) = run(&Args::parse()) {
        eprintln!("moe_bench: error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Res<()> {
    if args.runs == 0 || args.inputs == 0 {
        return Err("--runs and --inputs must be at least 1".into());
    }
    if let Some(s) = args.skew.iter().find(|s| !(0.0..=1.0).contains(*s)) {
        return Err(format!("--skew {s} is not in [0, 1]"));
    }
    let cfg = MoeConfig::preset(&args.config)?;
    let stamped = stamped_tokens(&cfg);
    let tokens = if args.tokens.is_empty() { stamped.to_vec() } else { args.tokens.clone() };
    if let Some(t) = tokens.iter().find(|t| !stamped.contains(t)) {
        return Err(format!("{}: no megakernel stamped at {t} tokens (stamped: {stamped:?})", args.config));
    }
    let torch_texts = read_torch_json(&args.torch_json)?;
    let mut json = JsonLines::create(args.json.as_deref(), "moe_bench")?;
    let mut emit = |r: &Record| json.write(&r.json_line());
    let gpu = Cuda::new(0).map_err(|e| format!("no CUDA GPU to benchmark on ({e})"))?;
    println!(
        "{}; medians of {} runs after {} warm-up runs, over {} token sets",
        gpu.describe(),
        args.runs,
        args.warmup,
        args.inputs
    );
    let copy_bw = copy_bandwidth(&gpu, 2, 10)?;
    println!("copy bandwidth (1 GiB cuMemcpyDtoD, read + written bytes): {:.3} TB/s\n", copy_bw / 1e12);
    emit(&Record::Copy { bytes_per_s: copy_bw });

    let t0 = Instant::now();
    let w = MoeWeights::random(&cfg, args.seed)?;
    println!("{}: random weights in {:.1} s", args.config, t0.elapsed().as_secs_f64());
    let mut rows = Vec::new();
    for &t in &tokens {
        let bench = Bench { gpu: &gpu, w: &w, config: &args.config, tokens: t, args, copy_bw };
        for r in bench.run()? {
            println!(
                "  {} T = {t} skew {}: {:<20} {:>8.3} ms ({:.1}% of the floor)",
                args.config,
                r.skew,
                r.variant,
                r.ms,
                100.0 * r.fraction_of_floor()
            );
            emit(&Record::Layer(r.clone()));
            rows.push(r);
        }
    }
    for (name, text) in &torch_texts {
        let torch = torch_rows(text, name, copy_bw)?;
        if torch.is_empty() {
            eprintln!("moe_bench: warning: {name} has no measurement lines");
        }
        for r in torch {
            emit(&Record::Layer(r.clone()));
            rows.push(r);
        }
    }
    println!("\n{}\n\n{}", report::LEGEND, report::table(&rows));
    Ok(())
}

/// One token count: its megakernels (static, dynamic) and its baseline, at every skew.
struct Bench<'a> {
    gpu: &'a Cuda,
    w: &'a MoeWeights,
    config: &'a str,
    tokens: usize,
    args: &'a Args,
    copy_bw: f64,
}

/// One timed figure: median GPU time (ms), median host time not hidden (µs), mean launches.
struct Timing {
    ms: f64,
    host_us: f64,
    launches: f64,
}

/// Times `f(input index)` (returning GPU time, host wall and launches) over `warmup` then
/// `runs` calls, the input index rotating over `inputs`.
fn time_runs(
    warmup: usize,
    runs: usize,
    inputs: usize,
    mut f: impl FnMut(usize) -> Res<(Duration, Duration, usize)>,
) -> Res<Timing> {
    for i in 0..warmup {
        f(i % inputs)?;
    }
    let (mut gpu, mut host, mut launches) = (Vec::with_capacity(runs), Vec::with_capacity(runs), 0);
    for i in 0..runs {
        let (k, wall, n) = f((warmup + i) % inputs)?;
        gpu.push(k.as_secs_f64() * 1e3);
        host.push((wall.as_secs_f64() - k.as_secs_f64()) * 1e6);
        launches += n;
    }
    Ok(Timing { ms: median(&gpu), host_us: median(&host), launches: launches as f64 / runs as f64 })
}

/// The worst |difference| of two outputs relative to `b`'s largest |out|, and whether
/// their routing is the same.
fn agreement(a: &Output, b: &Output) -> (bool, f32) {
    let scale = b.out.as_slice().iter().fold(0f32, |m, v| m.max(v.to_f32().abs())).max(1e-6);
    let err = a.out.as_slice().iter().zip(b.out.as_slice()).fold(0f32, |m, (x, y)| {
        let d = (x.to_f32() - y.to_f32()).abs();
        if d.is_nan() { f32::INFINITY } else { m.max(d) }
    });
    (a.topk.as_slice() == b.topk.as_slice(), err / scale)
}

impl Bench<'_> {
    fn run(&self) -> Res<Vec<MoeRow>> {
        let (t, a) = (self.tokens, self.args);
        let layer = |schedule, trace: Option<PathBuf>| {
            MegaLayer::new(self.gpu, self.w, t, LaunchOptions { schedule: Some(schedule), trace, ..Default::default() })
        };
        let mut mk =
            [(report::MEGAKERNEL_STATIC, ScheduleKind::Static), (report::MEGAKERNEL_DYNAMIC, ScheduleKind::Dynamic)]
                .into_iter()
                .filter(|(_, s)| a.schedules.contains(s))
                .map(|(v, s)| Ok((v, s, layer(s, None)?)))
                .collect::<Res<Vec<_>>>()?;
        let mut bl = MoeBaseline::new(self.gpu, self.w, t)?;
        let mut rows = Vec::new();
        for &skew in &a.skew {
            let inputs: Vec<Tensor<bf16>> = (0..a.inputs as u64)
                .map(|i| weights::tokens(self.w, t, skew, a.seed.wrapping_add(1000 * i + 1)))
                .collect::<Res<_>>()?;
            let mut touched = Vec::new();
            for x in &inputs {
                touched.push(touched_experts(self.w, x)?);
            }
            let experts = touched.iter().sum::<usize>() as f64 / touched.len() as f64;
            let floor = touched.iter().map(|&n| floor_ms(layer_bytes(&self.w.config, t, n), self.copy_bw)).sum::<f64>()
                / touched.len() as f64;
            let row = |variant: &str, tm: &Timing| MoeRow {
                config: self.config.to_string(),
                tokens: t,
                skew,
                variant: variant.to_string(),
                ms: tm.ms,
                host_us: Some(tm.host_us),
                floor_ms: floor,
                experts,
                launches: Some(tm.launches),
                runs: a.runs,
                source: "this run".into(),
            };
            let mut outputs = Vec::new();
            for (variant, schedule, layer) in &mut mk {
                let tm = time_runs(a.warmup, a.runs, inputs.len(), |i| {
                    layer.set_input(&inputs[i])?;
                    let t0 = Instant::now();
                    let report = layer.launch()?;
                    Ok((report.elapsed, t0.elapsed(), 1))
                })?;
                rows.push(row(variant, &tm));
                outputs.push((*variant, layer.forward(&inputs[0])?));
                if let Some(dir) = &a.trace {
                    self.trace(dir, *schedule, skew, &inputs[0])?;
                }
            }
            for (variant, mode) in
                [(report::BASELINE_SYNC, Mode::HostSync), (report::BASELINE_CAPACITY, Mode::Capacity)]
            {
                let tm = time_runs(a.warmup, a.runs, inputs.len(), |i| {
                    bl.set_input(&inputs[i])?;
                    let r = bl.run(mode)?;
                    Ok((r.kernel, r.wall, r.launches))
                })?;
                rows.push(row(variant, &tm));
                bl.poison()?;
                bl.set_input(&inputs[0])?;
                bl.run(mode)?;
                outputs.push((variant, bl.output()?));
            }
            // the figures are of the same computation: every variant against the first one measured
            for (variant, out) in &outputs[1..] {
                let (routing, err) = agreement(out, &outputs[0].1);
                if !routing || err > 2e-2 {
                    return Err(format!(
                        "T = {t} skew {skew}: {variant} disagrees with the {} (same routing: {routing}, max error \
                         {err:.3e} of the largest output)",
                        outputs[0].0
                    ));
                }
            }
        }
        Ok(rows)
    }

    /// Writes a trace of one launch of the megakernel under `schedule` on the tokens `x`.
    fn trace(&self, dir: &Path, schedule: ScheduleKind, skew: f64, x: &Tensor<bf16>) -> Res<()> {
        std::fs::create_dir_all(dir).map_err(|e| format!("--trace {}: {e}", dir.display()))?;
        let file = dir.join(format!("{}-t{}-skew{skew}-{schedule:?}.json", self.config, self.tokens).to_lowercase());
        let options = LaunchOptions { schedule: Some(schedule), trace: Some(file.clone()), ..Default::default() };
        MegaLayer::new(self.gpu, self.w, self.tokens, options)?.forward(x)?;
        println!("  trace of one launch: {}", file.display());
        Ok(())
    }
}
