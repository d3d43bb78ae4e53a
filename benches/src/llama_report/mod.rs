//! The Llama decode benchmark's results: rows of per-step latency, printed as a table,
//! written as JSON lines, read back from PyTorch's script ([`torch`]) and drawn as a chart
//! ([`chart`]).

pub mod chart;
pub mod torch;

use serde::{Deserialize, Serialize};

/// The megakernel, static schedule.
pub const MEGAKERNEL_STATIC: &str = "megakernel static";
/// The megakernel, dynamic schedule.
pub const MEGAKERNEL_DYNAMIC: &str = "megakernel dynamic";
/// The same tile ops, one kernel per stage and layer, launched on a stream.
pub const BASELINE_STREAM: &str = "baseline stream";
/// The same launches replayed from a CUDA graph.
pub const BASELINE_GRAPH: &str = "baseline graph";
/// PyTorch eager (`torch_decode.py`).
pub const TORCH_EAGER: &str = "torch eager";
/// PyTorch under a CUDA graph.
pub const TORCH_GRAPH: &str = "torch graph";
/// `torch.compile` (max-autotune) under a CUDA graph.
pub const TORCH_COMPILED: &str = "torch compile+graph";

/// Every variant, in the order of the table and the chart's legend.
pub const VARIANTS: [&str; 7] =
    [MEGAKERNEL_STATIC, MEGAKERNEL_DYNAMIC, BASELINE_GRAPH, BASELINE_STREAM, TORCH_COMPILED, TORCH_GRAPH, TORCH_EAGER];

/// One measured figure: a variant's per-step latency at one model, batch and KV length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    /// The model preset (`llama-3.2-1b`).
    pub config: String,
    /// Sequences per step.
    pub batch: usize,
    /// Positions each sequence attends over.
    pub kv: usize,
    /// One of [`VARIANTS`].
    pub variant: String,
    /// Median per-step latency (CUDA events), milliseconds.
    pub step_ms: f64,
    /// Median host time per step not hidden by the GPU (host wall − kernel time), µs.
    pub host_us: Option<f64>,
    /// The megakernel's host time per step not hidden when its steps are launched back to
    /// back without waiting (`Decoder::feed_back`): (wall of the steps − their kernel
    /// times) / steps, µs.
    #[serde(default)]
    pub pipelined_host_us: Option<f64>,
    /// The floor of this model, batch and KV length: bytes / copy bandwidth, ms.
    pub floor_ms: f64,
    /// Kernel launches per step (the megakernel: 1).
    pub launches: Option<usize>,
    /// Steps the median is of.
    pub steps: usize,
    /// Where the figure comes from (`this run`, or the PyTorch file).
    pub source: String,
}

impl StepRow {
    /// The fraction of the floor reached: floor / latency (1 is the floor itself).
    pub fn fraction_of_floor(&self) -> f64 {
        self.floor_ms / self.step_ms
    }
}

/// Process start to the first generated token of the megakernel (`llama::Decoder`):
/// spawn to the token on stdout, with the child's own phases.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FirstTokenRow {
    /// The model preset.
    pub config: String,
    /// Sequences.
    pub batch: usize,
    /// `cold` (an empty NVRTC cache) or `warm` (the same cache again).
    pub cache: String,
    /// Spawn to the token read from the child's stdout, seconds.
    pub total_s: f64,
    /// In the child: opening the GPU (CUDA context, NVRTC).
    pub open_s: f64,
    /// In the child: the random weights on the CPU.
    pub weights_s: f64,
    /// In the child: packing and uploading them (`Decoder::new`).
    pub upload_s: f64,
    /// In the child: the first step, the task graph's resolution and upload included (the
    /// module is loaded before it since run 44; rows of earlier runs include the compile
    /// here, and their `compile_s` reads 0).
    pub first_step_s: f64,
    /// Whether NVRTC ran (on the thread that compiles beside the weights).
    pub compiled: bool,
    /// In the child, on its own thread from the start of the weights: compiling (or reading
    /// from the disk cache) and loading the megakernel's module.
    #[serde(default)]
    pub compile_s: f64,
    /// In the child, on that thread after the compile: resolving the first step's task
    /// graph and uploading its tables (`Decoder::prepare`; 0 in rows before run 45).
    #[serde(default)]
    pub prepare_s: f64,
    /// In the child: how long the first step waited for that thread after the upload.
    #[serde(default)]
    pub compile_wait_s: f64,
    /// The part of the first step that resolved the task graph and uploaded its tables
    /// (0 when the thread beside the weights had prepared it).
    #[serde(default)]
    pub graph_s: f64,
}

/// One line of the JSON output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// The copy bandwidth of the run (bytes read + written per second).
    Copy {
        /// Bytes per second.
        bytes_per_s: f64,
    },
    /// A per-step latency.
    Step(StepRow),
    /// A process-start-to-first-token time.
    FirstToken(FirstTokenRow),
}

impl Record {
    /// The record as one JSON line (no newline).
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).expect("records are plain data")
    }
}

/// How to read the table (printed above it).
pub const LEGEND: &str = "\
ms/step   median per-step latency over N steps after warm-up (CUDA events around the step)
host us   median host wall per step minus its kernel time: what the GPU did not hide
          (megakernel: Decoder::step, its uploads of ids and positions included;
          baseline: writing ids and positions, issuing the launches, waiting)
floor     (weight bytes + KV bytes read per step) / the 1 GiB copy bandwidth of this run
% floor   floor / latency
x mk      latency / the megakernel's static-schedule latency at the same model, B and KV";

