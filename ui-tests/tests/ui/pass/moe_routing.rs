//! Data-dependent accesses on a `dyn` event (`arrived[topk[t, k]]`), a user-defined tile
//! op, and the dynamic schedule: each token's two routed copies signal their experts,
//! each expert's element completing after the tokens the router sent it (`counts[e]`,
//! known only at run time). Expert `e` sums its tokens; as its tile reads all of `slots`,
//! it waits for every expert's element (the race rule asks for it), not only its own.
use et_core::prelude::*;

et_core::tile_op! { cuda = r#"
__device__ void expert_sum(et::Tile<unsigned int, 2> topk, et::Tile<float, 2> slots, et::Tile<float, 2> out, long long e) {
    const int routed = min(topk.shape[0] * topk.shape[1], slots.shape[0]);
    for (int c = threadIdx.x; c < out.shape[1] && c < slots.shape[1]; c += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < routed; ++s)
            if ((long long)topk(s / topk.shape[1], s % topk.shape[1]) == e) acc += slots(s, c);
        out(0, c) = acc;
    }
}
"#;
    contract {
        slots[0] == numel(topk) => "slots must have one row per routed copy, topk's rows times its columns",
        out[0] == 1 && out[1] == slots[1] => "out must be one row as wide as slots",
    }
    /// `out[0, c] = Σ slots[t * K + k, c]` over the `(t, k)` routed to expert `e`.
    pub fn expert_sum(topk: TileRef<'_, u32, 2>, slots: TileRef<'_, f32, 2>, mut out: TileMut<'_, f32, 2>, e: i64) {
        let [tokens, per] = topk.shape();
        for c in 0..out.shape()[1] {
            let mut acc = 0f32;
            for t in 0..tokens {
                for k in 0..per {
                    if topk.get([t, k]) as i64 == e {
                        acc += slots.get([t * per + k, c]);
                    }
                }
            }
            out.set([0, c], acc);
        }
    }
}

#[megakernel(schedule = "dynamic", dims(T = 16))]
pub fn moe_gather(
    topk: &Tensor<u32, { [T, 2] }>,
    counts: &Tensor<u32, { [E] }>,
    x: &Tensor<f32, { [T, 8] }>,
    slots: &mut Tensor<f32, { [T * 2, 8] }>,
    y: &mut Tensor<f32, { [E, 8] }>,
) {
    let arrived = event!([E], count = dyn(counts));
    tile!(route[t, k] in [T, 2] {
        add(x.tile([t, 0], [1, 8]), x.tile([t, 0], [1, 8]), slots.tile([t * 2 + k, 0], [1, 8]));
        signal!(arrived[topk[t, k]]);
    });
    tile!(expert[e] in [E] {
        wait!(arrived[..]);
        expert_sum(topk.tile([0, 0], [16, 2]), slots.tile([0, 0], [32, 8]), y.tile([e, 0], [1, 8]), e);
    });
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, experts: usize, seed: u64, chaos: Option<u64>) {
    let mut rng = et_core::graph::schedule::SplitMix64::new(seed);
    let routes: Vec<u32> = (0..32).map(|_| rng.below(experts) as u32).collect();
    let mut counts = vec![0u32; experts];
    for &r in &routes {
        counts[r as usize] += 1;
    }
    let topk = backend.upload(&Tensor::from_vec(&[16, 2], routes.clone()).unwrap()).unwrap();
    let counts = backend.upload(&Tensor::from_vec(&[experts], counts).unwrap()).unwrap();
    let x = Tensor::<f32>::random(&[16, 8], seed);
    let dx = backend.upload(&x).unwrap();
    let mut slots = backend.upload(&Tensor::<f32>::poisoned(&[32, 8])).unwrap();
    let mut dy = backend.upload(&Tensor::<f32>::poisoned(&[experts, 8])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    moe_gather::launch_with(backend, &opts, &topk, &counts, &dx, &mut slots, &mut dy).unwrap();
    let y = backend.download(&dy).unwrap();
    for e in 0..experts {
        for c in 0..8 {
            let mut want = 0f32;
            for (slot, &r) in routes.iter().enumerate() {
                if r as usize == e {
                    want += x.get(&[slot / 2, c]) + x.get(&[slot / 2, c]);
                }
            }
            assert!((y.get(&[e, c]) - want).abs() <= 1e-5 * (1.0 + want.abs()), "expert {e} column {c}");
        }
    }
}

#[allow(dead_code)]
fn main() {
    for experts in [1, 3, 8] {
        for seed in 0..3 {
            check(&Cpu::new(), experts, seed, Some(seed));
        }
    }
}
