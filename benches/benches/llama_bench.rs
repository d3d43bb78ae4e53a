//! The Llama 3 decode step on the GPU (issue 10): the megakernel (static and dynamic
//! schedule) against the same tile ops launched kernel-per-operator from Rust (on a stream,
//! and replayed from a CUDA graph), and PyTorch's figures from the same card
//! (`--torch-json`, the output of `torch_decode.py`), for every model and batch size that
//! has a stamped megakernel (`llama::Stamp::ALL`) and each KV length.
//!
//! Per-step latency is the median of N steps after warm-up, each timed with CUDA events;
//! the floor is the bytes a step must read (every weight once and the live KV cache) over
//! the 1 GiB device-to-device copy bandwidth measured at the start of the same run. The KV
//! length is data: the baseline's step runs at position `KV - 1`, so it attends over `KV`
//! positions; the megakernel's steps run as generation does (each feeds its tokens back
//! at the next position, so nothing is uploaded), the last one at `KV - 1`.
//! Process start to first token is measured by running this binary again as a child with
//! an empty NVRTC cache (cold) and then the same cache (warm).
//!
//!     cargo bench -p et-benches --bench llama_bench -- --json llama.jsonl --svg llama.svg
//!     .gpu/bin/llama_bench --torch-json torch.jsonl --json llama.jsonl --svg llama.svg

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use et_benches::bandwidth::copy_bandwidth;
use et_benches::llama_baseline::shape::StepBytes;
use et_benches::llama_baseline::{Baseline, Mode};
use et_benches::llama_report::{self as report, FirstTokenRow, Record, StepRow};
use et_benches::{JsonLines, median, read_torch_json, trace_report};
use et_core::{Backend, LaunchOptions, ScheduleKind, Tensor};
use et_device::Cuda;
use llama::{Decoder, LlamaConfig, LlamaWeights, Stamp};

/// Llama 3 decode step: megakernel vs kernel-per-operator vs PyTorch (needs a CUDA GPU).
#[derive(clap::Parser, Debug)]
struct Args {
    /// Models (comma-separated presets); each runs at every batch size it has a stamp for.
    #[arg(long, value_delimiter = ',', default_value = "llama-3.2-1b,llama-3.1-8b")]
    configs: Vec<String>,
    /// Only these batch sizes (comma-separated; default: every stamped one).
    #[arg(long, value_delimiter = ',')]
    batch: Vec<usize>,
    /// KV lengths: positions each step attends over (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1024,8192")]
    kv: Vec<usize>,
    /// Timed steps per figure (the median is reported).
    #[arg(long, default_value_t = 50)]
    steps: usize,
    /// Megakernel schedules to measure (comma-separated: static, dynamic).
    #[arg(long, value_delimiter = ',', value_parser = et_benches::parse_schedule, default_value = "static,dynamic")]
    schedules: Vec<ScheduleKind>,
    /// Warm-up steps before the timed ones.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
    /// Write every row as a JSON line to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Draw the chart (latency against B per variant, with the floor) to this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// JSON lines of `torch_decode.py` (stdout) to include; repeatable.
    #[arg(long)]
    torch_json: Vec<PathBuf>,
    /// Measure nothing: read the step rows of these `--json` files (repeatable) and print
    /// their table and draw `--svg` from them (no GPU needed).
    #[arg(long)]
    replot: Vec<PathBuf>,
    /// Skip the process-start-to-first-token runs.
    #[arg(long)]
    no_first_token: bool,
    /// Print the baseline's GPU time per stage kernel (one step launched with events
    /// between the launches), to set beside the megakernel's trace.
    #[arg(long)]
    stage_profile: bool,
    /// With `--stage-profile`: profile the stages a second time, each launched with the
    /// megakernel's dynamic shared memory (so with its L1), to see what the megakernel's one
    /// arena size costs each op.
    #[arg(long, requires = "stage_profile")]
    stage_profile_megakernel_smem: bool,
    /// CTA sizes to measure the kernel-per-operator baseline at (comma-separated; default:
    /// the megakernel stamp's). Each size other than the stamp's reports its rows as
    /// `baseline graph, N threads` and `baseline stream, N threads`.
    #[arg(long, value_delimiter = ',')]
    baseline_threads: Vec<u32>,
    /// Write a Perfetto trace of one megakernel step per figure into this directory, and
    /// print its figures per tile group for one layer (`--trace-layer`).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The layer whose tasks the trace's per-group figures count (the groups without a
    /// layer index count all their tasks).
    #[arg(long, default_value_t = 5)]
    trace_layer: i64,
    /// Measure nothing: print the per-group figures of these traces (repeatable; no GPU
    /// needed).
    #[arg(long)]
    trace_summary: Vec<PathBuf>,
    /// Internal: run as the first-token child for this model.
    #[arg(long, hide = true)]
    first_token_child: Option<String>,
    /// Internal: the first-token child's batch size.
    #[arg(long, hide = true, default_value_t = 1)]
    first_token_batch: usize,
    /// Accepted and ignored: `cargo bench` passes it to harness-less benches.
    #[arg(long, hide = true)]
    bench: bool,
}

