//! Runs the split-K megakernels, checks them against plain sequential references and
//! prints the result and the time.
//!
//!     cargo run -p splitk --release [-- --m 8 --n 8 --rows 64]

use std::time::Instant;

use et_core::prelude::*;
use et_core::relative_error;
use splitk::{K_SLICE, SPLITS, TILE, gemm_reference, row_sum_reference, split_row_sum, splitk_gemm};

struct Sizes {
    m: usize,
    n: usize,
    rows: usize,
}

fn sizes() -> Result<Sizes, String> {
    let mut s = Sizes { m: 4, n: 4, rows: 16 };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let v: usize = value.parse().map_err(|_| format!("{flag} takes a positive whole number, not `{value}`"))?;
        match flag.as_str() {
            "--m" => s.m = v,
            "--n" => s.n = v,
            "--rows" => s.rows = v,
            other => return Err(format!("unknown flag {other}; expected --m, --n, --rows (tile counts)")),
        }
    }
    Ok(s)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let s = sizes()?;
    let backend = Cpu::new();
    println!("backend: {} (no GPU backend is built into this binary)", backend.describe());

    let (m, n, k) = (s.m * TILE, s.n * TILE, SPLITS * K_SLICE);
    let a = Tensor::<bf16>::random(&[m, k], 1);
    let b = Tensor::<bf16>::random(&[k, n], 2);
    let mut part = Tensor::<f32>::poisoned(&[m * SPLITS, n]);
    let mut c = Tensor::<bf16>::poisoned(&[m, n]);
    let t0 = Instant::now();
    let report = splitk_gemm::launch(&backend, &a, &b, &mut part, &mut c)?;
    let wall = t0.elapsed();
    let err = relative_error(&c, &gemm_reference(&a, &b));
    println!(
        "splitk_gemm   {m}x{k} . {k}x{n}: {} tasks, {:?} schedule, kernel {:.3} ms (wall {:.3} ms), rel. error vs sequential {err:.2e}",
        report.tasks,
        report.schedule,
        report.elapsed.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e3
    );
    println!("  c[0, 0..4] = {:?}", &c.as_slice()[..4].iter().map(|v| v.to_f32()).collect::<Vec<_>>());
    if err > 1e-2 {
        return Err(format!("splitk_gemm disagrees with the reference: relative error {err:.3e}").into());
    }

    let rows = s.rows * 32;
    let x = Tensor::<f32>::random(&[rows, 128], 3);
    let mut p = Tensor::<f32>::poisoned(&[rows, 4]);
    let mut total = Tensor::<f32>::poisoned(&[rows]);
    let report = split_row_sum::launch(&backend, &x, &mut p, &mut total)?;
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
