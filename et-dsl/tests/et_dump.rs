//! `et-dump` on the split-K example: the summary names the groups and the CUDA carries
//! the real line numbers of the user's statements; a closed pipe ends it quietly.

use std::process::Command;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/splitk/src/lib.rs");

fn line_of(source: &str, needle: &str) -> usize {
    source.lines().position(|l| l.contains(needle)).expect("the example has the statement") + 1
}

#[test]
fn dumps_the_splitk_example() {
    let out = Command::new(env!("CARGO_BIN_EXE_et-dump")).arg(EXAMPLE).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    for expected in [
        "// ======== splitk_gemm",
        "// megakernel `splitk_gemm` (schedule static)",
        "// dims: S = 4, M, N",
        "//   part: &mut f32[128*M, 32*N]",
        "//   done[M, N], count inferred",
        "//   partial[m, n, s] in [M, N, 4], cost 1",
        "//     signal done[m, n]",
        "//   reduce[m, n] in [M, N], cost 1",
        "//     wait done[m, n]",
        "// ======== split_row_sum",
        "//   total[i] in [R], cost 1",
        "et_group_0",
        "et_group_1",
        "extern \"C\" __global__",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in\n{stdout}");
    }
    let source = std::fs::read_to_string(EXAMPLE).unwrap();
    let signal = format!("#line {} \"{EXAMPLE}\"\n", line_of(&source, "signal!(done[m, n])"));
    assert!(stdout.contains(&signal), "missing {signal:?} in\n{stdout}");
}

#[test]
fn reports_errors_and_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_et-dump")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: et-dump FILE.rs"));
    let out = Command::new(env!("CARGO_BIN_EXE_et-dump")).arg("--help").output().unwrap();
    assert!(out.status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_et-dump")).arg("/nonexistent.rs").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.rs"));
}

#[test]
fn a_reader_that_stops_early_ends_the_dump_quietly() {
    // the reader closes the pipe before anything is written: every write fails
    let mut child = Command::new(env!("CARGO_BIN_EXE_et-dump"))
        .arg(EXAMPLE)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("panicked"), "{:?}: {stderr}", out.status);
}
