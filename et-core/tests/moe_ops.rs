//! The MoE routing ops' CPU references against straightforward loops written here, on
//! random inputs with ties and padding, outputs poisoned first; and their contracts.
//! (The ops compiled by NVRTC: benches' `moe_baseline` test; on the GPU: its GPU test.)

use et_core::ops::moe::*;
use et_core::tile::{InTensor, OutTensor, TileMut, TileRef};
use et_core::{Element, RawTensor, Tensor, bf16};

fn rd<T: Element, const R: usize>(raw: &RawTensor) -> TileRef<'_, T, R> {
    let shape: [usize; R] = std::array::from_fn(|d| raw.shape[d] as usize);
    // SAFETY: `raw` describes a live host tensor of the test that nothing writes meanwhile.
    unsafe { InTensor::<T>::bind(raw) }.tile([0; R], shape)
}

fn wr<T: Element, const R: usize>(raw: &RawTensor) -> TileMut<'_, T, R> {
    let shape: [usize; R] = std::array::from_fn(|d| raw.shape[d] as usize);
    // SAFETY: `raw` is from `raw_mut` of a tensor that the test touches only through it.
    unsafe { OutTensor::<T>::bind(raw) }.tile_mut([0; R], shape)
}

/// Logits with ties: values on a coarse grid, so equal logits are common.
fn tied_logits(t: usize, e: usize, seed: u64) -> Tensor<f32> {
    let r = Tensor::<f32>::random(&[t, e], seed);
    let v = r.as_slice().iter().map(|v| (v * 4.0).round() / 4.0).collect();
    Tensor::from_vec(&[t, e], v).unwrap()
}

#[test]
fn router_topk_picks_by_logit_then_lower_expert_and_renormalises() {
    for (t, e, k, seed) in [(1, 8, 2, 1), (5, 128, 8, 2), (3, 37, 5, 3), (4, 8, 8, 4)] {
        let logits = tied_logits(t, e, seed);
        let mut idx = Tensor::<i32>::full(&[t, k], -7);
        let mut w = Tensor::<f32>::poisoned(&[t, k]);
        router_topk(rd(&logits.raw()), wr(&idx.raw_mut()), wr(&w.raw_mut()));
        for ti in 0..t {
            // the order: sort (logit desc, expert asc), a total order without NaN
            let mut order: Vec<usize> = (0..e).collect();
            order.sort_by(|&a, &b| logits.get(&[ti, b]).total_cmp(&logits.get(&[ti, a])).then(a.cmp(&b)));
            let chosen = &order[..k];
            let top = logits.get(&[ti, chosen[0]]) as f64;
            let z: f64 = chosen.iter().map(|&c| (logits.get(&[ti, c]) as f64 - top).exp()).sum();
            for (ki, &c) in chosen.iter().enumerate() {
                assert_eq!(idx.get(&[ti, ki]), c as i32, "t {t} e {e} k {k}: token {ti} pick {ki}");
                let want = (logits.get(&[ti, c]) as f64 - top).exp() / z;
                assert!((w.get(&[ti, ki]) as f64 - want).abs() <= 1e-6, "token {ti} pick {ki}");
            }
        }
    }
}

#[test]
fn router_topk_never_picks_nan_and_marks_missing_picks() {
    let logits = Tensor::from_vec(&[1, 4], vec![f32::NAN, 1.0, f32::NAN, 1.0]).unwrap();
    let mut idx = Tensor::<i32>::zeros(&[1, 3]);
    let mut w = Tensor::<f32>::poisoned(&[1, 3]);
    router_topk(rd(&logits.raw()), wr(&idx.raw_mut()), wr(&w.raw_mut()));
    assert_eq!(idx.as_slice(), &[1, 3, -1]);
    assert_eq!(w.as_slice(), &[0.5, 0.5, 0.0]);
}

#[test]
fn moe_group_lists_each_experts_tokens_in_order_with_padding() {
    let (t, k, e, cap) = (40, 3, 6, 48);
    let topk = Tensor::from_vec(&[t, k], (0..t * k).map(|i| ((i * 7 + i / 5) % e) as i32).collect()).unwrap();
    for ex in 0..e {
        let mut count = Tensor::<i32>::full(&[1], -5);
        let mut tokens = Tensor::<i32>::full(&[1, cap], 99);
        moe_group(rd(&topk.raw()), ex as i64, wr(&count.raw_mut()), wr(&tokens.raw_mut()));
        let want: Vec<i32> =
            (0..t).filter(|&ti| (0..k).any(|ki| topk.get(&[ti, ki]) == ex as i32)).map(|ti| ti as i32).collect();
        assert_eq!(count.as_slice(), &[want.len() as i32], "expert {ex}");
        assert_eq!(&tokens.as_slice()[..want.len()], &want[..], "expert {ex}");
        assert!(tokens.as_slice()[want.len()..].iter().all(|&v| v == -1), "expert {ex}: padding");
    }
}

