//! Kernels that the benchmark binaries time: a dependency chain (the cost of one hop),
//! an empty megakernel (launch overhead), and the split-K GEMM cut into two kernels (the
//! kernel-per-operator baseline of `splitk::splitk_gemm`); the decode operators
//! ([`ops`]); the copy bandwidth every floor is measured against ([`bandwidth`]); and the
//! Llama decode benchmark's kernel-per-operator baseline ([`llama_baseline`]) and its
//! table, JSON lines and chart ([`llama_report`]); the per-group figures of a trace
//! ([`trace_report`]); the functions of a CUBIN and their code sizes ([`cubin`]).

pub mod bandwidth;
pub mod cubin;
pub mod llama_baseline;
pub mod llama_report;
pub mod moe_baseline;
pub mod ops;
pub mod trace_report;

use et_core::prelude::*;

/// `N` tasks in a chain: step `i` waits for step `i - 1`. With round-robin placement
/// consecutive steps run on different SMs, so each step is one cross-SM hop.
#[megakernel(threads = 128)]
pub fn hop_chain(anchor: &Tensor<f32, { [N + 1] }>) {
    let e = event!([N + 1]);
    tile!(start[z] in [1] {
        signal!(e[0]);
    });
    tile!(step[i] in [N] {
        wait!(e[i]);
        signal!(e[i + 1]);
    });
}

/// One task that does nothing: what a launch costs.
#[megakernel(threads = 128)]
pub fn empty(anchor: &Tensor<f32, { [1] }>) {
    tile!(nop[z] in [1] {});
}

/// The partial tiles of `splitk_gemm`, alone: the first of two kernels.
#[megakernel(dims(S = 4), threads = 128)]
pub fn splitk_partials(
    a: &Tensor<bf16, { [M * 32, S * 256] }>,
    b: &Tensor<bf16, { [S * 256, N * 32] }>,
    part: &mut Tensor<f32, { [M * S * 32, N * 32] }>,
) {
    tile!(partial[m, n, s] in [M, N, S] {
        matmul(a.tile([m, s], [32, 256]), b.tile([s, n], [256, 32]), part.tile([m * S + s, n], [32, 32]));
    });
}

/// The reduce tiles of `splitk_gemm`, alone: the second of two kernels.
#[megakernel(dims(S = 4), threads = 128)]
pub fn splitk_reduce(part: &Tensor<f32, { [M * S * 32, N * 32] }>, c: &mut Tensor<bf16, { [M * 32, N * 32] }>) {
    tile!(reduce[m, n] in [M, N] {
        sum_splits(part.tile([m, n], [S * 32, 32]), c.tile([m, n], [32, 32]));
    });
}

/// The tile groups of the Llama decode stamps that run once per layer: those whose first
/// tile index ranges over the step's `L` (the stamps differ in their norm and attention
/// groups, so this takes the union over every stamp).
pub fn llama_layer_groups() -> Result<Vec<&'static str>, String> {
    let mut per_layer = Vec::new();
    for stamp in llama::Stamp::ALL {
        let graph = &stamp.kernel().graph;
        let l = graph.dims.iter().position(|d| &*d.name == "L").ok_or("the decode step has no dim L")?;
        let layered = et_core::graph::Affine::term(et_core::graph::Term::Dim(l as u16));
        per_layer.extend(graph.groups.iter().filter(|g| g.domain.first() == Some(&layered)).map(|g| &*g.name));
    }
    Ok(per_layer)
}

/// Median of a sample (sorted copy).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() { f64::NAN } else { s[s.len() / 2] }
}

/// A schedule named on a benchmark's command line (`static` or `dynamic`), for
/// `--schedules`: measuring one alone halves a run's device time.
pub fn parse_schedule(name: &str) -> Result<ScheduleKind, String> {
    match name {
        "static" => Ok(ScheduleKind::Static),
        "dynamic" => Ok(ScheduleKind::Dynamic),
        other => Err(format!("`{other}` is not a schedule: static or dynamic")),
    }
}

/// The `--torch-json` files a benchmark was given, read whole: `(path, text)` each, or an
/// error naming the file that could not be read.
pub fn read_torch_json(paths: &[std::path::PathBuf]) -> Result<Vec<(String, String)>, String> {
    paths
        .iter()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| (p.display().to_string(), t))
                .map_err(|e| format!("--torch-json {}: {e}", p.display()))
        })
        .collect()
}

/// Where a benchmark writes its records, one JSON object a line (`--json FILE`), if
/// anywhere. A write that fails is a warning on stderr, not the end of a run whose
/// figures are still printed.
pub struct JsonLines {
    file: Option<std::fs::File>,
    bench: &'static str,
}

impl JsonLines {
    /// Creates (truncates) `path`, or writes nowhere without one; `bench` names the
    /// benchmark in warnings.
    pub fn create(path: Option<&std::path::Path>, bench: &'static str) -> Result<Self, String> {
        let file = match path {
            Some(p) => Some(std::fs::File::create(p).map_err(|e| format!("--json {}: {e}", p.display()))?),
            None => None,
        };
        Ok(JsonLines { file, bench })
    }

    /// Writes one record's line.
    pub fn write(&mut self, line: &str) {
        use std::io::Write;
        if let Some(f) = &mut self.file
            && let Err(e) = writeln!(f, "{line}")
        {
            eprintln!("{}: warning: writing the JSON line failed: {e}", self.bench);
        }
    }
}
