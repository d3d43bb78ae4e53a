//! `et-dump FILE.rs`: prints, for each `#[megakernel]` function of a Rust source file,
//! its task-graph summary and the CUDA the macro generates for it. Needs no GPU.

use std::process::ExitCode;

const USAGE: &str = "usage: et-dump FILE.rs\n\
Prints each #[megakernel] function's graph summary (dims, tensors, events, groups)\n\
and its generated CUDA, or the errors the macro reports for it.";

fn main() -> ExitCode {
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
    for k in found {
        println!("// ======== {}", k.name);
        match k.outcome {
            Ok(g) => {
                for line in et_dsl::summary(&g.spec).lines() {
                    println!("// {line}");
                }
                println!("{}", g.cuda);
            }
            Err(diags) => {
                failed = true;
                for d in diags {
                    eprintln!("{file}:{d}");
                }
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
