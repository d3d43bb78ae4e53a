//! The `moe` binary's options: values outside their range are usage errors naming the
//! option, before anything is built or run.

use std::process::Command;

/// Runs the binary on the CPU backend with `args`; its exit status and stderr.
fn moe(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_moe")).arg("--cpu").args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_skew_outside_zero_to_one_is_a_usage_error_naming_the_option() {
    // "-1" is a value here, not an unknown flag
    for value in ["-1", "1.5", "NaN", "lots"] {
        let (ok, stderr) = moe(&["--skew", value]);
        assert!(!ok, "--skew {value} ran");
        assert!(stderr.contains(&format!("invalid value '{value}' for '--skew")), "--skew {value}: {stderr}");
    }
}

#[test]
fn token_counts_outside_the_range_are_usage_errors() {
    for value in ["0", "1025"] {
        let (ok, stderr) = moe(&["--tokens", value]);
        assert!(!ok, "--tokens {value} ran");
        assert!(stderr.contains(&format!("invalid value '{value}' for '--tokens")), "--tokens {value}: {stderr}");
    }
}
