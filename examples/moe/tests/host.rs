//! The layer's tile ops in the capacity layout, run op by op on the CPU (`moe::host`),
//! against the sequential reference: routing and outputs equal bit for bit, at token
//! counts below, at and past a token tile, with and without skew.

use moe::{MoeConfig, MoeWeights, Reference, host, weights};

#[test]
fn the_ops_reproduce_the_reference_exactly_at_every_token_count_and_skew() {
    let w = MoeWeights::random(&MoeConfig::TINY, 7).unwrap();
    for t in [1, 3, 8, 16, 17, 40] {
        for skew in [0.0, 0.5, 1.0] {
            let x = weights::tokens(&w, t, skew, t as u64).unwrap();
            let want = Reference::new(&w).forward(&x).unwrap();
            let (got, s) = host::forward(&w, &x).unwrap();
            let what = format!("{t} tokens, skew {skew}");
            assert_eq!(got.logits.as_slice(), want.logits.as_slice(), "{what}: logits");
            assert_eq!(got.topk.as_slice(), want.topk.as_slice(), "{what}: routing");
            assert_eq!(got.topw.as_slice(), want.topw.as_slice(), "{what}: weights");
            let bits = |v: &[et_core::bf16]| v.iter().map(|b| b.to_f32().to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(got.out.as_slice()), bits(want.out.as_slice()), "{what}: output");
            // every token is listed once per chosen expert
            let listed: i32 = s.counts.as_slice().iter().sum();
            assert_eq!(listed as usize, t * w.config.top_k, "{what}");
        }
    }
}

#[test]
fn full_skew_puts_every_token_on_the_first_k_experts() {
    for cfg in [MoeConfig::TINY, MoeConfig { hidden: 256, experts: 32, top_k: 4, inter: 64 }] {
        let w = MoeWeights::random(&cfg, 11).unwrap();
        let x = weights::tokens(&w, 24, 1.0, 5).unwrap();
        let o = Reference::new(&w).forward(&x).unwrap();
        for t in 0..24 {
            let mut picks: Vec<i32> = (0..cfg.top_k).map(|k| o.topk.get(&[t, k])).collect();
            picks.sort();
            assert_eq!(picks, (0..cfg.top_k as i32).collect::<Vec<_>>(), "{cfg:?}: token {t}");
        }
        // and no skew spreads the tokens over more experts than K
        let x = weights::tokens(&w, 24, 0.0, 5).unwrap();
        let o = Reference::new(&w).forward(&x).unwrap();
        let mut used: Vec<i32> = o.topk.as_slice().to_vec();
        used.sort();
        used.dedup();
        assert!(used.len() > cfg.top_k, "{cfg:?}: {used:?}");
    }
}

#[test]
fn routing_weights_sum_to_one_and_outputs_are_finite() {
    let w = MoeWeights::random(&MoeConfig::TINY, 1).unwrap();
    let x = weights::tokens(&w, 9, 0.3, 2).unwrap();
    let o = Reference::new(&w).forward(&x).unwrap();
    for t in 0..9 {
        let s: f32 = (0..w.config.top_k).map(|k| o.topw.get(&[t, k])).sum();
        assert!((s - 1.0).abs() < 1e-6, "token {t}: {s}");
    }
    assert!(o.out.as_slice().iter().all(|v| v.to_f32().is_finite()));
    assert!(o.out.as_slice().iter().any(|v| v.to_f32() != 0.0));
}
