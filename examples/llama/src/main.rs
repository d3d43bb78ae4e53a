//! `llama`: greedy decoding with the decode megakernel (every layer in one launch per
//! step) on the GPU where there is one, else on the CPU backend.
//!
//!     cargo run -p llama --release [-- --config tiny --tokens 16 --batch 2 --cpu]
//!     cargo run -p llama --release -- --prompt-ids 1,2,3/40,41 --tokens 8   (two sequences)

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use et_core::{Backend, LaunchOptions};
use et_device::OnBackend;
use llama::{Decoder, LlamaConfig, LlamaWeights};

/// Greedy Llama 3 decoding, one megakernel launch per step.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Model shapes: tiny, llama-3.2-1b or llama-3.1-8b [default: llama-3.2-1b on a GPU, tiny on the CPU].
    #[arg(long)]
    config: Option<String>,
    /// A Hugging Face model directory (config.json + *.safetensors) instead of random weights.
    #[arg(long)]
    weights: Option<PathBuf>,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The prompts' token ids, comma-separated, with `/` between the prompts of different
    /// sequences (`1,2,3/40,41`); a single prompt is every sequence's.
    #[arg(long, default_value = "1,2,3", value_parser = parse_prompts)]
    prompt_ids: Prompts,
    /// Tokens to generate per sequence.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    tokens: u32,
    /// Sequences per step, 1 to 64 (tiny: 1 to 4) [default: the number of prompts]. The
    /// megakernels are stamped for batches 1, 8, 32 and 64 (tiny: 1 to 4); a batch between
    /// them runs on the next larger one, its spare slots idle.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    batch: Option<u32>,
    /// Writes the last step's logits [batch, vocab] (f32) to this .npy file.
    #[arg(long)]
    logits: Option<PathBuf>,
    /// Run on the CPU backend even where there is a GPU.
    #[arg(long)]
    cpu: bool,
}

/// The prompts of `--prompt-ids`, one or one per sequence.
#[derive(Clone, Debug)]
struct Prompts(Vec<Vec<u32>>);

fn parse_prompts(text: &str) -> Result<Prompts, String> {
    let prompt = |p: &str| -> Result<Vec<u32>, String> {
        let ids = p.split(',').map(|id| id.trim().parse::<u32>().map_err(|e| format!("token id `{id}`: {e}")));
        let ids = ids.collect::<Result<Vec<u32>, String>>()?;
        if ids.is_empty() { Err("an empty prompt".into()) } else { Ok(ids) }
    };
    text.split('/').map(prompt).collect::<Result<_, _>>().map(Prompts)
}

impl Args {
    /// The prompt of each sequence: `--prompt-ids` for every sequence of `--batch`, or one
    /// each.
    fn prompts(&self) -> Result<Vec<Vec<u32>>, String> {
        let given = &self.prompt_ids.0;
        match (given.len(), self.batch.map(|b| b as usize)) {
            (1, batch) => Ok(vec![given[0].clone(); batch.unwrap_or(1)]),
            (_, None) => Ok(given.clone()),
            (n, Some(batch)) if n == batch => Ok(given.clone()),
            (n, Some(batch)) => {
                Err(format!("{n} prompts for --batch {batch}: give one prompt (every sequence's) or one per sequence"))
            }
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    et_device::auto_backend(args.cpu, Decode(&args))
}

/// Decoding on the backend `auto_backend` picks: llama-3.2-1b by default on the GPU, tiny on the CPU.
struct Decode<'a>(&'a Args);

impl OnBackend for Decode<'_> {
    type Output = Result<(), Box<dyn std::error::Error>>;

    fn run<B: Backend>(self, backend: &B, gpu: bool) -> Self::Output {
        decode(backend, self.0, if gpu { "llama-3.2-1b" } else { "tiny" }, gpu)
    }
}

