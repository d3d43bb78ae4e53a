//! Input that once crashed the front end (an overflow panic, a stack overflow) is an error
//! at its span now, and input at the limits still compiles.

/// The errors et-dsl reports for `index` as the signalled element of `e[..]`, in a
/// megakernel whose tensor has `extent` elements.
fn errors(extent: &str, index: &str) -> Vec<String> {
    let source = format!(
        "#[megakernel]\n\
         fn k(x: &Tensor<f32, {{ [{extent}] }}>) {{\n\
             let e = event!([N]);\n\
             tile!(p[i] in [N] {{ signal!(e[{index}]); }});\n\
             tile!(q[i] in [N] {{ wait!(e[i]); }});\n\
         }}\n"
    );
    let found = et_dsl::inspect(&source, "hostile.rs").expect("the file parses");
    match &found[0].outcome {
        Ok(_) => Vec::new(),
        Err(diags) => diags.iter().map(|d| format!("{}:{}: {}", d.line, d.column, d.message)).collect(),
    }
}

#[test]
fn arithmetic_that_overflows_i64_is_an_error() {
    let e = errors("N * 4611686018427387904 * 4", "i * 9223372036854775807 * 3");
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with("2:25: a tensor extent overflows 64-bit integer arithmetic"), "{e:?}");
    assert!(e[1].starts_with("4:31: an event index overflows 64-bit integer arithmetic"), "{e:?}");
}

#[test]
fn numbers_beyond_two_to_the_48_are_an_error() {
    let e = errors("N * 1099511627776 * 1024", "i");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains("extent 0 of tensor `x` is too large"), "{e:?}");
}

#[test]
fn deep_or_long_expressions_are_an_error_not_a_stack_overflow() {
    for (index, want) in [
        ("(".repeat(200) + "i" + &")".repeat(200), "brackets nest more than 32 levels deep"),
        ("- ".repeat(3000) + "i", "too long for a megakernel"),
        ("i".to_string() + &" - i + i".repeat(10000), "too long for a megakernel"),
        ("|a| ".repeat(1000) + "i", "too long for a megakernel"),
    ] {
        let e = errors("N", &index);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains(want), "{e:?}");
    }
    // within the limits: 24 nested parentheses and a long sum still lower
    let index = "(".repeat(24) + "i" + &")".repeat(24) + &" + i - i".repeat(30);
    assert_eq!(errors("N", &index), Vec::<String>::new());
}

/// The errors et-dsl reports for a whole megakernel source.
fn errors_of(source: &str) -> Vec<String> {
    match &et_dsl::inspect(source, "k.rs").expect("the file parses")[0].outcome {
        Ok(_) => Vec::new(),
        Err(diags) => diags.iter().map(|d| format!("{}:{}: {}", d.line, d.column, d.message)).collect(),
    }
}

#[test]
fn a_parameter_declared_twice_and_a_bad_cost_are_named() {
    let e = errors_of(
        "#[megakernel]\n\
         fn k(x: &Tensor<f32, { [N] }>, x: &Tensor<f32, { [N] }>) {\n\
             tile!(p[i] in [N], cost = -1 { });\n\
         }\n",
    );
    assert_eq!(
        e,
        [
            "2:32: tensor parameter `x` is declared twice",
            "3:27: `cost = -1`: a cost is a whole number from 0 to 4294967295 (invalid digit found in string)",
        ]
    );
}
