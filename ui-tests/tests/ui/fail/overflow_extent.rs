// Numbers past i64 in an index are an error at the operation (not a panic in the
// macro), and numbers past 2^48 are an error at the extent (the proofs compute in i64).
use et_core::prelude::*;
#[megakernel]
fn past_i64(a: &Tensor<f32, { [N] }>) {
    let e = event!([N]);
    tile!(p[i] in [N] {
        signal!(e[i * 9223372036854775807 * 3]);
    });
    tile!(q[i] in [N] {
        wait!(e[i]);
    });
}

#[megakernel]
fn past_2_48(a: &Tensor<f32, { [N * 1099511627776 * 1024] }>) {
    let e = event!([N]);
    tile!(p[i] in [N] {
        signal!(e[i]);
    });
    tile!(q[i] in [N] {
        wait!(e[i]);
    });
}

fn main() {}
