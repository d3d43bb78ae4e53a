//! Reading the JSON lines of `moe_torch.py` (PyTorch on the same card: the expert loop,
//! sort + `torch._grouped_mm`, and the latter under a CUDA graph) into rows of the table.
//!
//! The script prints one object per token count: `T`, `experts_touched`, `floor_ms`,
//! `loop_ms` and, unless `_grouped_mm` failed (then `grouped_error`), `grouped_ms` and
//! `grouped_graph_ms`. Its layer is Qwen3-30B-A3B's with random routing, so its rows are
//! `qwen3-moe` at skew 0; their floor is recomputed here from `experts_touched` and this
//! run's bandwidth, so that every variant is measured against one bandwidth.

use serde::Deserialize;

use super::floor::{floor_ms, layer_bytes};
use super::report::{MoeRow, TORCH_GROUPED, TORCH_GROUPED_GRAPH, TORCH_LOOP};
use moe::MoeConfig;

/// One measurement line of the script.
#[derive(Deserialize)]
struct Line {
    #[serde(rename = "T")]
    tokens: usize,
    experts_touched: usize,
    loop_ms: f64,
    grouped_ms: Option<f64>,
    grouped_graph_ms: Option<f64>,
}

/// The rows of the script's output `text` (from `source`, named in messages and in the
/// rows); `bytes_per_s` is this run's bandwidth. Lines that are not JSON objects, or
/// objects without `T`, are skipped; an object with `T` that lacks a figure is an error
/// naming its line.
pub fn torch_rows(text: &str, source: &str, bytes_per_s: f64) -> Result<Vec<MoeRow>, String> {
    let cfg = MoeConfig::QWEN3_MOE;
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line.trim()) else { continue };
        if value.get("T").is_none() {
            continue;
        }
        let at = || format!("{source}, line {}", n + 1);
        let m: Line = serde_json::from_value(value).map_err(|e| format!("{}: {e}", at()))?;
        if m.experts_touched > cfg.experts {
            return Err(format!("{}: {} experts touched of {}", at(), m.experts_touched, cfg.experts));
        }
        let floor = floor_ms(layer_bytes(&cfg, m.tokens, m.experts_touched), bytes_per_s);
        let figures =
            [(TORCH_LOOP, Some(m.loop_ms)), (TORCH_GROUPED, m.grouped_ms), (TORCH_GROUPED_GRAPH, m.grouped_graph_ms)];
        for (variant, ms) in figures {
            let Some(ms) = ms else { continue };
            if !(ms > 0.0 && ms.is_finite()) {
                return Err(format!("{}: `{variant}` time {ms} ms is not a positive number", at()));
            }
            rows.push(MoeRow {
                config: "qwen3-moe".into(),
                tokens: m.tokens,
                skew: 0.0,
                variant: variant.to_string(),
                ms,
                host_us: None,
                floor_ms: floor,
                experts: m.experts_touched as f64,
                launches: None,
                runs: 0,
                source: source.to_string(),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = r#"{"T": 1, "experts_touched": 8, "floor_ms": 0.0169, "loop_ms": 2.26, "grouped_err": 0.003, "grouped_ms": 0.83, "grouped_graph_ms": 0.41}
/usr/lib/python3/dist-packages/torch: UserWarning: something
{"T": 16, "experts_touched": 77, "floor_ms": 0.15, "loop_ms": 9.5, "grouped_error": "RuntimeError('no')"}
"#;

    #[test]
    fn reads_every_figure_and_skips_other_lines() {
        let rows = torch_rows(OUTPUT, "moe_torch.jsonl", 4.5e12).unwrap();
        let got: Vec<(usize, &str, f64)> = rows.iter().map(|r| (r.tokens, r.variant.as_str(), r.ms)).collect();
        assert_eq!(
            got,
            [(1, TORCH_LOOP, 2.26), (1, TORCH_GROUPED, 0.83), (1, TORCH_GROUPED_GRAPH, 0.41), (16, TORCH_LOOP, 9.5)]
        );
        // this run's floor, not the script's: 8 experts, the router, one token in and out
        let bytes = 8 * 3 * 768 * 2048 * 2 + 128 * 2048 * 2 + 2 * 2048 * 2;
        assert_eq!(rows[0].floor_ms, bytes as f64 / 4.5e12 * 1e3);
        assert!(rows.iter().all(|r| r.skew == 0.0 && r.source == "moe_torch.jsonl" && r.host_us.is_none()));
        assert_eq!(rows[3].experts, 77.0);
    }

    #[test]
    fn a_broken_measurement_line_is_an_error_naming_it() {
        let err = torch_rows("{\"T\": 1, \"experts_touched\": 8}\n", "t.jsonl", 4e12).unwrap_err();
        assert!(err.starts_with("t.jsonl, line 1: missing field `loop_ms`"), "{err}");
        let bad = r#"{"T": 1, "experts_touched": 8, "loop_ms": 0.0}"#;
        assert!(torch_rows(bad, "t", 4e12).unwrap_err().contains("not a positive number"));
        let bad = r#"{"T": 1, "experts_touched": 300, "loop_ms": 1.0}"#;
        assert!(torch_rows(bad, "t", 4e12).unwrap_err().contains("300 experts touched"));
    }
}
