//! Chrome/Perfetto trace output: one track per SM (or CPU worker), one slice per task,
//! with a nested `wait` slice for the time the task spent in its waits.

use std::io::Write;
use std::path::Path;

/// One executed task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpan {
    /// Task name, e.g. `partial[1, 3]`.
    pub task: String,
    /// Track: SM id on the GPU, worker index on the CPU.
    pub track: u32,
    /// Start, microseconds from the launch's first task.
    pub start_us: f64,
    /// When the task's last wait ended (its run began); `start_us` for a task without a
    /// wait, or where the backend does not split the two.
    pub ready_us: f64,
    /// End, microseconds from the launch's first task.
    pub end_us: f64,
}

/// The category of the nested slices that show a task's time in its waits.
pub const WAIT_CATEGORY: &str = "et.wait";

/// Writes the spans as Chrome trace-event JSON (`chrome://tracing`, ui.perfetto.dev); an
/// error names the path as the trace's (the launch itself succeeded).
pub fn write_chrome_trace(path: &Path, kernel: &str, track_label: &str, spans: &[TaskSpan]) -> std::io::Result<()> {
    write_spans(path, kernel, track_label, spans).map_err(|e| {
        std::io::Error::new(e.kind(), format!("writing the trace to `{}` (the trace path): {e}", path.display()))
    })
}

fn write_spans(path: &Path, kernel: &str, track_label: &str, spans: &[TaskSpan]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        out,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"kernel\":{}}},\"traceEvents\":[",
        json_string(kernel)
    )?;
    let mut tracks: Vec<u32> = spans.iter().map(|s| s.track).collect();
    tracks.sort_unstable();
    tracks.dedup();
    let mut first = true;
    for t in &tracks {
        if !first {
            writeln!(out, ",")?;
        }
        first = false;
        write!(
            out,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":{t},\"args\":{{\"name\":{}}}}}",
            json_string(&format!("{track_label} {t}"))
        )?;
    }
    for s in spans {
        if !first {
            writeln!(out, ",")?;
        }
        first = false;
        let group = s.task.split('[').next().unwrap_or("");
        write!(
            out,
            "{{\"ph\":\"X\",\"name\":{},\"cat\":{},\"pid\":0,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3}}}",
            json_string(&s.task),
            json_string(group),
            s.track,
            s.start_us,
            (s.end_us - s.start_us).max(0.0)
        )?;
        // the wait, nested inside the task's slice; its category `et.wait` cannot be a
        // group's (a Rust identifier), so tools can tell the two kinds of slice apart
        if s.ready_us > s.start_us {
            write!(
                out,
                ",\n{{\"ph\":\"X\",\"name\":\"wait\",\"cat\":\"{WAIT_CATEGORY}\",\"pid\":0,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3}}}",
                s.track,
                s.start_us,
                s.ready_us - s.start_us
            )?;
        }
    }
    writeln!(out, "\n]}}")?;
    out.flush()
}

fn json_string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
