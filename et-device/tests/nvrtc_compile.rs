//! Every megakernel linked here (examples/splitk and the passing ui programs) compiles
//! to sm_90 CUBIN with the real NVRTC. Needs libnvrtc but no GPU: `scripts/test`
//! installs NVRTC and runs this test explicitly, so CI never skips it.

use et_core::ScheduleKind;
use splitk as _;
use ui_tests as _;

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn every_registered_kernel_compiles_to_sm90_cubin_for_each_schedule() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    let kernels = et_core::registered_kernels();
    assert!(kernels.len() >= 8, "expected the splitk and ui kernels, found {}", kernels.len());
    let mut failures = Vec::new();
    for k in kernels.iter().map(|e| e.kernel) {
        // a backend compiles a module per schedule it launches: both must build
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            match compiler.compile_kernel(k, schedule) {
                Ok((out, _)) => {
                    assert_eq!(out.kind, et_device::compile::ImageKind::Cubin, "{}", k.name());
                    assert!(out.image.starts_with(b"\x7fELF"), "{} ({schedule:?}): not an ELF cubin", k.name());
                    println!(
                        "{:<24} {:<8} {:>8} bytes{}",
                        k.name(),
                        format!("{schedule:?}"),
                        out.image.len(),
                        if out.log.is_empty() { String::new() } else { format!("  log: {}", out.log) }
                    );
                }
                Err(e) => failures.push(format!("{} ({schedule:?}): {e}", k.name())),
            }
        }
    }
    assert!(failures.is_empty(), "kernels that failed to compile:\n{}", failures.join("\n"));
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn the_disk_cache_serves_a_second_compiler() {
    let dir = std::env::temp_dir().join(format!("et-cache-test-{}", std::process::id()));
    let src = format!("{}\nextern \"C\" __global__ void k() {{}}\n", et_core::cuda_prelude());
    let first = et_device::Compiler::new("sm_90a").unwrap().with_cache_dir(Some(dir.clone()));
    let (a, compiled) = first.compile_source("cache_probe", &src).unwrap();
    assert!(compiled && !a.from_disk_cache);
    let second = et_device::Compiler::new("sm_90a").unwrap().with_cache_dir(Some(dir.clone()));
    let (b, compiled) = second.compile_source("cache_probe", &src).unwrap();
    assert!(!compiled && b.from_disk_cache, "second compiler should load from {dir:?}");
    assert_eq!(a.image, b.image);
    assert_eq!(second.compilations(), 0);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn the_ptx_route_produces_ptx_for_the_driver() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_ptx();
    let kernel = &splitk::splitk_gemm::KERNEL;
    let (out, _) = compiler.compile_kernel(kernel, kernel.graph.schedule).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.kind, et_device::compile::ImageKind::Ptx);
    let text = String::from_utf8_lossy(&out.image);
    assert!(text.contains(".entry et_main"), "no entry point in the PTX");
    assert!(text.contains(".target sm_90a"), "PTX for the wrong target");
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn a_c_layout_that_differs_from_the_rust_abi_fails_to_compile() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    let src = splitk::splitk_gemm::KERNEL.cuda_source();
    for (field, wrong) in [
        ("    unsigned int event_target[", "    long long event_target["),
        ("    int dynamic;", "    long long dynamic;"),
    ] {
        assert!(src.contains(field), "{field} not declared");
        let err = compiler.compile_source("abi_mismatch", &src.replacen(field, wrong, 1)).unwrap_err().to_string();
        assert!(err.contains("differs from et_core::abi"), "{err}");
    }
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn the_chain_compiles_for_sm90a_with_bulk_copies_and_mbarriers() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_ptx();
    let (out, _) = compiler
        .compile_kernel(&ui_tests::gemv_chain::gemv_chain::KERNEL, ScheduleKind::Static)
        .unwrap_or_else(|e| panic!("{e}"));
    let ptx = String::from_utf8_lossy(&out.image);
    assert!(ptx.contains("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"), "no bulk copy");
    assert!(ptx.contains("mbarrier.try_wait.parity"), "no mbarrier wait");
    assert!(ptx.contains(".maxntid 512"), "not 512 threads per CTA");
    assert!(
        ptx.contains("bar.red.or") || ptx.contains("barrier.red.or"),
        "the range wait's barrier is not one reduction"
    );
}
