//! ptxas's register and spill report for the Llama decode megakernels and for the stage
//! kernels of their kernel-per-operator baseline, compiled with NVRTC (no GPU needed).
//!
//! A megakernel's groups share one register allocation, so one op's pressure can make
//! ptxas spill in another's loop; set the two reports side by side to see where the
//! megakernel pays for it (`docs/architecture.md`, "Registers are the megakernel's
//! budget").
//!
//!     cargo bench -p et-benches --bench ptxas_report -- --stamps Llama1bB1,Llama1bB64
//!     cargo bench -p et-benches --bench ptxas_report -- --stamps Llama1bB64 --per-group --no-baseline
//!
//! With `--per-group` it also prints each group's bytes of machine code and their sum over
//! a layer's groups: the code each SM cycles through its instruction caches once a layer
//! (`docs/architecture.md`, "The instruction caches bound what a layer's code may weigh").
//!     cargo bench -p et-benches --bench ptxas_report -- --stamps Llama1bB1 --schedules static,dynamic
//!     ET_NVRTC_OPTIONS=-DET_GEMV_MMA_U=2 cargo bench -p et-benches --bench ptxas_report
//!
//! To try an edit of an op's CUDA without rebuilding the crates (minutes) for each try,
//! write a stamp's generated source out, edit it, and report the edited file:
//!
//!     cargo bench -p et-benches --bench ptxas_report -- --stamps Llama8bB64 --no-baseline --dump-source /tmp/et
//!     cargo bench -p et-benches --bench ptxas_report -- --stamps Llama8bB64 --no-baseline --per-group \
//!         --source /tmp/et/decode_8b_b64-static.cu

use clap::Parser;
use et_benches::cubin;
use et_benches::llama_baseline::{shape::Shape, source};
use et_core::ScheduleKind;
use llama::Stamp;

/// ptxas's registers and spills of the Llama megakernels and their baseline stages.
#[derive(Parser)]
struct Args {
    /// Stamps to compile (comma-separated `Stamp` names, e.g. `Llama1bB64`; default: all).
    #[arg(long, value_delimiter = ',')]
    stamps: Vec<String>,
    /// The schedules whose modules to compile (comma-separated: static, dynamic): each has
    /// a register allocation of its own.
    #[arg(long, value_delimiter = ',', value_parser = et_benches::parse_schedule, default_value = "static")]
    schedules: Vec<ScheduleKind>,
    /// Skip the kernel-per-operator baseline's stages.
    #[arg(long)]
    no_baseline: bool,
    /// Also compile each megakernel with its tile groups as separate (non-inlined)
    /// functions, so that ptxas reports every group's registers and spills on its own:
    /// which op is short of registers (the real kernel inlines them all); and print each
    /// group's bytes of machine code, and the sum over one layer's groups (the code a layer
    /// cycles through every SM's instruction caches).
    #[arg(long)]
    per_group: bool,
    /// Write each compiled megakernel's CUDA source to `DIR/<kernel>-<schedule>.cu`, and its
    /// baseline's to `DIR/llama_baseline_<kernel>.cu`.
    #[arg(long, value_name = "DIR")]
    dump_source: Option<std::path::PathBuf>,
    /// Compile this file instead of the generated source (one stamp and one schedule):
    /// an edited `--dump-source` file.
    #[arg(long, value_name = "FILE")]
    source: Option<std::path::PathBuf>,
    /// Accepted and ignored: `cargo bench` passes it to harness-less benches.
    #[arg(long, hide = true)]
    bench: bool,
}