type Res<T> = Result<T, String>;

/// Builds a row of this run: KV length, variant, (median ms, host us), launches per step.
type RowOf<'a> = dyn Fn(usize, &str, (f64, f64), usize) -> Res<StepRow> + 'a;

fn main() {
    use clap::Parser;
    let args = Args::parse();
    let result = match &args.first_token_child {
        Some(config) => first_token_child(config, args.first_token_batch, args.seed),
        None if !args.replot.is_empty() => replot(&args),
        None if !args.trace_summary.is_empty() => {
            args.trace_summary.iter().try_for_each(|p| print_trace(p, args.trace_layer))
        }
        None => run(&args),
    };
    if let Err(e) = result {
        eprintln!("llama_bench: error: {e}");
        std::process::exit(1);
    }
}

/// The per-group figures of the trace at `path` for layer `layer` (a group is per layer
/// when its first tile index ranges over the decode step's `L`, in any stamp: the stamps
/// differ in their norm and attention groups).
fn print_trace(path: &Path, layer: i64) -> Res<()> {
    let per_layer = et_benches::llama_layer_groups()?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let filter = trace_report::LayerFilter { layer, per_layer: &|g: &str| per_layer.contains(&g) };
    let summary = trace_report::summarize(&text, Some(&filter)).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("{} (layer {layer}): {}", path.display(), trace_report::table(&summary));
    Ok(())
}

/// `--replot`: the table and the chart of rows saved by earlier runs.
fn replot(args: &Args) -> Res<()> {
    let mut rows = Vec::new();
    for path in &args.replot {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--replot {}: {e}", path.display()))?;
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let record: Record = serde_json::from_str(line)
                .map_err(|e| format!("--replot {}, line {}: not a llama_bench row: {e}", path.display(), n + 1))?;
            // a figure saved twice (torch rows go into every run that read them) counts once
            if let Record::Step(row) = record
                && !rows.iter().any(|r: &StepRow| {
                    (&r.config, r.batch, r.kv, &r.variant) == (&row.config, row.batch, row.kv, &row.variant)
                })
            {
                rows.push(row);
            }
        }
    }
    println!("{}\n\n{}", report::LEGEND, report::table(&rows));
    if let Some(path) = &args.svg {
        report::chart::write_svg(path, &rows)?;
        println!("chart: {}", path.display());
    }
    Ok(())
}

