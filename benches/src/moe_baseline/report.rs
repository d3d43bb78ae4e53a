//! The MoE benchmark's results: one row per variant, token count and routing skew, printed
//! as a table and written as JSON lines (one [`Record`] a line).

use serde::{Deserialize, Serialize};

pub use crate::llama_report::{MEGAKERNEL_DYNAMIC, MEGAKERNEL_STATIC};

/// The kernel-per-operator baseline with the host sync for the group sizes.
pub const BASELINE_SYNC: &str = "baseline host sync";
/// The kernel-per-operator baseline launching every expert at capacity (no host sync).
pub const BASELINE_CAPACITY: &str = "baseline capacity";
/// `moe_torch.py`: the Hugging Face-style loop over the experts that got tokens.
pub const TORCH_LOOP: &str = "torch expert loop";
/// `moe_torch.py`: sort by expert and `torch._grouped_mm`.
pub const TORCH_GROUPED: &str = "torch grouped_mm";
/// The same under a CUDA graph.
pub const TORCH_GROUPED_GRAPH: &str = "torch grouped graph";

/// Every variant, in the order of the table.
pub const VARIANTS: [&str; 7] = [
    MEGAKERNEL_STATIC,
    MEGAKERNEL_DYNAMIC,
    BASELINE_SYNC,
    BASELINE_CAPACITY,
    TORCH_GROUPED_GRAPH,
    TORCH_GROUPED,
    TORCH_LOOP,
];

/// One measured figure: a variant's latency for one layer at a token count and skew.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoeRow {
    /// The layer preset (`qwen3-moe`).
    pub config: String,
    /// Tokens per layer.
    pub tokens: usize,
    /// Routing skew (`moe::weights::tokens`); PyTorch's random routing counts as 0.
    pub skew: f64,
    /// One of [`VARIANTS`].
    pub variant: String,
    /// Median latency per layer (CUDA events), milliseconds.
    pub ms: f64,
    /// Median host wall per layer minus its GPU time, µs.
    pub host_us: Option<f64>,
    /// The floor: bytes of the experts touched, router and tokens / this run's bandwidth, ms
    /// (the mean over the inputs).
    pub floor_ms: f64,
    /// Experts touched (the mean over the inputs).
    pub experts: f64,
    /// Kernel launches per layer (the mean over the inputs; the megakernel: 1).
    pub launches: Option<f64>,
    /// Runs the median is of.
    pub runs: usize,
    /// Where the figure comes from (`this run`, or the PyTorch file).
    pub source: String,
}

impl MoeRow {
    /// The fraction of the floor reached: floor / latency.
    pub fn fraction_of_floor(&self) -> f64 {
        self.floor_ms / self.ms
    }
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
    /// A layer's latency.
    Layer(MoeRow),
}

impl Record {
    /// The record as one JSON line (no newline).
    pub fn json_line(&self) -> String {
        serde_json::to_string(self).expect("records are plain data")
    }
}

/// How to read the table (printed above it).
pub const LEGEND: &str = "\
ms        median latency per layer over N runs after warm-up (CUDA events), the inputs
          rotated over fresh token sets of the same skew
host us   median host wall per layer minus its GPU time
floor     (weights of the experts touched + router + tokens in and out) / the 1 GiB copy
          bandwidth of this run
% floor   floor / latency
x mk      latency / the static-schedule megakernel's at the same T and skew
experts   experts touched (mean over the inputs); launches: kernels per layer (mean)";

/// The rows as a table, grouped by config, token count and skew.
pub fn table(rows: &[MoeRow]) -> String {
    let mut out = format!(
        "{:<10} {:>5} {:>5}  {:<20} {:>8} {:>8} {:>8} {:>8} {:>6} {:>7} {:>8}  source\n",
        "config", "T", "skew", "variant", "ms", "host us", "floor ms", "% floor", "x mk", "experts", "launches"
    );
    out.push_str(&"-".repeat(113));
    out.push('\n');
    let mut sorted: Vec<&MoeRow> = rows.iter().collect();
    let rank = |v: &str| VARIANTS.iter().position(|x| *x == v).unwrap_or(VARIANTS.len());
    sorted.sort_by(|a, b| {
        (&a.config, a.tokens, a.skew, rank(&a.variant))
            .partial_cmp(&(&b.config, b.tokens, b.skew, rank(&b.variant)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for r in sorted {
        let mk = rows
            .iter()
            .find(|m| m.variant == MEGAKERNEL_STATIC && (&m.config, m.tokens, m.skew) == (&r.config, r.tokens, r.skew));
        let ratio = mk.map_or("-".to_string(), |m| format!("{:.2}", r.ms / m.ms));
        let host = r.host_us.map_or("-".to_string(), |h| format!("{h:.1}"));
        let launches = r.launches.map_or("-".to_string(), |n| format!("{n:.1}"));
        out.push_str(&format!(
            "{:<10} {:>5} {:>5.2}  {:<20} {:>8.3} {:>8} {:>8.4} {:>7.1}% {:>6} {:>7.1} {:>8}  {}\n",
            r.config,
            r.tokens,
            r.skew,
            r.variant,
            r.ms,
            host,
            r.floor_ms,
            100.0 * r.fraction_of_floor(),
            ratio,
            r.experts,
            launches,
            r.source
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn row(tokens: usize, skew: f64, variant: &str, ms: f64) -> MoeRow {
        MoeRow {
            config: "qwen3-moe".into(),
            tokens,
            skew,
            variant: variant.into(),
            ms,
            host_us: Some(3.0),
            floor_ms: 0.02,
            experts: 8.0,
            launches: Some(1.0),
            runs: 50,
            source: "this run".into(),
        }
    }

    #[test]
    fn records_round_trip_as_one_json_object_per_line() {
        for r in [Record::Copy { bytes_per_s: 4.4e12 }, Record::Layer(row(16, 0.5, BASELINE_SYNC, 0.3))] {
            let line = r.json_line();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Record>(&line).unwrap(), r);
        }
        let line = Record::Layer(row(1, 0.0, MEGAKERNEL_STATIC, 0.1)).json_line();
        assert!(line.starts_with("{\"kind\":\"layer\",\"config\":\"qwen3-moe\",\"tokens\":1,\"skew\":0.0"), "{line}");
    }

    #[test]
    fn the_table_orders_variants_and_gives_ratios_to_the_static_megakernel() {
        let rows =
            vec![row(1, 0.0, BASELINE_SYNC, 0.2), row(1, 0.0, MEGAKERNEL_STATIC, 0.08), row(1, 1.0, TORCH_LOOP, 2.0)];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        assert!(lines[2].contains(MEGAKERNEL_STATIC) && lines[2].contains(" 1.00 "), "{t}");
        // 0.2 / 0.08, and the floor 0.02 / 0.2
        assert!(lines[3].contains(BASELINE_SYNC) && lines[3].contains(" 2.50 ") && lines[3].contains("10.0%"), "{t}");
        // no megakernel at skew 1: no ratio
        assert!(lines[4].contains(TORCH_LOOP) && lines[4].contains("     - "), "{t}");
    }
}
