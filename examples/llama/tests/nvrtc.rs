//! Every decode megakernel of this crate compiles to sm_90a CUBIN with the real NVRTC, a
//! module per schedule (et-device's `nvrtc_compile` test links only splitk and the ui
//! programs). Needs libnvrtc, no GPU: run with `--ignored` where NVRTC is installed
//! (`scripts/test` puts it in `.tools/`; `ET_NVRTC_DIR` or `LD_LIBRARY_PATH` point at it).

use std::time::Instant;

use et_core::ScheduleKind;

#[test]
#[ignore = "needs NVRTC: run with --ignored where NVRTC is installed"]
fn every_decode_megakernel_compiles_to_sm90a_cubin() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    let kernels: Vec<_> = et_core::registered_kernels()
        .into_iter()
        .map(|e| e.kernel)
        .filter(|k| k.name().starts_with("decode_") && k.module_path.starts_with("llama"))
        .collect();
    assert_eq!(kernels.len(), llama::Stamp::ALL.len(), "one megakernel per stamp");
    for k in kernels {
        // a module per schedule: the benches launch both (about 4 s of NVRTC each)
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            let t0 = Instant::now();
            let source = k.cuda_source_for(schedule);
            let (out, _) = compiler
                .compile_source(k.name(), &source)
                .unwrap_or_else(|e| panic!("{} ({schedule:?}): {e}", k.name()));
            assert_eq!(out.kind, et_device::compile::ImageKind::Cubin, "{}", k.name());
            println!(
                "{:<16} {:<8} {:>8} bytes of CUDA, {:>8} bytes of CUBIN, {:.2} s",
                k.name(),
                format!("{schedule:?}"),
                source.len(),
                out.image.len(),
                t0.elapsed().as_secs_f64()
            );
        }
    }
}