fn run(args: &Args) -> Res<()> {
    if args.steps == 0 {
        return Err("--steps must be at least 1".into());
    }
    if let Some(k) = args.kv.iter().find(|&&k| k == 0) {
        return Err(format!("--kv {k}: a step attends over at least one position"));
    }
    let torch_texts = read_torch_json(&args.torch_json)?;
    let mut json = JsonLines::create(args.json.as_deref(), "llama_bench")?;
    let mut emit = |r: &Record| json.write(&r.json_line());
    let plan = plan(&args.configs, &args.batch)?;
    let gpu = Cuda::new(0).map_err(|e| e.to_string())?;
    println!("{}; medians of {} steps after {} warm-up steps", gpu.describe(), args.steps, args.warmup);
    let copy_bw = copy_bandwidth(&gpu, 2, 10)?;
    println!("copy bandwidth (1 GiB cuMemcpyDtoD, read + written bytes): {:.3} TB/s\n", copy_bw / 1e12);
    emit(&Record::Copy { bytes_per_s: copy_bw });
    let floor_ms = |config: &str, batch: usize, kv: usize| {
        LlamaConfig::preset(config).ok().map(|c| StepBytes::new(&c, batch, kv).floor_seconds(copy_bw) * 1e3)
    };

    let mut rows = Vec::new();
    for (config, stamps) in &plan {
        let c = LlamaConfig::preset(config).map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        let weights = LlamaWeights::random(&c, args.seed).map_err(|e| e.to_string())?;
        println!("{config}: random weights in {:.1} s", t0.elapsed().as_secs_f64());
        for stamp in stamps {
            let batch = stamp.geometry().batch;
            let bench = Bench {
                gpu: &gpu,
                weights: &weights,
                batch,
                steps: args.steps,
                warmup: args.warmup,
                stage_profile: args.stage_profile,
                stage_profile_megakernel_smem: args.stage_profile_megakernel_smem,
                trace_layer: args.trace_layer,
                schedules: &args.schedules,
                baseline_threads: &args.baseline_threads,
            };
            for r in bench.run(&args.kv, &floor_ms, args.trace.as_deref())? {
                println!("  {config} B = {batch} KV = {}: {:<20} {:>8.3} ms/step", r.kv, r.variant, r.step_ms);
                emit(&Record::Step(r.clone()));
                rows.push(r);
            }
        }
    }
    for (name, text) in &torch_texts {
        let torch = report::torch::torch_rows(text, name, floor_ms)?;
        if torch.is_empty() {
            eprintln!("llama_bench: warning: {name} has no measurement lines");
        }
        for r in torch {
            emit(&Record::Step(r.clone()));
            rows.push(r);
        }
    }
    let mut first = Vec::new();
    if !args.no_first_token {
        for (config, stamps) in &plan {
            let batch = stamps[0].geometry().batch;
            for r in first_token(config, batch, args.seed)? {
                emit(&Record::FirstToken(r.clone()));
                first.push(r);
            }
        }
    }
    println!("\n{}\n\n{}", report::LEGEND, report::table(&rows));
    if !first.is_empty() {
        println!("process start to first token (megakernel, llama::Decoder):\n{}", report::first_token_table(&first));
    }
    if let Some(path) = &args.svg {
        report::chart::write_svg(path, &rows)?;
        println!("chart: {}", path.display());
    }
    Ok(())
}

/// The stamps to run per model, in the order asked: every stamp of the model whose batch
/// is in `batches` (all when empty). Errors for an unknown model or a model with none.
fn plan(configs: &[String], batches: &[usize]) -> Res<Vec<(String, Vec<Stamp>)>> {
    let mut plan = Vec::new();
    for config in configs {
        LlamaConfig::preset(config).map_err(|e| e.to_string())?;
        let stamps: Vec<Stamp> = Stamp::ALL
            .into_iter()
            .filter(|s| s.geometry().preset == config && (batches.is_empty() || batches.contains(&s.geometry().batch)))
            .collect();
        if stamps.is_empty() {
            let have: Vec<String> = Stamp::ALL
                .iter()
                .filter(|s| s.geometry().preset == config)
                .map(|s| s.geometry().batch.to_string())
                .collect();
            return Err(format!(
                "{config}: no decode megakernel is stamped for batch {batches:?} (stamped: {})",
                have.join(", ")
            ));
        }
        plan.push((config.clone(), stamps));
    }
    Ok(plan)
}

