//! The DSL's compile-time checks, one failing case per rule, and passing programs that
//! run themselves on the CPU backend (several symbolic sizes, chaos mode) against a
//! sequential reference.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