/// The lines of ptxas's `-v` output worth reading: per function, its spills and registers;
/// the generated group functions `et_group_N` are named by their group (`groups[N]`).
fn report(log: &str, groups: &[&str]) -> String {
    log.lines()
        .filter(|l| l.contains("Function properties") || l.contains("spill") || l.contains("Used"))
        .map(|l| {
            let l = l.trim_start_matches("ptxas info    : ").trim_start_matches("ptxas         .     ");
            match group_of(l) {
                Some(g) if g < groups.len() => format!("Function properties for tile group `{}`", groups[g]),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The size of `et_main`'s machine code in a compiled megakernel.
fn main_code(out: &et_device::CompileOutput) -> Result<String, String> {
    if out.kind != et_device::compile::ImageKind::Cubin {
        return Ok("PTX only (no machine code to measure)".into());
    }
    let main = cubin::functions(&out.image)?.into_iter().find(|f| f.name == "et_main");
    Ok(main.map_or("no et_main in the CUBIN".into(), |f| format!("et_main {} bytes of SASS", f.bytes)))
}

/// Each tile group's bytes of machine code (its `et_group_N` function) and the sum over
/// the groups that run once per layer.
fn group_code(out: &et_device::CompileOutput, groups: &[&str]) -> Result<String, String> {
    if out.kind != et_device::compile::ImageKind::Cubin {
        return Ok("(PTX only: no code sizes)".into());
    }
    let per_layer = et_benches::llama_layer_groups()?;
    let mut lines = vec!["bytes of SASS per tile group (* once per layer):".to_string()];
    let mut layer = 0;
    for f in cubin::functions(&out.image)? {
        let Some(g) = f.name.split_once("et_group_").and_then(|(_, rest)| group_index(rest)) else { continue };
        let name = groups.get(g).copied().unwrap_or("?");
        let once_a_layer = per_layer.contains(&name);
        if once_a_layer {
            layer += f.bytes;
        }
        lines.push(format!("  {name:<16} {:>7}{}", f.bytes, if once_a_layer { " *" } else { "" }));
    }
    lines.push(format!(
        "  a layer's groups: {layer} bytes (an H100 SM runs about 32 KB of code at the issue rate and \
         holds about 128 KB nearer than L2: RESULTS run 49)"
    ));
    Ok(lines.join("\n"))
}

/// The leading decimal digits of `rest` as a group index.
fn group_index(rest: &str) -> Option<usize> {
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The group index of a `Function properties for _Z..et_group_N..` line (a mangled name
/// holds `et_group_` then the index).
fn group_of(line: &str) -> Option<usize> {
    let rest = line.strip_prefix("Function properties for ")?;
    group_index(rest.split_once("et_group_")?.1)
}

fn main() -> Result<(), String> {
    let args = Args::parse();
    // ET_NVRTC_OPTIONS (for -D tunables) still applies: -v is added to it
    let mut options = et_device::env_options();
    options.push("--ptxas-options=-v".into());
    let compiler =
        et_device::Compiler::new("sm_90a").map_err(|e| e.to_string())?.with_cache_dir(None).with_extra_options(options);
    let edited = match &args.source {
        Some(path) => {
            if args.stamps.len() != 1 || args.schedules.len() != 1 {
                return Err("--source takes one stamp (--stamps) and one schedule (--schedules)".into());
            }
            Some(std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        None => None,
    };
    if let Some(dir) = &args.dump_source {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for stamp in Stamp::ALL {
        if !args.stamps.is_empty() && !args.stamps.iter().any(|s| *s == format!("{stamp:?}")) {
            continue;
        }
        let k = stamp.kernel();
        let groups: Vec<&str> = k.graph.groups.iter().map(|g| &*g.name).collect();
        for &schedule in &args.schedules {
            let src = edited.clone().unwrap_or_else(|| k.cuda_source_for(schedule));
            if let Some(dir) = &args.dump_source {
                let path = dir.join(format!("{}-{}.cu", k.name(), format!("{schedule:?}").to_lowercase()));
                std::fs::write(&path, &src).map_err(|e| format!("{}: {e}", path.display()))?;
            }
            let (out, _) = compiler.compile_source(k.name(), &src).map_err(|e| e.to_string())?;
            println!(
                "=== megakernel {stamp:?} ({}), {schedule:?} module, {} bytes of dynamic shared memory (the ops' arena), {}\n{}",
                k.name(),
                k.arena_bytes(),
                main_code(&out)?,
                report(&out.log, &groups)
            );
            if args.per_group {
                let inlined = "__device__ __forceinline__ void et_group_";
                if !src.contains(inlined) {
                    return Err("the generated CUDA no longer declares `et_group_N` as force-inlined functions".into());
                }
                let separate = src.replace(inlined, "__device__ __noinline__ void et_group_");
                let name = format!("{}_per_group", k.name());
                let (out, _) = compiler.compile_source(&name, &separate).map_err(|e| e.to_string())?;
                println!(
                    "=== megakernel {stamp:?}, {schedule:?} module, groups as separate functions\n{}\n{}",
                    report(&out.log, &groups),
                    group_code(&out, &groups)?
                );
            }
        }
        if args.no_baseline {
            continue;
        }
        let shape = Shape::of(stamp, 8192)?;
        let stages = source::stages(&shape);
        let src = source::cuda_source(&shape, &stages, k.cuda.block_threads);
        if let Some(dir) = &args.dump_source {
            let path = dir.join(format!("llama_baseline_{}.cu", k.name()));
            std::fs::write(&path, &src).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let (out, _) =
            compiler.compile_source(&format!("llama_baseline_{}", k.name()), &src).map_err(|e| e.to_string())?;
        println!("=== baseline {stamp:?}\n{}", report(&out.log, &[]));
    }
    Ok(())
}
