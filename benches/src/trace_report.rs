//! Per tile group figures of a Perfetto trace (`ET_TRACE`, `llama_bench --trace`): for each
//! group, its tasks' span from the first task ready to the last one's end, the median and
//! largest work (a task's time after its last wait) and the median wait. Optionally one
//! layer only: the tasks of the per-layer groups whose first tile index is that layer.
//!
//! It reads what `et_core::trace::write_chrome_trace` writes: one `X` slice per task named
//! `group[i, j]` with the group as its category, and a nested slice of category
//! [`et_core::trace::WAIT_CATEGORY`] that starts with the task and ends when its last wait
//! did.

use std::collections::HashMap;
use std::fmt::Write;

use serde::Deserialize;

/// The figures of one tile group, in microseconds from the trace's first task start.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupRow {
    /// The group's name.
    pub group: String,
    /// Its tasks in the trace (in the layer, when one is chosen).
    pub tasks: usize,
    /// When its first task was ready (its last wait over).
    pub first_ready_us: f64,
    /// When its last task ended.
    pub last_end_us: f64,
    /// Median time of a task after its last wait.
    pub work_median_us: f64,
    /// Longest such time.
    pub work_max_us: f64,
    /// Median time of a task in its waits.
    pub wait_median_us: f64,
}

/// Which tasks of the per-layer groups count: those of one layer.
pub struct LayerFilter<'a> {
    /// The layer: a per-layer group's task counts when its first tile index is this.
    pub layer: i64,
    /// Whether a group (by name) is per layer; the others count all their tasks.
    pub per_layer: &'a dyn Fn(&str) -> bool,
}

/// One task's times, from the trace's first task start.
struct TaskTimes {
    ready: f64,
    end: f64,
    work: f64,
    wait: f64,
}

/// A whole trace's summary.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSummary {
    /// Tasks in the trace.
    pub tasks: usize,
    /// From the first task's start to the last one's end.
    pub span_us: f64,
    /// The groups, in the order their first tasks became ready.
    pub groups: Vec<GroupRow>,
}

#[derive(Deserialize)]
struct Trace {
    #[serde(rename = "traceEvents")]
    events: Vec<Event>,
}

#[derive(Deserialize)]
struct Event {
    ph: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    cat: String,
    #[serde(default)]
    tid: u64,
    #[serde(default)]
    ts: f64,
    #[serde(default)]
    dur: f64,
}

/// The first tile index of a task name such as `down[5, 17]` (`None` without indices).
fn first_index(task: &str) -> Option<i64> {
    let inner = task.split_once('[')?.1.strip_suffix(']')?;
    inner.split(',').next()?.trim().parse().ok()
}

/// Summarises the Chrome trace JSON `text`, over the tasks that `layer` keeps (all without
/// one).
pub fn summarize(text: &str, layer: Option<&LayerFilter<'_>>) -> Result<TraceSummary, String> {
    let trace: Trace = serde_json::from_str(text).map_err(|e| format!("not an et trace: {e}"))?;
    let slices = trace.events.iter().filter(|e| e.ph == "X");
    let (waits, tasks): (Vec<&Event>, Vec<&Event>) = slices.partition(|e| e.cat == et_core::trace::WAIT_CATEGORY);
    if tasks.is_empty() {
        return Err("the trace has no tasks".into());
    }
    // a wait starts with its task, on the same track; the writer rounds both to the ns
    let key = |e: &Event| (e.tid, (e.ts * 1e3).round() as i64);
    let wait_of: HashMap<(u64, i64), f64> = waits.iter().map(|w| (key(w), w.dur)).collect();
    let start = tasks.iter().map(|t| t.ts).fold(f64::INFINITY, f64::min);
    let end = tasks.iter().map(|t| t.ts + t.dur).fold(f64::NEG_INFINITY, f64::max);
    let mut by_group: Vec<(String, Vec<TaskTimes>)> = Vec::new();
    for t in &tasks {
        let group = t.name.split('[').next().unwrap_or("").to_string();
        if let Some(f) = layer
            && (f.per_layer)(&group)
            && first_index(&t.name) != Some(f.layer)
        {
            continue;
        }
        let wait = wait_of.get(&key(t)).copied().unwrap_or(0.0);
        let row = TaskTimes { ready: t.ts + wait - start, end: t.ts + t.dur - start, work: t.dur - wait, wait };
        match by_group.iter_mut().find(|(g, _)| *g == group) {
            Some((_, rows)) => rows.push(row),
            None => by_group.push((group, vec![row])),
        }
    }
    let mut groups: Vec<GroupRow> = by_group
        .into_iter()
        .map(|(group, rows)| {
            let work: Vec<f64> = rows.iter().map(|r| r.work).collect();
            let wait: Vec<f64> = rows.iter().map(|r| r.wait).collect();
            GroupRow {
                tasks: rows.len(),
                first_ready_us: rows.iter().map(|r| r.ready).fold(f64::INFINITY, f64::min),
                last_end_us: rows.iter().map(|r| r.end).fold(f64::NEG_INFINITY, f64::max),
                work_max_us: work.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                work_median_us: crate::median(&work),
                wait_median_us: crate::median(&wait),
                group,
            }
        })
        .collect();
    groups.sort_by(|a, b| a.first_ready_us.total_cmp(&b.first_ready_us));
    Ok(TraceSummary { tasks: tasks.len(), span_us: end - start, groups })
}

