//! NVRTC errors name the user's `.rs` file and line, through the `#line` directives of
//! the generated source. A binary of its own: the broken megakernel here must not join the
//! registry that `nvrtc_compile` compiles in full.

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn nvrtc_errors_name_the_users_file_and_line() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    // a body statement whose CUDA does not compile: #line maps it to this file
    let src = format!(
        "{}\n#line 42 \"my_model/src/layer.rs\"\n__device__ void f() {{ undefined_op(); }}\n",
        et_core::cuda_prelude()
    );
    let err = compiler.compile_source("broken", &src).unwrap_err().to_string();
    assert!(err.contains("my_model/src/layer.rs(42)"), "{err}");
    assert!(err.contains("undefined_op"), "{err}");
}

mod broken {
    use et_core::prelude::*;

    // an op whose CUDA text defines another name than the one the kernel calls
    et_core::tile_op! {
        cuda = "__device__ void not_the_right_name(et::Tile<float, 1> t) {}";
        /// Does nothing on the CPU.
        pub fn misnamed(_t: TileMut<'_, f32, 1>) {}
    }

    #[megakernel]
    pub fn calls_misnamed(x: &mut Tensor<f32, { [N * 8] }>) {
        tile!(t[i] in [N] {
            misnamed(x.tile([i], [8]));
        });
    }
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn a_generated_statement_that_fails_names_the_users_line() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    let err = compiler
        .compile_kernel(&broken::calls_misnamed::KERNEL, et_core::ScheduleKind::Static)
        .unwrap_err()
        .to_string();
    let line = include_str!("nvrtc_errors.rs").lines().position(|l| l.contains("misnamed(x.tile")).unwrap() + 1;
    assert!(err.contains(&format!("et-device/tests/nvrtc_errors.rs({line})")), "{err}");
    assert!(err.contains("misnamed"), "{err}");
    assert!(err.contains("calls_misnamed"), "{err}");
}

mod broken_op {
    use et_core::prelude::*;

    // an op whose CUDA text does not compile: the error names this file and line
    et_core::tile_op! { cuda = r#"
__device__ void broken(et::Tile<float, 1> t) {
    t(0) = not_declared_anywhere;
}
"#;
        /// Does nothing on the CPU.
        pub fn broken(_t: TileMut<'_, f32, 1>) {}
    }

    #[megakernel]
    pub fn calls_broken(x: &mut Tensor<f32, { [N * 8] }>) {
        tile!(t[i] in [N] {
            broken(x.tile([i], [8]));
        });
    }
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn an_error_inside_a_tile_op_names_the_ops_file_and_line() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}"));
    let err = compiler
        .compile_kernel(&broken_op::calls_broken::KERNEL, et_core::ScheduleKind::Static)
        .unwrap_err()
        .to_string();
    let line =
        include_str!("nvrtc_errors.rs").lines().position(|l| l.contains("= not_declared_anywhere;")).unwrap() + 1;
    assert!(err.contains(&format!("et-device/tests/nvrtc_errors.rs({line})")), "{err}");
    assert!(err.contains("not_declared_anywhere"), "{err}");
}
