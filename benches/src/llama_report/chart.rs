//! The chart: per-step latency against the batch size for every variant, with the floor,
//! one panel per (model, KV length), drawn as SVG with `plotters` (text as SVG `<text>`,
//! so no font files are needed).

use std::collections::BTreeSet;
use std::path::Path;

use plotters::prelude::*;

use super::{StepRow, VARIANTS};

/// Line colours of [`VARIANTS`], in order; the floor is black.
const COLORS: [RGBColor; 7] = [
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(31, 119, 180),
    RGBColor(140, 190, 230),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(127, 127, 127),
];

/// Pixels per panel.
const PANEL: (u32, u32) = (640, 440);

/// The (model, KV length) pairs of `rows`, one panel each, in order.
pub fn panels(rows: &[StepRow]) -> Vec<(String, usize)> {
    rows.iter().map(|r| (r.config.clone(), r.kv)).collect::<BTreeSet<_>>().into_iter().collect()
}

/// Writes the chart of `rows` to `path` (SVG): panels in a grid, models down, KV lengths
/// across. Errors when there are no rows or the file cannot be written.
pub fn write_svg(path: &Path, rows: &[StepRow]) -> Result<(), String> {
    let panels = panels(rows);
    if panels.is_empty() {
        return Err("the chart has no rows to draw".into());
    }
    let models: BTreeSet<&str> = panels.iter().map(|(m, _)| m.as_str()).collect();
    let kvs: BTreeSet<usize> = panels.iter().map(|p| p.1).collect();
    let (cols, nrows) = (kvs.len(), models.len());
    let size = (PANEL.0 * cols as u32, PANEL.1 * nrows as u32);
    let err = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e}", path.display());
    {
        let root = SVGBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let areas = root.split_evenly((nrows, cols));
        for (model, kv) in &panels {
            let row = models.iter().position(|m| m == model).expect("a panel's model");
            let col = kvs.iter().position(|k| k == kv).expect("a panel's KV");
            draw_panel(&areas[row * cols + col], model, *kv, rows).map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_panel(
    area: &Area<'_>,
    model: &str,
    kv: usize,
    rows: &[StepRow],
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let mine: Vec<&StepRow> = rows.iter().filter(|r| r.config == model && r.kv == kv).collect();
    let batches: BTreeSet<usize> = mine.iter().map(|r| r.batch).collect();
    let (lo, hi) = (*batches.first().expect("a panel has rows") as f64, *batches.last().expect("rows") as f64);
    let top = mine.iter().map(|r| r.step_ms.max(r.floor_ms)).fold(0.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{model}, KV {kv}: latency per decode step"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d((lo / 1.5..hi * 1.5).log_scale(), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("batch B (sequences)")
        .y_desc("ms per step")
        .x_labels(8)
        .x_label_formatter(&|b| format!("{b:.0}"))
        .draw()?;
    // the floor at each batch of the panel (every row of one batch carries the same one)
    let floor: Vec<(f64, f64)> =
        batches.iter().filter_map(|&b| mine.iter().find(|r| r.batch == b).map(|r| (b as f64, r.floor_ms))).collect();
    chart
        .draw_series(LineSeries::new(floor.clone(), BLACK.stroke_width(2)))?
        .label("floor (bytes / copy bandwidth)")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    chart.draw_series(floor.iter().map(|&p| Cross::new(p, 5, BLACK)))?;
    for (variant, color) in VARIANTS.iter().zip(COLORS) {
        let mut pts: Vec<(f64, f64)> =
            mine.iter().filter(|r| r.variant == *variant).map(|r| (r.batch as f64, r.step_ms)).collect();
        if pts.is_empty() {
            continue;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
            .label(*variant)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::row;
    use super::super::{BASELINE_GRAPH, MEGAKERNEL_STATIC, TORCH_COMPILED};
    use super::*;

    #[test]
    fn writes_one_panel_per_model_and_kv_with_every_variant() {
        let rows = vec![
            row("llama-3.2-1b", 1, 1024, MEGAKERNEL_STATIC, 0.7),
            row("llama-3.2-1b", 8, 1024, MEGAKERNEL_STATIC, 0.9),
            row("llama-3.2-1b", 1, 1024, BASELINE_GRAPH, 1.4),
            row("llama-3.2-1b", 1, 8192, TORCH_COMPILED, 1.2),
            row("llama-3.1-8b", 1, 1024, MEGAKERNEL_STATIC, 3.9),
        ];
        assert_eq!(panels(&rows).len(), 3);
        let dir = std::env::temp_dir().join(format!("llama_chart_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        write_svg(&path, &rows).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{}", &svg[..100]);
        // two models x two KV lengths
        assert!(svg.contains("width=\"1280\"") && svg.contains("height=\"880\""));
        for text in [
            "llama-3.2-1b, KV 1024",
            "llama-3.2-1b, KV 8192",
            "llama-3.1-8b, KV 1024",
            MEGAKERNEL_STATIC,
            BASELINE_GRAPH,
            TORCH_COMPILED,
            "floor",
        ] {
            assert!(svg.contains(text), "no `{text}` in the SVG");
        }
        // a line of two points for the megakernel at 1B, KV 1024
        assert!(svg.contains("<polyline"));
        assert!(write_svg(&path, &[]).unwrap_err().contains("no rows"));
    }
}
