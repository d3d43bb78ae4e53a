//! Runs the split-K megakernels on the GPU when there is one (else on the CPU backend),
//! checks them against plain sequential references and prints the result and the time.
//!
//!     cargo run -p splitk --release [-- --m 8 --n 8 --rows 64 --cpu]

use std::time::Instant;

use clap::Parser;

use et_core::prelude::*;
use et_core::relative_error;
use splitk::{K_SLICE, SPLITS, TILE, gemm_reference, row_sum_reference, split_row_sum, splitk_gemm};

/// The most GEMM tiles per side: 32768 rows or columns, whose split-K partials (`[4 m, n]`
/// f32) take 17 GB. Larger sizes do not fit a GPU, and would abort on an allocation (or
/// run for days on the CPU reference) instead of stopping with a usage error.
const MAX_TILES: i64 = 1024;
/// The most row-sum blocks: 2^21 rows of 128 f32, 1 GiB.
const MAX_ROW_BLOCKS: i64 = 65536;

/// Split-K GEMM and split row sum as megakernels, checked against sequential references.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Sizes {
    /// Output row tiles of the GEMM (32 rows each), at most 1024.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=MAX_TILES))]
    m: u32,
    /// Output column tiles of the GEMM (32 columns each), at most 1024.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=MAX_TILES))]
    n: u32,
    /// 32-row blocks of the row sum, at most 65536.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=MAX_ROW_BLOCKS))]
    rows: u32,
    /// Run on the CPU backend even where there is a GPU.
    #[arg(long)]
    cpu: bool,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let s = Sizes::parse();
    if s.cpu {
        let cpu = Cpu::new();
        println!("running on the CPU backend ({}), as asked", cpu.describe());
        return run_on(&cpu, &s);
    }
    match et_device::Cuda::new(0) {
        Ok(gpu) => {
            println!("running on the GPU: {}", gpu.describe());
            run_on(&gpu, &s)
        }
        Err(why) => {
            let cpu = Cpu::new();
            println!("no GPU ({why}); running on the CPU backend: {}", cpu.describe());
            run_on(&cpu, &s)
        }
    }
}

fn run_on<B: Backend>(backend: &B, s: &Sizes) -> Result<(), Box<dyn std::error::Error>> {
    let (m, n, k) = (s.m as usize * TILE, s.n as usize * TILE, SPLITS * K_SLICE);
    let a = Tensor::<bf16>::random(&[m, k], 1);
    let b = Tensor::<bf16>::random(&[k, n], 2);
    let (da, db) = (backend.upload(&a)?, backend.upload(&b)?);
    let mut part = backend.upload(&Tensor::<f32>::poisoned(&[m * SPLITS, n]))?;
    let mut dc = backend.upload(&Tensor::<bf16>::poisoned(&[m, n]))?;
    let t0 = Instant::now();
    let report = splitk_gemm::launch(backend, &da, &db, &mut part, &mut dc)?;
    let wall = t0.elapsed();
    let c = backend.download(&dc)?;
    let err = relative_error(&c, &gemm_reference(&a, &b));
    println!(
        "splitk_gemm   {m}x{k} . {k}x{n}: {} tasks on {} workers, {:?} schedule, kernel {:.3} ms (first launch, wall {:.3} ms{}), rel. error vs sequential {err:.2e}",
        report.tasks,
        report.workers,
        report.schedule,
        report.elapsed.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e3,
        if report.compiled { ", compiling included" } else { "" }
    );
    println!("  c[0, 0..4] = {:?}", &c.as_slice()[..4].iter().map(|v| v.to_f32()).collect::<Vec<_>>());
    if err > 1e-2 {
        return Err(format!("splitk_gemm disagrees with the reference: relative error {err:.3e}").into());
    }

    let rows = s.rows as usize * 32;
    let x = Tensor::<f32>::random(&[rows, 128], 3);
    let dx = backend.upload(&x)?;
    let mut p = backend.upload(&Tensor::<f32>::poisoned(&[rows, 4]))?;
    let mut dtotal = backend.upload(&Tensor::<f32>::poisoned(&[rows]))?;
    let report = split_row_sum::launch(backend, &dx, &mut p, &mut dtotal)?;
    let total = backend.download(&dtotal)?;
    let err = relative_error(&total, &row_sum_reference(&x));
    println!(
        "split_row_sum {rows}x128: {} tasks, kernel {:.3} ms, rel. error vs sequential {err:.2e}",
        report.tasks,
        report.elapsed.as_secs_f64() * 1e3
    );
    if err > 1e-5 {
        return Err(format!("split_row_sum disagrees with the reference: relative error {err:.3e}").into());
    }
    println!("ok");
    Ok(())
}
