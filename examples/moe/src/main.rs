//! `moe`: one MoE layer (Qwen3-30B-A3B shapes, or `tiny`) on random weights, checked
//! against the sequential reference.
//!
//!     cargo run -p moe --release [-- --tokens 8 --skew 0.5 --iters 5]
//!
//! Until the layer's megakernel (`src/layer.rs`) is in the module tree, this runs the
//! layer's tile ops one by one on the host in the capacity layout (`moe::host`), on the
//! `tiny` config by default; the megakernel run (GPU when there is one, with
//! `--schedule`) replaces that call once the routing DSL lands.

use std::time::Instant;

use clap::{Parser, ValueEnum};
use moe::{MoeConfig, MoeWeights, Reference, host, weights};

/// The megakernel's schedule.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Schedule {
    Static,
    Dynamic,
}

/// One MoE layer, checked against the sequential reference.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Layer shapes: qwen3-moe or tiny.
    #[arg(long, default_value = "tiny")]
    config: String,
    /// Tokens in the batch.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    tokens: u32,
    /// Routing skew in [0, 1]: the share of tokens biased (through their input) onto experts 0..K.
    #[arg(long, default_value_t = 0.0)]
    skew: f64,
    /// The megakernel's schedule (the op-by-op host run has none).
    #[arg(long, value_enum, default_value_t = Schedule::Static)]
    schedule: Schedule,
    /// Seed of the weights and tokens.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timed runs (the median is printed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args = Args::parse();
    let cfg = MoeConfig::preset(&args.config)?;
    let t = args.tokens as usize;
    let w = MoeWeights::random(&cfg, args.seed)?;
    let x = weights::tokens(&w, t, args.skew, args.seed)?;
    println!("config {} {cfg:?}, {t} tokens, skew {}, seed {}", args.config, args.skew, args.seed);
    println!(
        "backend: CPU, the layer's tile ops one by one on the host (schedule {:?} applies to the megakernel)",
        args.schedule
    );
    let mut times = Vec::new();
    let mut got = None;
    for _ in 0..args.iters {
        let t0 = Instant::now();
        got = Some(host::forward(&w, &x)?.0);
        times.push(t0.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let got = got.ok_or("no run")?;
    let want = Reference::new(&w).forward(&x)?;
    let routing = got.topk.as_slice() == want.topk.as_slice();
    let err = got
        .out
        .as_slice()
        .iter()
        .zip(want.out.as_slice())
        .fold(0f32, |m, (g, r)| m.max((g.to_f32() - r.to_f32()).abs()));
    let scale = want.out.as_slice().iter().fold(0f32, |m, v| m.max(v.to_f32().abs()));
    let mut used: Vec<i32> = got.topk.as_slice().to_vec();
    used.sort();
    used.dedup();
    println!("latency {:.3} ms (median of {})", times[times.len() / 2] * 1e3, times.len());
    println!(
        "experts used: {}; routing equal to the reference: {routing}; output max error {err:.3e} (largest |out| {scale:.3e})",
        used.len()
    );
    if !routing || err > 1e-2 * scale.max(1e-6) {
        return Err("the layer does not match the reference".into());
    }
    println!("check: OK");
    Ok(())
}