fn decode<B: Backend>(
    backend: &B,
    args: &Args,
    default_config: &str,
    gpu: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let prompts = args.prompts()?;
    let batch = prompts.len();
    // created now so that a path that cannot be written fails before the run, not after
    let logits = args.logits.as_deref().map(llama::npy::NpyFile::create).transpose()?;
    let config = match &args.weights {
        Some(dir) => LlamaConfig::from_model_dir(dir)?,
        None => LlamaConfig::preset(args.config.as_deref().unwrap_or(default_config))?,
    };
    if let (Some(name), Some(_)) = (&args.config, &args.weights)
        && llama::Stamp::find(&LlamaConfig::preset(name)?, batch)? != llama::Stamp::find(&config, batch)?
    {
        return Err(format!("--config {name} does not have the shapes of the weights in the directory").into());
    }
    // the cache holds what generation attends over: the prompt and the tokens fed back
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(1);
    let positions = (longest + args.tokens as usize).saturating_sub(1).max(1);
    if gpu {
        println!("compiling the megakernel with NVRTC (or reading it from the disk cache) while the weights load ...");
    }
    let weights = || match &args.weights {
        Some(dir) => {
            println!("loading {}", dir.display());
            LlamaWeights::load(dir)
        }
        None => {
            let name = args.config.as_deref().unwrap_or(default_config);
            println!("random weights of {name} (seed {})", args.seed);
            LlamaWeights::random(&config, args.seed)
        }
    };
    let (mut decoder, warmup) =
        Decoder::new_beside_compile(backend, &config, batch, positions, LaunchOptions::default(), weights)?;
    if gpu {
        let how = if warmup.compiled { "compiled with NVRTC" } else { "loaded from the disk cache" };
        println!(
            "megakernel {how} in {:.2} s, and its task graph prepared in {:.2} s, beside the weights",
            warmup.compile.as_secs_f64(),
            warmup.graph.as_secs_f64()
        );
    }
    let slots = decoder.stamp().geometry().batch;
    println!(
        "megakernel {:?}: {} layers, batch {batch}{}, KV cache of {} positions",
        decoder.stamp(),
        config.num_layers,
        if slots > batch { format!(" ({} idle slots)", slots - batch) } else { String::new() },
        decoder.max_positions()
    );
    let (mut first, mut kernel, mut n) = (Duration::ZERO, Duration::ZERO, 0u32);
    let t0 = Instant::now();
    let run = decoder.generate(&prompts, args.tokens as usize, |pos, step| {
        if pos == 0 {
            first = t0.elapsed();
            let r = &step.report;
            let host = if gpu {
                format!(
                    "; host {:.1} ms: the task graph resolved and uploaded {:.1} ms, the module {:.1} ms{}",
                    r.host_prepare.as_secs_f64() * 1e3,
                    r.host_graph.as_secs_f64() * 1e3,
                    r.host_module.as_secs_f64() * 1e3,
                    if r.compiled { ", compiling included" } else { "" }
                )
            } else {
                String::new()
            };
            println!(
                "first step {:.1} ms ({} tasks on {} workers{host})",
                step.wall.as_secs_f64() * 1e3,
                r.tasks,
                r.workers
            );
        } else {
            kernel += step.report.elapsed;
            n += 1;
        }
    })?;
    let total = t0.elapsed();
    for (b, tokens) in run.tokens.iter().enumerate() {
        let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
        println!("sequence {b}: {}", ids.join(","));
    }
    if n > 0 {
        // wall time, host included: the steps after the prompt run back to back
        let per_step = total.saturating_sub(first) / n;
        println!(
            "{n} steps after the first: {:.3} ms per step (kernel {:.3} ms), {:.1} tokens/s ({} sequences)",
            per_step.as_secs_f64() * 1e3,
            (kernel / n).as_secs_f64() * 1e3,
            batch as f64 / per_step.as_secs_f64(),
            batch
        );
    }
    println!("total {:.2} s (first step {:.2} s)", total.as_secs_f64(), first.as_secs_f64());
    if let Some(file) = logits {
        let path = file.path().to_path_buf();
        file.write(&run.logits)?;
        println!("wrote the last step's logits {:?} to {}", run.logits.shape(), path.display());
    }
    Ok(())
}
