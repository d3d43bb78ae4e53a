//! The decode operators on a real GPU (ignored where there is none): each op inside a
//! multi-task megakernel (ui-tests' `decode_ops`), fresh random inputs, outputs poisoned,
//! against the same kernel on the CPU backend (the ops' CPU references), under both
//! schedules, with tolerances that fit bf16 outputs and f32 sums in another order.

use et_core::ScheduleKind;
use et_device::Cuda;
use ui_tests::decode_ops::{Attention, check_attention, check_gemv, check_misc, check_rope};

/// bf16 rounds at 2^-8 relative; sums over 4104 products in another order move a value
/// by a few ulps of f32 and may flip a rounding: 1e-2 of the norm is far above that and
/// far below a wrong result (a missing tile, a wrong row, a wrong split: errors of 0.1+).
const TOL: f64 = 1e-2;

fn gpu() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemv_family_at_batch_1_to_64_equals_the_cpu() {
    let gpu = gpu();
    for (k, schedule) in [ScheduleKind::Static, ScheduleKind::Dynamic].into_iter().enumerate() {
        // every mma batch-fragment count that matters: 1 and 2 pieces, a partial and a full
        // one, one row past a piece, 3 pieces (sm_90a: the wgmma path's 32 columns, 8 of
        // them zeros), and 5 pieces of which the last has one row
        for batch in [1, 2, 7, 8, 9, 16, 24, 33, 64] {
            // 57 tiles of 72 rows: 4104 = 4096 + 8 weight rows, K = 4104 as well
            let tiles = if k == 0 { 57 } else { 3 };
            check_gemv(&gpu, batch, tiles, 100 + batch as u64 + k as u64, schedule, None, TOL);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn rope_append_and_split_kv_attention_equal_the_cpu() {
    let gpu = gpu();
    for (k, schedule) in [ScheduleKind::Static, ScheduleKind::Dynamic].into_iter().enumerate() {
        for pos in [0, 16, 999, 1023] {
            check_attention(&gpu, Attention::G4D128, 8, pos, 200 + pos as u64, schedule, None, TOL);
            check_attention(&gpu, Attention::G8D64, 4, pos, 300 + pos as u64 + k as u64, schedule, None, TOL);
            check_attention(&gpu, Attention::G2D128, 6, pos, 500 + pos as u64 + k as u64, schedule, None, TOL);
        }
        // 2100: pieces of 65 or 66 rows, whose last step of the lazy fold is part full
        for pos in [0, 2100, 8191, 32767] {
            check_attention(&gpu, Attention::Long, 8, pos, 400 + pos as u64, schedule, None, TOL);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn rope_and_kv_append_over_blocks_of_sequences_equal_the_cpu() {
    let gpu = gpu();
    for (k, schedule) in [ScheduleKind::Static, ScheduleKind::Dynamic].into_iter().enumerate() {
        // 16-byte pieces: 1 task (its 3 sequences at 39, one past the cache, -1) and 300
        // tasks (more than the CTAs); element by element: 7 tasks
        check_rope(&gpu, 128, 1, 600 + k as u64, schedule, None, TOL);
        check_rope(&gpu, 128, 300, 610 + k as u64, schedule, None, TOL);
        check_rope(&gpu, 72, 7, 620 + k as u64, schedule, None, TOL);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn embedding_norms_elementwise_and_argmax_equal_the_cpu() {
    let gpu = gpu();
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        for batch in [1, 5, 16] {
            check_misc(&gpu, batch, 500 + batch as u64, schedule, None, TOL);
        }
    }
}
