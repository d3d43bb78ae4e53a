//! Symbolic tile extents through the front end: the summary names them, the CUDA passes
//! them as run-time extents (`-1` in `et::Ext`, the dim's value in the extent array), and
//! an extent that uses a tile index is an error at the extent's token.

const SOURCE: &str = "use et_core::prelude::*;

#[megakernel(dims(B <= 16))]
fn batch(x: &Tensor<f32, { [B, 64 * N] }>, y: &mut Tensor<f32, { [B, 64 * N] }>) {
    tile!(c[j] in [N] {
        add(x.tile([0, j], [B, 64]), x.tile([0, j], [B, 64]), y.tile([0, j], [B, 64]));
    });
}

#[megakernel]
fn moving(x: &Tensor<f32, { [N, 64] }>, y: &mut Tensor<f32, { [N, 64] }>) {
    tile!(c[j] in [N] {
        add(x.tile([0, 0], [j + 1, 64]), x.tile([0, 0], [1, 64]), y.tile([j, 0], [1, 64]));
    });
}
";

#[test]
fn symbolic_extents_print_by_name_and_reach_cuda_at_run_time() {
    let found = et_dsl::inspect(SOURCE, "src/k.rs").unwrap();
    let batch = found[0].outcome.as_ref().unwrap();
    let summary = et_dsl::summary(&batch.spec);
    assert!(summary.contains("    tile x[0, j] sized [B, 64]\n"), "{summary}");
    assert!(summary.contains("    tile y[0, j] sized [B, 64]\n"), "{summary}");
    let tile =
        "et::make_tile<float, 2, et::Ext<-1, 64>>(args.t[1], {(0LL), (0LL + 1LL * v_j)}, {(int)(0LL + 1LL * d_B), 64})";
    assert!(batch.cuda.contains(tile), "{}", batch.cuda);
}

#[test]
fn an_extent_with_a_tile_index_is_an_error_at_the_extent() {
    let found = et_dsl::inspect(SOURCE, "src/k.rs").unwrap();
    let errors = found[1].outcome.as_ref().unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    // `j + 1` on line 13
    assert_eq!((errors[0].line, errors[0].column), (13, 29), "{errors:?}");
    assert!(errors[0].message.contains("the tile extent `j + 1` depends on a tile index of `c`"), "{errors:?}");
}