/// The summary as a table.
pub fn table(s: &TraceSummary) -> String {
    let mut out = format!("{} tasks over {:.1} us\n", s.tasks, s.span_us);
    let _ = writeln!(
        out,
        "{:<16} {:>6} {:>12} {:>10} {:>8} {:>9} {:>9} {:>9}",
        "group", "tasks", "first ready", "last end", "span", "work med", "work max", "wait med"
    );
    for g in &s.groups {
        let _ = writeln!(
            out,
            "{:<16} {:>6} {:>12.1} {:>10.1} {:>8.1} {:>9.2} {:>9.2} {:>9.2}",
            g.group,
            g.tasks,
            g.first_ready_us,
            g.last_end_us,
            g.last_end_us - g.first_ready_us,
            g.work_median_us,
            g.work_max_us,
            g.wait_median_us
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use et_core::trace::{TaskSpan, write_chrome_trace};

    fn span(task: &str, track: u32, start: f64, ready: f64, end: f64) -> TaskSpan {
        TaskSpan { task: task.into(), track, start_us: start, ready_us: ready, end_us: end }
    }

    fn written(spans: &[TaskSpan]) -> String {
        let path = std::env::temp_dir().join(format!("et_trace_report_{}.json", std::process::id()));
        write_chrome_trace(&path, "k", "SM", spans).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        text
    }

    #[test]
    fn groups_get_their_spans_work_and_waits_from_a_written_trace() {
        let text = written(&[
            span("emb[0]", 0, 10.0, 10.0, 12.0),
            span("mlp[0, 1]", 0, 12.0, 15.0, 20.0),
            span("mlp[0, 0]", 1, 11.0, 14.0, 18.0),
            span("mlp[1, 0]", 1, 18.0, 25.0, 30.0),
            span("head[3]", 2, 30.0, 31.0, 40.5),
        ]);
        let s = summarize(&text, None).unwrap();
        assert_eq!((s.tasks, s.span_us), (5, 30.5));
        let names: Vec<&str> = s.groups.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(names, ["emb", "mlp", "head"], "by first ready");
        let mlp = &s.groups[1];
        assert_eq!((mlp.tasks, mlp.first_ready_us, mlp.last_end_us), (3, 4.0, 20.0));
        assert_eq!((mlp.work_median_us, mlp.work_max_us, mlp.wait_median_us), (5.0, 5.0, 3.0));
        // one layer: the per-layer group keeps layer 1's task, the others keep theirs
        let per_layer = |g: &str| g == "mlp";
        let s = summarize(&text, Some(&LayerFilter { layer: 1, per_layer: &per_layer })).unwrap();
        let mlp = s.groups.iter().find(|g| g.group == "mlp").unwrap();
        assert_eq!((mlp.tasks, mlp.first_ready_us, mlp.wait_median_us), (1, 15.0, 7.0));
        assert_eq!(s.groups.iter().find(|g| g.group == "head").unwrap().tasks, 1);
        assert!(table(&s).contains("mlp"));
    }

    #[test]
    fn what_is_not_a_trace_is_an_error() {
        assert!(summarize("{}", None).unwrap_err().contains("not an et trace"));
        assert!(summarize(r#"{"traceEvents":[]}"#, None).unwrap_err().contains("no tasks"));
        assert_eq!(first_index("down[5, 17]"), Some(5));
        assert_eq!(first_index("pick"), None);
    }
}
