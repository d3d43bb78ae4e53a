//! The Chrome/Perfetto trace of a launch, from the words per task the kernel wrote
//! ([`et_core::abi::TRACE_WORDS`]: `(SM << 32) | CTA`, start, end, end of the last wait,
//! in global-timer nanoseconds).

use std::path::Path;

use et_core::Error;
use et_core::abi::TRACE_WORDS as W;
use et_core::graph::Resolved;
use et_core::trace::{TaskSpan, write_chrome_trace};

/// Writes the trace of one launch of `r`'s graph to `path`; an error names the path. The
/// tasks that did not run (start word 0: inactive under the dynamic schedule, whose
/// tasks never enter the ring) are left out.
pub(crate) fn write_trace(r: &Resolved<'_>, words: &[u64], path: &Path) -> Result<(), Error> {
    let ran: Vec<usize> = (0..r.n_tasks as usize).filter(|&t| words[W * t + 1] != 0).collect();
    let t0 = ran.iter().map(|&t| words[W * t + 1]).min().unwrap_or(0);
    let us = |ns: u64| ns.saturating_sub(t0) as f64 / 1e3;
    let spans: Vec<TaskSpan> = ran
        .into_iter()
        .map(|t| {
            let [sm, start, end, ready] = [0, 1, 2, 3].map(|k| words[W * t + k]);
            let end = end.max(start);
            TaskSpan {
                task: r.describe_task(t as u32),
                track: (sm >> 32) as u32,
                start_us: us(start),
                ready_us: us(ready.clamp(start, end)),
                end_us: us(end),
            }
        })
        .collect();
    write_chrome_trace(path, &r.spec.name, "SM", &spans).map_err(Error::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_trace_path_says_it_is_the_trace_path() {
        use et_core::graph::resolve::LaunchTensors;
        struct Shapes;
        impl LaunchTensors for Shapes {
            fn shape(&self, t: u16) -> Vec<i64> {
                [vec![32, 128], vec![32, 4], vec![32]][t as usize].clone()
            }
            fn read_integers(&self, _: u16) -> Vec<i64> {
                Vec::new()
            }
        }
        let r = Resolved::new(&splitk::split_row_sum::KERNEL.graph, &Shapes).unwrap();
        // every task ran, at 1000 + its index ns
        let words: Vec<u64> = (0..W * r.n_tasks as usize).map(|i| 1000 + (i / W) as u64).collect();
        let dir = std::env::temp_dir().join(format!("et-trace-test-{}", std::process::id()));
        let bad = dir.join("missing-directory").join("trace.json");
        let err = write_trace(&r, &words, &bad).unwrap_err().to_string();
        assert!(err.contains("the trace path") && err.contains("missing-directory"), "{err}");
        // the same words to a good path: valid JSON with every task
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("trace.json");
        write_trace(&r, &words, &good).unwrap();
        assert!(std::fs::read_to_string(&good).unwrap().contains(&r.describe_task(r.n_tasks - 1)));
        // a task whose start word is 0 did not run: it is left out, and the times count
        // from the first task that ran
        let mut idle = words.clone();
        idle[1] = 0;
        write_trace(&r, &idle, &good).unwrap();
        let text = std::fs::read_to_string(&good).unwrap();
        assert!(!text.contains(&format!("\"{}\"", r.describe_task(0))), "{text}");
        assert!(text.contains(&r.describe_task(1)));
        std::fs::remove_dir_all(&dir).ok();
    }
}
