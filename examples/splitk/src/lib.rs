//! Split-K as megakernels.
//!
//! A split-K GEMM cuts the reduction dimension into `S` slices so that more tiles run in
//! parallel; each output tile is then the sum of its `S` partials. As separate kernels,
//! every reduction tile waits for *all* partials of the whole matrix; here the reduce tile
//! of `(m, n)` waits on the event element `done[m, n]`, which exactly its own `S`
//! partial tiles signal.

use et_core::prelude::*;

/// Tile edge of the output (rows and columns).
pub const TILE: usize = 32;
/// Length of one K slice.
pub const K_SLICE: usize = 256;
/// Number of K slices.
pub const SPLITS: usize = 4;

/// `c = a · b` with `a: [M*32, 1024]`, `b: [1024, N*32]` (bf16), accumulated in f32
/// partials stacked per output tile, reduced into `c` (bf16).
#[megakernel(dims(S = 4), threads = 128)]
pub fn splitk_gemm(
    a: &Tensor<bf16, { [M * 32, S * 256] }>,
    b: &Tensor<bf16, { [S * 256, N * 32] }>,
    part: &mut Tensor<f32, { [M * S * 32, N * 32] }>,
    c: &mut Tensor<bf16, { [M * 32, N * 32] }>,
) {
    let done = event!([M, N]); // count inferred: S signals per element
    tile!(partial[m, n, s] in [M, N, S] {
        matmul(a.tile([m, s], [32, 256]), b.tile([s, n], [256, 32]), part.tile([m * S + s, n], [32, 32]));
        signal!(done[m, n]);
    });
    tile!(reduce[m, n] in [M, N] {
        wait!(done[m, n]);
        sum_splits(part.tile([m, n], [S * 32, 32]), c.tile([m, n], [32, 32]));
    });
}

/// Row sums with split-K: 4 partial tiles per 32-row block, then a final tile per
/// block that waits for exactly its own 4 partials (the design brief's example).
#[megakernel]
pub fn split_row_sum(
    a: &Tensor<f32, { [R * 32, 128] }>,
    part: &mut Tensor<f32, { [R * 32, 4] }>,
    c: &mut Tensor<f32, { [R * 32] }>,
) {
    let done = event!([R]);
    tile!(partial[i, j] in [R, 4] {
        row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
        signal!(done[i]);
    });
    tile!(total[i] in [R] {
        wait!(done[i]);
        row_sum(part.tile([i, 0], [32, 4]), c.tile([i], [32]));
    });
}

/// Plain sequential GEMM reference: f64 accumulation, rounded once to bf16.
pub fn gemm_reference(a: &Tensor<bf16>, b: &Tensor<bf16>) -> Tensor<bf16> {
    let (m, k) = (a.shape()[0], a.shape()[1]);
    let n = b.shape()[1];
    let (av, bv) = (a.as_slice(), b.as_slice());
    let mut c = vec![bf16::ZERO; m * n];
    for i in 0..m {
        for j in 0..n {
            let acc: f64 = (0..k).map(|p| av[i * k + p].to_f64() * bv[p * n + j].to_f64()).sum();
            c[i * n + j] = bf16::from_f64(acc);
        }
    }
    Tensor::from_vec(&[m, n], c).expect("shape")
}

/// Plain sequential row-sum reference, in f64.
pub fn row_sum_reference(a: &Tensor<f32>) -> Tensor<f32> {
    let (rows, cols) = (a.shape()[0], a.shape()[1]);
    let v = a.as_slice();
    let c = (0..rows).map(|r| v[r * cols..(r + 1) * cols].iter().map(|&x| x as f64).sum::<f64>() as f32).collect();
    Tensor::from_vec(&[rows], c).expect("shape")
}
