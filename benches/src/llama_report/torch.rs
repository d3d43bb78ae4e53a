//! Reading the JSON lines of `torch_decode.py` (PyTorch eager, CUDA graph and
//! `torch.compile` + graph on the same card) into rows of the table and chart.
//!
//! The script prints `{"copy_bw_TBps": ..}` first, then per batch one object with `model`,
//! `B`, `kv`, `floor_ms`, `eager_ms`, `graph_ms` and, with `--compile`, `compile_s` and
//! `compiled_graph_ms`. The floor of a row here is this run's (the same bytes over this
//! run's copy bandwidth), so that every variant is measured against one floor.

use serde::Deserialize;

use super::{StepRow, TORCH_COMPILED, TORCH_EAGER, TORCH_GRAPH};

/// One measurement line of the script.
#[derive(Deserialize)]
struct Line {
    model: String,
    #[serde(rename = "B")]
    batch: usize,
    kv: usize,
    eager_ms: f64,
    graph_ms: f64,
    compiled_graph_ms: Option<f64>,
}

/// The rows of the script's output `text` (from `source`, for messages and the rows'
/// `source`); `floor_ms(model, batch, kv)` gives this run's floor, `None` for a model this
/// benchmark does not know (an error naming the line). Lines that are not JSON objects
/// (warnings) and objects without `model` (the copy bandwidth line) are skipped; an
/// object with `model` that lacks a figure is an error naming its line.
pub fn torch_rows(
    text: &str,
    source: &str,
    floor_ms: impl Fn(&str, usize, usize) -> Option<f64>,
) -> Result<Vec<StepRow>, String> {
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if value.get("model").is_none() {
            continue;
        }
        let at = || format!("{source}, line {}", n + 1);
        let m: Line = serde_json::from_value(value).map_err(|e| format!("{}: {e}", at()))?;
        let floor =
            floor_ms(&m.model, m.batch, m.kv).ok_or_else(|| format!("{}: unknown model `{}`", at(), m.model))?;
        let figures =
            [(TORCH_EAGER, Some(m.eager_ms)), (TORCH_GRAPH, Some(m.graph_ms)), (TORCH_COMPILED, m.compiled_graph_ms)];
        for (variant, ms) in figures {
            let Some(ms) = ms else { continue };
            if !(ms > 0.0 && ms.is_finite()) {
                return Err(format!("{}: `{variant}` time {ms} ms is not a positive number", at()));
            }
            rows.push(StepRow {
                config: m.model.clone(),
                batch: m.batch,
                kv: m.kv,
                variant: variant.to_string(),
                step_ms: ms,
                host_us: None,
                pipelined_host_us: None,
                floor_ms: floor,
                launches: None,
                steps: 0,
                source: source.to_string(),
            });
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = r#"{"copy_bw_TBps": 4.21}
{"model": "llama-3.2-1b", "B": 1, "kv": 1024, "floor_ms": 0.5931, "eager_ms": 9.1, "graph_ms": 1.73, "compile_s": 95.2, "compiled_graph_ms": 1.05}
/usr/lib/python3/dist-packages/torch/_inductor: UserWarning: something
{"model": "llama-3.2-1b", "B": 8, "kv": 1024, "floor_ms": 0.61, "eager_ms": 9.3, "graph_ms": 1.8}
"#;

    #[test]
    fn reads_every_figure_and_skips_other_lines() {
        let rows = torch_rows(OUTPUT, "torch.jsonl", |m, b, kv| {
            (m == "llama-3.2-1b").then_some(0.5 + b as f64 + kv as f64 / 1e6)
        })
        .unwrap();
        let got: Vec<(usize, &str, f64)> = rows.iter().map(|r| (r.batch, r.variant.as_str(), r.step_ms)).collect();
        assert_eq!(
            got,
            [
                (1, TORCH_EAGER, 9.1),
                (1, TORCH_GRAPH, 1.73),
                (1, TORCH_COMPILED, 1.05),
                (8, TORCH_EAGER, 9.3),
                (8, TORCH_GRAPH, 1.8)
            ]
        );
        // this run's floor, not the script's
        assert_eq!(rows[0].floor_ms, 1.501024);
        assert!(rows.iter().all(|r| r.kv == 1024 && r.source == "torch.jsonl" && r.host_us.is_none()));
    }

    #[test]
    fn a_broken_measurement_line_is_an_error_naming_it() {
        let err = torch_rows(
            "{\"copy_bw_TBps\": 4}\n{\"model\": \"llama-3.2-1b\", \"B\": 1, \"kv\": 1024}\n",
            "t.jsonl",
            |_, _, _| Some(1.0),
        )
        .unwrap_err();
        assert!(err.starts_with("t.jsonl, line 2: missing field `eager_ms`"), "{err}");
        let err = torch_rows(OUTPUT, "t.jsonl", |_, _, _| None).unwrap_err();
        assert!(err.contains("line 2: unknown model `llama-3.2-1b`"), "{err}");
        let bad = r#"{"model": "m", "B": 1, "kv": 1, "eager_ms": -1.0, "graph_ms": 1.0}"#;
        assert!(torch_rows(bad, "t", |_, _, _| Some(1.0)).unwrap_err().contains("not a positive number"));
    }
}
