//! `et-dump FILE.rs`: prints, for each `#[megakernel]` function of a Rust source file,
//! its task-graph summary and the CUDA the macro generates for it. Needs no GPU.
//!
//! It runs the macro's own rules; the race rule and the ops' shape contracts need the
//! ops' Rust definitions, so rustc checks them when it compiles the file, not et-dump.

use std::io::{self, Write};
use std::process::ExitCode;

const USAGE: &str = "usage: et-dump FILE.rs\n\
Prints each #[megakernel] function's graph summary (dims, tensors, events, groups)\n\
and its generated CUDA, or the errors the macro reports for it. The race rule and the\n\
ops' shape contracts need the ops' definitions: rustc checks them, not et-dump.";

/// The stack of the thread that does the work: as large as a compiler's, so that a file
/// the macro would take is not refused for the CLI's smaller main-thread stack.
const STACK_BYTES: usize = 64 << 20;

fn main() -> ExitCode {
    match std::thread::Builder::new().stack_size(STACK_BYTES).spawn(dump).map(|t| t.join()) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => ExitCode::from(101),
        Err(e) => {
            eprintln!("et-dump: cannot start: {e}");
            ExitCode::FAILURE
        }
    }
}

fn dump() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file] = &args[..] else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if file == "-h" || file == "--help" {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let source = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("et-dump: cannot read {file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let found = match et_dsl::inspect(&source, file) {
        Ok(found) => found,
        Err(d) => {
            eprintln!("{file}:{d}");
            return ExitCode::FAILURE;
        }
    };
    if found.is_empty() {
        eprintln!("et-dump: no #[megakernel] function in {file}");
        return ExitCode::FAILURE;
    }
    let mut failed = false;
    let mut out = io::stdout().lock();
    for k in found {
        let printed = writeln!(out, "// ======== {}", k.name).and_then(|()| match k.outcome {
            Ok(g) => {
                for line in et_dsl::summary(&g.spec).lines() {
                    writeln!(out, "// {line}")?;
                }
                writeln!(out, "// not checked here: data races and the ops' shape contracts (rustc checks them)")?;
                writeln!(out, "{}", g.cuda)
            }
            Err(diags) => {
                failed = true;
                diags.iter().for_each(|d| eprintln!("{file}:{d}"));
                Ok(())
            }
        });
        match printed {
            Ok(()) => {}
            // the reader stopped (`et-dump f.rs | head`): nothing more to show anyone
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break,
            Err(e) => {
                eprintln!("et-dump: cannot write the output: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
