//! One `symbolic_extents` megakernel on the CPU backend at several table lengths, batches,
//! column counts and depths, and a launch whose extents break an op's contract returning
//! an error rather than panicking.

use et_core::Cpu;
use ui_tests::symbolic_extents::{check, check_paired};

#[test]
fn one_megakernel_serves_every_symbolic_extent() {
    let cpu = Cpu::new();
    for (t, b, n, l) in [(1, 1, 1, 1), (5, 3, 2, 4), (1024, 16, 3, 2), (77, 8, 1, 7)] {
        check(&cpu, t, b, n, l);
    }
}

#[test]
fn a_contract_broken_at_launch_is_an_error_naming_the_call() {
    let cpu = Cpu::new();
    check_paired(&cpu, 4, 4);
    check_paired(&cpu, 3, 2);
    check_paired(&cpu, 1, 16);
}