/// The step rows as a table, grouped by model, KV length and batch.
pub fn table(rows: &[StepRow]) -> String {
    let mut out = format!(
        "{:<14} {:>4} {:>6}  {:<20} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>9}  source\n",
        "config", "B", "KV", "variant", "ms/step", "host us", "piped us", "floor ms", "% floor", "x mk", "launches"
    );
    out.push_str(&"-".repeat(128));
    out.push('\n');
    let mut sorted: Vec<&StepRow> = rows.iter().collect();
    let rank = |v: &str| VARIANTS.iter().position(|x| *x == v).unwrap_or(VARIANTS.len());
    sorted.sort_by(|a, b| {
        (&a.config, a.kv, a.batch, rank(&a.variant)).cmp(&(&b.config, b.kv, b.batch, rank(&b.variant)))
    });
    for r in sorted {
        let mk = rows
            .iter()
            .find(|m| m.variant == MEGAKERNEL_STATIC && (&m.config, m.batch, m.kv) == (&r.config, r.batch, r.kv));
        let ratio = mk.map_or("-".to_string(), |m| format!("{:.2}", r.step_ms / m.step_ms));
        let host = r.host_us.map_or("-".to_string(), |h| format!("{h:.1}"));
        let piped = r.pipelined_host_us.map_or("-".to_string(), |h| format!("{h:.1}"));
        let launches = r.launches.map_or("-".to_string(), |n| n.to_string());
        out.push_str(&format!(
            "{:<14} {:>4} {:>6}  {:<20} {:>9.3} {:>9} {:>9} {:>9.3} {:>7.1}% {:>7} {:>9}  {}\n",
            r.config,
            r.batch,
            r.kv,
            r.variant,
            r.step_ms,
            host,
            piped,
            r.floor_ms,
            100.0 * r.fraction_of_floor(),
            ratio,
            launches,
            r.source
        ));
    }
    out
}

/// The first-token rows as a table.
pub fn first_token_table(rows: &[FirstTokenRow]) -> String {
    let mut out = format!(
        "{:<14} {:>4} {:<5} {:>8} {:>7} {:>9} {:>8} {:>9} {:>9} {:>7} {:>10} {:>8} {:>8}\n",
        "config",
        "B",
        "cache",
        "total s",
        "open s",
        "weights s",
        "upload s",
        "compile s",
        "prepare s",
        "wait s",
        "1st step s",
        "graph s",
        "compiled"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<14} {:>4} {:<5} {:>8.2} {:>7.2} {:>9.2} {:>8.2} {:>9.2} {:>9.2} {:>7.2} {:>10.3} {:>8.3} {:>8}\n",
            r.config,
            r.batch,
            r.cache,
            r.total_s,
            r.open_s,
            r.weights_s,
            r.upload_s,
            r.compile_s,
            r.prepare_s,
            r.compile_wait_s,
            r.first_step_s,
            r.graph_s,
            r.compiled
        ));
    }
    out.push_str(
        "(compile s, then prepare s, run on their own thread from the start of the weights; wait s is the part of \
         them after the upload)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn row(config: &str, batch: usize, kv: usize, variant: &str, step_ms: f64) -> StepRow {
        StepRow {
            config: config.into(),
            batch,
            kv,
            variant: variant.into(),
            step_ms,
            host_us: Some(4.5),
            pipelined_host_us: None,
            floor_ms: 0.5,
            launches: Some(1),
            steps: 50,
            source: "this run".into(),
        }
    }

    #[test]
    fn records_round_trip_as_one_json_object_per_line() {
        let records = vec![
            Record::Copy { bytes_per_s: 4.2e12 },
            Record::Step(row("llama-3.2-1b", 8, 1024, BASELINE_GRAPH, 1.25)),
            Record::FirstToken(FirstTokenRow {
                config: "llama-3.2-1b".into(),
                batch: 1,
                cache: "cold".into(),
                total_s: 9.5,
                open_s: 0.3,
                weights_s: 5.0,
                upload_s: 1.0,
                first_step_s: 0.2,
                compiled: true,
                compile_s: 4.1,
                prepare_s: 0.11,
                compile_wait_s: 0.0,
                graph_s: 0.12,
            }),
        ];
        for r in &records {
            let line = r.json_line();
            assert!(!line.contains('\n'));
            assert_eq!(&serde_json::from_str::<Record>(&line).unwrap(), r);
        }
        let step = records[1].json_line();
        assert!(step.starts_with("{\"kind\":\"step\",\"config\":\"llama-3.2-1b\",\"batch\":8,\"kv\":1024"), "{step}");
        assert!(records[0].json_line().contains("\"kind\":\"copy\""));
    }

    #[test]
    fn the_table_orders_variants_and_gives_ratios_to_the_static_megakernel() {
        let rows = vec![
            row("llama-3.2-1b", 1, 1024, BASELINE_STREAM, 2.0),
            row("llama-3.2-1b", 1, 1024, MEGAKERNEL_STATIC, 0.8),
            row("llama-3.2-1b", 8, 1024, TORCH_EAGER, 5.0),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[2].contains(MEGAKERNEL_STATIC) && lines[2].contains(" 1.00 "), "{t}");
        // 2.0 / 0.8, and the floor 0.5 / 2.0
        assert!(lines[3].contains(BASELINE_STREAM) && lines[3].contains(" 2.50 ") && lines[3].contains("25.0%"), "{t}");
        // no megakernel at B = 8: no ratio
        assert!(lines[4].contains(TORCH_EAGER) && lines[4].contains("      - "), "{t}");
        assert_eq!(rows[1].fraction_of_floor(), 0.625);
    }
}