/// One model and batch size: its megakernel decoder and its baseline.
struct Bench<'a> {
    gpu: &'a Cuda,
    weights: &'a LlamaWeights,
    batch: usize,
    steps: usize,
    warmup: usize,
    stage_profile: bool,
    /// Profile the stages again at the megakernel's dynamic shared memory.
    stage_profile_megakernel_smem: bool,
    trace_layer: i64,
    schedules: &'a [ScheduleKind],
    /// The baseline's CTA sizes (empty: the stamp's).
    baseline_threads: &'a [u32],
}

/// Median kernel time (ms) and median host time not hidden (µs) of `f`'s steps, each
/// returning (kernel time, host wall).
fn time_steps(warmup: usize, steps: usize, mut f: impl FnMut() -> Res<(Duration, Duration)>) -> Res<(f64, f64)> {
    for _ in 0..warmup {
        f()?;
    }
    let (mut kernel, mut host) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
    for _ in 0..steps {
        let (k, wall) = f()?;
        kernel.push(k.as_secs_f64() * 1e3);
        host.push((wall.as_secs_f64() - k.as_secs_f64()) * 1e6);
    }
    Ok((median(&kernel), median(&host)))
}

impl Bench<'_> {
    /// The tokens of the cross-check step (position 0): a different one per sequence.
    fn check_tokens(&self) -> Vec<u32> {
        let vocab = self.weights.config.vocab_size;
        (0..self.batch).map(|b| ((1 + 7919 * b) % vocab) as u32).collect()
    }

    /// The megakernel's logits of the cross-check step under each measured schedule (a
    /// module each), for [`Bench::cross_check`] against the baseline's.
    fn check_logits(&self, dec: &mut Decoder<'_, Cuda>) -> Res<Vec<(ScheduleKind, Tensor<f32>)>> {
        let (ids, at) = (self.check_tokens(), vec![0; self.batch]);
        let mut out = Vec::new();
        for &schedule in self.schedules {
            dec.options = LaunchOptions { schedule: Some(schedule), trace: None, ..LaunchOptions::default() };
            let step = dec.step(&ids, &at, true).map_err(|e| e.to_string())?;
            out.push((schedule, step.logits.ok_or("the decoder returned no logits")?));
        }
        Ok(out)
    }

    /// The baseline's logits of the cross-check step must agree with the megakernel's
    /// under each schedule within [`llama::LOGIT_TOLERANCE`], or the run's rows are not reported.
    fn cross_check(&self, config: &str, megakernel: &[(ScheduleKind, Tensor<f32>)], bl: &mut Baseline) -> Res<()> {
        let want = bl
            .step(Mode::Graph, &self.check_tokens(), &vec![0; self.batch], true)?
            .logits
            .ok_or("the baseline returned no logits")?;
        let scale = want.as_slice().iter().fold(0f32, |m, v| m.max(v.abs()));
        for (schedule, got) in megakernel {
            let err = got.as_slice().iter().zip(want.as_slice()).fold(0f32, |m, (g, w)| m.max((g - w).abs())) / scale;
            if err.is_nan() || err > llama::LOGIT_TOLERANCE {
                return Err(format!(
                    "{config} B = {} ({schedule:?}): the megakernel's logits differ from the baseline's by {err:.3e} \
                     of the largest",
                    self.batch
                ));
            }
            println!(
                "  {config} B = {} ({schedule:?}): megakernel and baseline logits agree within {err:.1e} of the largest",
                self.batch
            );
        }
        Ok(())
    }

    /// The rows of every KV length: the megakernel first, then the baseline, each with a
    /// cache of the longest length. The two are never resident together: llama-3.1-8b at
    /// B = 64 and KV 8192 takes 85 GB each (a 69 GB cache and 16 GB of weights).
    fn run(
        &self,
        kvs: &[usize],
        floor_ms: &dyn Fn(&str, usize, usize) -> Option<f64>,
        trace: Option<&Path>,
    ) -> Res<Vec<StepRow>> {
        let stamp = Stamp::find(&self.weights.config, self.batch).map_err(|e| e.to_string())?;
        let config = stamp.geometry().preset;
        let positions = kvs.iter().copied().max().ok_or("no KV length to measure")?;
        let e = |e: llama::Error| e.to_string();
        let tokens = vec![1u32; self.batch];
        let row = |kv: usize, variant: &str, (ms, host): (f64, f64), launches| -> Res<StepRow> {
            Ok(StepRow {
                config: config.to_string(),
                batch: self.batch,
                kv,
                variant: variant.to_string(),
                step_ms: ms,
                host_us: Some(host),
                pipelined_host_us: None,
                floor_ms: floor_ms(config, self.batch, kv).ok_or_else(|| format!("no floor for {config}"))?,
                launches: Some(launches),
                steps: self.steps,
                source: "this run".into(),
            })
        };
        let mut rows = Vec::new();
        let mut dec =
            Decoder::new(self.gpu, self.weights, self.batch, positions, LaunchOptions::default()).map_err(e)?;
        println!("  {config} B = {}: KV cache of {positions} positions", self.batch);
        let megakernel_logits = self.check_logits(&mut dec)?;
        for &kv in kvs {
            let positions = vec![kv - 1; self.batch];
            for (variant, schedule) in
                [(report::MEGAKERNEL_STATIC, ScheduleKind::Static), (report::MEGAKERNEL_DYNAMIC, ScheduleKind::Dynamic)]
                    .into_iter()
                    .filter(|(_, s)| self.schedules.contains(s))
            {
                dec.options = LaunchOptions { schedule: Some(schedule), trace: None, ..LaunchOptions::default() };
                // steps as generation runs them: each feeds its tokens back at the next
                // position (the decoder uploads nothing), the last timed one at KV - 1
                let (mut fed, mut at) = (tokens.clone(), kv.saturating_sub(self.warmup + self.steps));
                // the launch's own host phases, to split the host time of the table
                let (mut prepare, mut submit) = (Vec::new(), Vec::new());
                let t = time_steps(self.warmup, self.steps, || {
                    let s = dec.step(&fed, &vec![at; self.batch], false).map_err(e)?;
                    (fed, at) = (s.next.clone(), at + 1);
                    prepare.push(s.report.host_prepare.as_secs_f64() * 1e6);
                    submit.push(s.report.host_submit.as_secs_f64() * 1e6);
                    Ok((s.report.elapsed, s.wall))
                })?;
                let (prepare, submit) = (median(&prepare), median(&submit));
                println!(
                    "  {config} B = {} KV = {kv} {variant}: host {:.1} us a step = launch preparation {prepare:.1} \
                     + driver launch call {submit:.1} + the rest {:.1} (decoder, launch latency, wake-up)",
                    self.batch,
                    t.1,
                    t.1 - prepare - submit
                );
                let mut measured = row(kv, variant, t, 1)?;
                // the same steps launched back to back, as generation runs them: the host
                // time left visible is the GPU's idle time between kernels
                let start = kv.saturating_sub(self.steps + 1);
                dec.step(&fed, &vec![start; self.batch], false).map_err(e)?;
                let run = dec.feed_back(self.steps.min(kv - start - 1), false).map_err(e)?;
                if !run.reports.is_empty() {
                    let n = run.reports.len() as f64;
                    let kernel: Duration = run.reports.iter().map(|r| r.elapsed).sum();
                    let piped = run.wall.saturating_sub(kernel).as_secs_f64() * 1e6 / n;
                    println!(
                        "  {config} B = {} KV = {kv} {variant}: {n} steps back to back: {:.3} ms a step (kernel \
                         {:.3}), host {piped:.1} us a step not hidden",
                        self.batch,
                        run.wall.as_secs_f64() * 1e3 / n,
                        kernel.as_secs_f64() * 1e3 / n,
                    );
                    measured.pipelined_host_us = Some(piped);
                }
                rows.push(measured);
                if let Some(dir) = trace {
                    std::fs::create_dir_all(dir).map_err(|e| format!("--trace {}: {e}", dir.display()))?;
                    let file = dir.join(format!("{config}-b{}-kv{kv}-{schedule:?}.json", self.batch).to_lowercase());
                    dec.options.trace = Some(file.clone());
                    dec.step(&tokens, &positions, false).map_err(e)?;
                    println!("  trace of one step: {}", file.display());
                    print_trace(&file, self.trace_layer)?;
                }
            }
        }
        drop(dec);
        let stamp_threads = stamp.kernel().cuda.block_threads;
        let sizes = if self.baseline_threads.is_empty() { &[stamp_threads][..] } else { self.baseline_threads };
        for &threads in sizes {
            rows.extend(self.baseline_rows(
                config,
                kvs,
                &tokens,
                positions,
                threads,
                stamp_threads,
                &megakernel_logits,
                &row,
            )?);
        }
        Ok(rows)
    }

    /// The baseline's rows at CTAs of `threads` (named as the defaults when that is the
    /// stamp's size), after its cross-check against the megakernel's logits.
    #[allow(clippy::too_many_arguments)]
    fn baseline_rows(
        &self,
        config: &str,
        kvs: &[usize],
        tokens: &[u32],
        positions: usize,
        threads: u32,
        stamp_threads: u32,
        megakernel_logits: &[(ScheduleKind, Tensor<f32>)],
        row: &RowOf,
    ) -> Res<Vec<StepRow>> {
        let mut rows = Vec::new();
        let mut bl = Baseline::new(self.gpu, self.weights, self.batch, positions, threads)?;
        self.cross_check(config, megakernel_logits, &mut bl)?;
        let suffix = if threads == stamp_threads { String::new() } else { format!(", {threads} threads") };
        for &kv in kvs {
            let positions = vec![kv - 1; self.batch];
            if self.stage_profile {
                print_stage_profile(&mut bl, &format!("{config} B = {} KV = {kv}", self.batch), tokens, &positions)?;
            }
            let launches = bl.launches_per_step();
            for (variant, mode) in [(report::BASELINE_STREAM, Mode::Stream), (report::BASELINE_GRAPH, Mode::Graph)] {
                let t = time_steps(self.warmup, self.steps, || {
                    let s = bl.step(mode, tokens, &positions, false)?;
                    Ok((s.kernel, s.wall))
                })?;
                rows.push(row(kv, &format!("{variant}{suffix}"), t, launches)?);
            }
        }
        if self.stage_profile_megakernel_smem {
            // after the timed steps, which keep the stages' own sizes
            let bytes = et_core::abi::launch_smem_bytes(bl.stamp().kernel().arena_bytes());
            bl.reserve_smem(bytes as u32)?;
            for &kv in kvs {
                let what =
                    format!("{config} B = {} KV = {kv}, every stage at {bytes} bytes of shared memory", self.batch);
                print_stage_profile(&mut bl, &what, tokens, &vec![kv - 1; self.batch])?;
            }
        }
        Ok(rows)
    }
}

