//! Cold NVRTC compile time of every registered megakernel (no GPU needed: NVRTC only), with
//! the size of its CUDA source: the figure behind "a cold compile stays under 2 s".
//!
//!     cargo bench -p et-benches --bench compile_bench [-- --arch sm_90a]

use clap::Parser;
use std::time::Instant;

// the kernels of these crates register themselves when linked
use splitk as _;
use ui_tests as _;

/// Cold NVRTC compile of every registered megakernel.
#[derive(Parser, Debug)]
#[command(about)]
struct Args {
    /// Target architecture.
    #[arg(long, default_value = "sm_90a")]
    arch: String,
    /// Accepted and ignored: `cargo bench` passes it to harness-less benches.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // no disk cache: every compile is cold
    let compiler = et_device::Compiler::new(&args.arch)?.with_cache_dir(None);
    println!("{:<32} {:>10} {:>12}", "megakernel", "cold (ms)", "source (B)");
    for entry in et_core::registered_kernels() {
        let source = entry.kernel.cuda_source();
        let t0 = Instant::now();
        compiler.compile_source(entry.kernel.name(), &source)?;
        println!("{:<32} {:>10.1} {:>12}", entry.kernel.name(), t0.elapsed().as_secs_f64() * 1e3, source.len());
    }
    Ok(())
}
