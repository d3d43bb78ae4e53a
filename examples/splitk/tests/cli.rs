//! The `splitk` binary's options: sizes past what any device holds are usage errors, before
//! anything is allocated.

use std::process::Command;

/// Runs the binary on the CPU backend with `args`; its exit status and stderr.
fn splitk(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_splitk")).arg("--cpu").args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn sizes_past_the_limits_are_usage_errors_naming_the_option() {
    for (option, value) in [("--m", "1025"), ("--n", "100000"), ("--rows", "65537"), ("--rows", "0")] {
        let (ok, stderr) = splitk(&[option, value]);
        assert!(!ok, "{option} {value} ran");
        assert!(stderr.contains(&format!("invalid value '{value}' for '{option}")), "{option} {value}: {stderr}");
    }
}
