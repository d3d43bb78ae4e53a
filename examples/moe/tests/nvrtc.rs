//! Both MoE layer megakernels (one per shape, every token count) compile to sm_90a CUBIN,
//! a module per schedule, with the real NVRTC. Needs libnvrtc, no GPU: run with
//! `--ignored` where NVRTC is installed (`ET_NVRTC_DIR` or `LD_LIBRARY_PATH` point at it).

use std::time::Instant;

use et_core::ScheduleKind;

#[test]
#[ignore = "needs NVRTC: run with --ignored where NVRTC is installed"]
fn every_moe_megakernel_compiles_to_sm90a_cubin() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    let kernels = [&moe::layer::moe_qwen3::KERNEL, &moe::layer::moe_tiny::KERNEL];
    for k in kernels {
        // a module per schedule: the benches and tests launch both
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            let t0 = Instant::now();
            let (out, _) =
                compiler.compile_kernel(k, schedule).unwrap_or_else(|e| panic!("{} ({schedule:?}): {e}", k.name()));
            assert_eq!(out.kind, et_device::compile::ImageKind::Cubin, "{}", k.name());
            println!(
                "{:<10} {:<8} {:>8} bytes of CUBIN, {:.2} s",
                k.name(),
                format!("{schedule:?}"),
                out.image.len(),
                t0.elapsed().as_secs_f64()
            );
        }
    }
}
