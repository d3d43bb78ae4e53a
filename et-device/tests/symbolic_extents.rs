//! Symbolic tile extents on the CUDA backend: the kernels compile with NVRTC (no GPU
//! needed), and on a GPU one compilation serves every table length, batch, column count
//! and depth, and a launch whose extents break an op's contract is an error.

use et_core::Backend;
use et_device::Cuda;
use ui_tests::symbolic_extents::{check, check_paired, paired_extents, symbolic_extents};

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs this test with --ignored"]
fn the_symbolic_extent_kernels_compile_with_run_time_extents() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    for kernel in [&symbolic_extents::KERNEL, &paired_extents::KERNEL] {
        let (out, _) =
            compiler.compile_kernel(kernel, kernel.graph.schedule).unwrap_or_else(|e| panic!("{}: {e}", kernel.name()));
        assert!(out.image.starts_with(b"\x7fELF"), "{}: not an ELF cubin", kernel.name());
    }
    // the symbolic extent is -1 in the type and the dim's value in the extent array
    let src = symbolic_extents::KERNEL.cuda_source();
    assert!(src.contains("et::Ext<-1, 64>>(args.t[2], {(0LL), (0LL + 1LL * v_j)}, {(int)(0LL + 1LL * d_B), 64})"));
    assert!(src.contains(
        "et::Ext<1, -1, 32>>(args.t[6], {(0LL + 1LL * v_l), (0LL), (0LL)}, {1, (int)(0LL + 2LL * d_B), 32})"
    ));
    assert!(src.contains("et::Ext<-1>>(args.t[1], {(0LL)}, {(int)(0LL + 1LL * d_T)})"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_compilation_serves_every_symbolic_extent() {
    let cache = std::env::temp_dir().join(format!("et-symbolic-extents-{}", std::process::id()));
    let gpu =
        Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}")).with_cache_dir(Some(cache.clone()));
    let sizes = [(1, 1, 1, 1), (5, 3, 2, 4), (1024, 16, 3, 2), (77, 8, 300, 7)];
    let compiled: Vec<bool> = sizes.iter().map(|&(t, b, n, l)| check(&gpu, t, b, n, l).compiled).collect();
    assert_eq!(compiled, [true, false, false, false], "one kernel for every size ({})", gpu.describe());
    check_paired(&gpu, 4, 4);
    check_paired(&gpu, 3, 2);
    check_paired(&gpu, 16, 1);
    std::fs::remove_dir_all(&cache).ok();
}
