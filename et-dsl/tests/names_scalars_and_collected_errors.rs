//! Names, scalar arguments and error collection the front end once got wrong: raw and
//! non-ASCII names in the CUDA, a negative float scalar, and several errors of one
//! `dims(..)` list or one tile body reported together.

fn outcome(source: &str) -> Result<et_dsl::Generated, Vec<String>> {
    let mut found = et_dsl::inspect(source, "k.rs").expect("the file parses");
    found.remove(0).outcome.map_err(|diags| diags.iter().map(ToString::to_string).collect())
}

/// The lines of `cuda` without their `//` comments.
fn code(cuda: &str) -> String {
    cuda.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

#[test]
fn raw_and_non_ascii_names_are_positional_in_the_cuda() {
    let g = outcome(
        "#[megakernel]\n\
         fn k(x: &Tensor<f32, { [r#loop, Ñ, N] }>, y: &mut Tensor<f32, { [r#loop, Ñ, N] }>) {\n\
             tile!(r#x[r#in, ï, i] in [r#loop, Ñ, N] {\n\
                 add(x.tile([r#in, ï, i], [1, 1, 1]), x.tile([r#in, ï, i], [1, 1, 1]), y.tile([r#in, ï, i], [1, 1, 1]));\n\
             });\n\
         }\n",
    )
    .expect("compiles");
    let c = code(&g.cuda);
    assert!(c.is_ascii(), "{}", g.cuda);
    assert!(!c.contains("r#"), "{}", g.cuda);
    for name in ["v_0", "v_1", "v_i", "d_0", "d_1", "d_N"] {
        assert!(c.contains(&format!("const long long {name} = ")), "{name}: {}", g.cuda);
    }
}

#[test]
fn a_negative_float_literal_is_a_scalar_argument() {
    let g = outcome(
        "#[megakernel]\n\
         fn k(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {\n\
             tile!(p[i] in [N] { scaled(x.tile([i], [1]), y.tile([i], [1]), -2.5); });\n\
         }\n",
    )
    .expect("compiles");
    assert!(g.cuda.contains(", -2.5f"), "{}", g.cuda);
}

#[test]
fn every_bad_dims_entry_is_reported() {
    let e = outcome(
        "#[megakernel(dims(N = 0, B <= 0, C = 2))]\n\
         fn k(x: &Tensor<f32, { [N, B, C] }>) {}\n",
    )
    .unwrap_err();
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with("1:23: a dim is at least 1"), "{e:?}");
    assert!(e[1].starts_with("1:31: a dim is at least 1"), "{e:?}");
}

#[test]
fn every_bad_statement_of_a_tile_body_is_reported() {
    let e = outcome(
        "#[megakernel]\n\
         fn k(x: &Tensor<f32, { [M] }>, y: &mut Tensor<f32, { [M] }>) {\n\
             let e = event!([M]);\n\
             tile!(p[i] in [M] {\n\
                 let a = 1;\n\
                 add(x.tile([i], [1]), x.tile([i], [1]), y.tile([i], [1]));\n\
                 let b = 2;\n\
                 signal!(e[i]);\n\
             });\n\
             tile!(q[i] in [M] { wait!(e[i]); let c = 3; });\n\
         }\n",
    )
    .unwrap_err();
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(e[0].starts_with("5:1:"), "{e:?}");
    assert!(e[1].starts_with("7:1:"), "{e:?}");
    assert!(e[2].starts_with("10:34:"), "{e:?}");
}

#[test]
fn a_tile_index_with_a_tensors_name_is_an_error_at_the_index() {
    let e = outcome(
        "#[megakernel]\n\
         fn k(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {\n\
             tile!(p[x] in [N] { add(y.tile([x], [1]), y.tile([x], [1]), y.tile([x], [1])); });\n\
         }\n",
    )
    .unwrap_err();
    assert_eq!(e, ["3:9: tile index `x` has the name of a tensor parameter; rename one of them"]);
}