#[test]
fn moe_gather_copies_rows_and_zeroes_padding() {
    let x = Tensor::<bf16>::random(&[5, 12], 9);
    let tokens = Tensor::from_vec(&[1, 4], vec![4, 0, -1, 7]).unwrap();
    let mut xe = Tensor::<bf16>::poisoned(&[4, 12]);
    moe_gather(rd(&x.raw()), rd(&tokens.raw()), wr(&xe.raw_mut()));
    for c in 0..12 {
        assert_eq!(xe.get(&[0, c]), x.get(&[4, c]));
        assert_eq!(xe.get(&[1, c]), x.get(&[0, c]));
        // padding and an id past x's rows: zeros, never a read outside x
        assert_eq!(xe.get(&[2, c]).to_f32(), 0.0);
        assert_eq!(xe.get(&[3, c]).to_f32(), 0.0);
    }
}

#[test]
fn moe_combine_sums_each_tokens_expert_rows_in_pick_order() {
    let (t, k, e, cap, h) = (6, 2, 4, 8, 10);
    let topk = Tensor::from_vec(&[t, k], vec![0, 1, 1, 2, 3, 0, 2, 1, 0, 3, -1, 2]).unwrap();
    let topw = Tensor::<f32>::random(&[t, k], 3);
    // the lists moe_group makes
    let mut counts = Tensor::<i32>::zeros(&[e]);
    let mut tokens = Tensor::<i32>::full(&[e, cap], -1);
    for ti in 0..t {
        for ki in 0..k {
            if let Ok(ex) = usize::try_from(topk.get(&[ti, ki])) {
                let n = counts.get(&[ex]) as usize;
                tokens.set(&[ex, n], ti as i32);
                counts.set(&[ex], n as i32 + 1);
            }
        }
    }
    let ye = Tensor::<bf16>::random(&[e * cap, h], 4);
    // rows 2..5 as one tile: token ids start at 2
    let mut out = Tensor::<bf16>::poisoned(&[4, h]);
    let (topk4, topw4) = (rows(&topk, 2, 4), rows(&topw, 2, 4));
    moe_combine(
        rd(&topk4.raw()),
        rd(&topw4.raw()),
        2,
        rd(&counts.raw()),
        rd(&tokens.raw()),
        rd(&ye.raw()),
        wr(&out.raw_mut()),
    );
    for b in 0..4 {
        let ti = 2 + b;
        for c in 0..h {
            let mut acc = 0f32;
            for ki in 0..k {
                let Ok(ex) = usize::try_from(topk.get(&[ti, ki])) else { continue };
                let p = (0..cap).find(|&p| tokens.get(&[ex, p]) == ti as i32).unwrap();
                acc += topw.get(&[ti, ki]) * ye.get(&[ex * cap + p, c]).to_f32();
            }
            assert_eq!(out.get(&[b, c]), bf16::from_f32(acc), "token {ti} column {c}");
        }
    }
}

fn rows<T: Element>(t: &Tensor<T>, from: usize, n: usize) -> Tensor<T> {
    let w = t.shape()[1];
    Tensor::from_vec(&[n, w], t.as_slice()[from * w..(from + n) * w].to_vec()).unwrap()
}

#[test]
fn contracts_name_what_breaks() {
    assert!(router_topk::contract(&[&[4, 8], &[4, 9], &[4, 9]]).is_err());
    assert!(router_topk::contract(&[&[4, 8], &[4, 2], &[4, 2]]).is_ok());
    assert!(moe_group::contract(&[&[16, 2], &[], &[1], &[1, 8]]).unwrap_err().contains("at least the token count"));
    assert!(moe_gather::contract(&[&[16, 64], &[1, 16], &[16, 32]]).is_err());
    assert!(moe_combine::contract(&[&[1, 2], &[1, 2], &[], &[8], &[8, 16], &[128, 64], &[1, 64]]).is_ok());
    assert!(moe_combine::contract(&[&[1, 2], &[1, 2], &[], &[8], &[8, 16], &[127, 64], &[1, 64]]).is_err());
}
