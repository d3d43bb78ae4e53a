//! Running a program's work on the GPU where one opens, else on the CPU backend: the
//! choice every example binary makes, in one place.

use et_core::{Backend, Cpu};

use crate::Cuda;

/// Work that runs on whichever backend [`auto_backend`] picks: a generic method, since
/// the two backends are different types.
pub trait OnBackend {
    /// What the work returns.
    type Output;

    /// Runs the work on `backend`; `gpu` says whether it is the GPU.
    fn run<B: Backend>(self, backend: &B, gpu: bool) -> Self::Output;

    /// Shows one line about the choice (`no GPU (why)`, `backend: GPU, ..`); prints it by
    /// default.
    fn announce(&mut self, line: &str) {
        println!("{line}");
    }
}

/// Runs `work` on GPU 0 unless `cpu_only` is set or no GPU opens ([`Cuda::new`]'s error
/// is announced as `no GPU (why)`), else on the CPU backend ([`Cpu::new`]); announces the
/// backend as `backend: GPU, <describe>` or `backend: CPU, <describe>` first.
pub fn auto_backend<W: OnBackend>(cpu_only: bool, mut work: W) -> W::Output {
    if !cpu_only {
        match Cuda::new(0) {
            Ok(gpu) => {
                work.announce(&format!("backend: GPU, {}", gpu.describe()));
                return work.run(&gpu, true);
            }
            Err(why) => work.announce(&format!("no GPU ({why})")),
        }
    }
    let cpu = Cpu::new();
    work.announce(&format!("backend: CPU, {}", cpu.describe()));
    work.run(&cpu, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it was told and where it ran.
    #[derive(Default)]
    struct Probe {
        lines: Vec<String>,
    }

    impl OnBackend for Probe {
        type Output = (Vec<String>, String, bool);

        fn run<B: Backend>(self, backend: &B, gpu: bool) -> Self::Output {
            (self.lines, backend.describe(), gpu)
        }

        fn announce(&mut self, line: &str) {
            self.lines.push(line.to_string());
        }
    }

    #[test]
    fn cpu_only_runs_on_the_cpu_without_trying_the_gpu() {
        let (lines, describe, gpu) = auto_backend(true, Probe::default());
        assert!(!gpu);
        assert!(describe.starts_with("cpu"), "{describe}");
        assert_eq!(lines, [format!("backend: CPU, {describe}")]);
    }

    #[test]
    fn the_gpu_is_used_where_one_opens_and_the_reason_shown_where_none_does() {
        let (lines, describe, gpu) = auto_backend(false, Probe::default());
        match Cuda::new(0) {
            Ok(_) => {
                assert!(gpu);
                assert!(describe.starts_with("cuda"), "{describe}");
                assert_eq!(lines, [format!("backend: GPU, {describe}")]);
            }
            Err(why) => {
                assert!(!gpu);
                assert_eq!(lines, [format!("no GPU ({why})"), format!("backend: CPU, {describe}")]);
            }
        }
    }
}