/// Prints the baseline's GPU time per stage kernel in one step (`Baseline::stage_profile`).
fn print_stage_profile(bl: &mut Baseline, what: &str, tokens: &[u32], positions: &[usize]) -> Res<()> {
    println!("  {what}: baseline GPU time per stage kernel (one step, stream)");
    for (stage, n, us) in bl.stage_profile(tokens, positions)? {
        println!("    {stage:24} {n:4} launches {us:10.1} us total {:8.2} us each", us / n as f64);
    }
    Ok(())
}

/// Runs this binary as a child twice, with fresh compile caches (et's and NVRTC's own: cold)
/// and then the same ones (warm), each timed from spawn to its first token on stdout.
fn first_token(config: &str, batch: usize, seed: u64) -> Res<Vec<FirstTokenRow>> {
    let exe = std::env::current_exe().map_err(|e| format!("locating this binary: {e}"))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let cache = std::env::temp_dir().join(format!("llama_bench_cache_{}_{nanos}", std::process::id()));
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let mut rows = Vec::new();
    for label in ["cold", "warm"] {
        println!("{config} B = {batch}: process start to first token, {label} cache ...");
        let run = || -> Res<FirstTokenRow> {
            let t0 = Instant::now();
            let mut child = Command::new(&exe)
                .args([
                    "--first-token-child",
                    config,
                    "--first-token-batch",
                    &batch.to_string(),
                    "--seed",
                    &seed.to_string(),
                ])
                .env("ET_CACHE_DIR", &cache)
                // NVRTC 13 keeps its own cache of compilations (in the driver's compute cache,
                // which an earlier compile of the same source in this run filled): a fresh
                // one beside et's makes the cold child compile for real
                .env("CUDA_CACHE_PATH", cache.join("nvrtc"))
                .env_remove("ET_TRACE")
                .stdout(Stdio::piped())
                .spawn()
                .map_err(|e| format!("starting {}: {e}", exe.display()))?;
            let stdout = child.stdout.take().ok_or("the child has no stdout")?;
            let mut found = None;
            for line in BufReader::new(stdout).lines() {
                let line = line.map_err(|e| format!("reading the child's output: {e}"))?;
                if let Ok(Record::FirstToken(r)) = serde_json::from_str::<Record>(&line) {
                    found = Some(FirstTokenRow { total_s: t0.elapsed().as_secs_f64(), cache: label.into(), ..r });
                    break;
                }
            }
            let status = child.wait().map_err(|e| format!("waiting for the child: {e}"))?;
            match found {
                Some(r) if status.success() => Ok(r),
                _ => Err(format!("the first-token child for {config} failed ({status}); see its error above")),
            }
        };
        let r = run();
        if r.is_err() || label == "warm" {
            let _ = std::fs::remove_dir_all(&cache);
        }
        rows.push(r?);
    }
    Ok(rows)
}

/// The child: opens the GPU, then compiles the megakernel on one thread while it makes the
/// weights and builds the decoder on this one (as the `llama` binary does), runs one step,
/// and prints its phases as one JSON line.
fn first_token_child(config: &str, batch: usize, seed: u64) -> Res<()> {
    let t0 = Instant::now();
    let gpu = Cuda::new(0).map_err(|e| e.to_string())?;
    let open = t0.elapsed();
    let c = LlamaConfig::preset(config).map_err(|e| e.to_string())?;
    let weights = || LlamaWeights::random(&c, seed);
    let (mut dec, warmup) = Decoder::new_beside_compile(&gpu, &c, batch, 1, LaunchOptions::default(), weights)
        .map_err(|e| e.to_string())?;
    let before_step = t0.elapsed();
    let step = dec.step(&vec![1; batch], &vec![0; batch], false).map_err(|e| e.to_string())?;
    let done = t0.elapsed();
    let row = FirstTokenRow {
        config: config.into(),
        batch,
        cache: String::new(),
        total_s: done.as_secs_f64(),
        open_s: open.as_secs_f64(),
        weights_s: warmup.weights.as_secs_f64(),
        upload_s: warmup.upload.as_secs_f64(),
        first_step_s: (done - before_step).as_secs_f64(),
        compiled: warmup.compiled || step.report.compiled,
        compile_s: warmup.compile.as_secs_f64(),
        prepare_s: warmup.graph.as_secs_f64(),
        compile_wait_s: warmup.waited.as_secs_f64(),
        graph_s: step.report.host_graph.as_secs_f64(),
    };
    println!("{}", Record::FirstToken(row).json_line());
    std::io::stdout().flush().map_err(|e| format!("writing the result: {e}"))
}
