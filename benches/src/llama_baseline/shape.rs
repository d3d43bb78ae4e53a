//! The static sizes of one decode megakernel stamp, read from its graph, and the bytes a
//! decode step must read (the floor's numerator).

use et_core::Kernel;
use et_core::TileOp;
use et_core::graph::DimKind;
use et_core::ops::{
    attention_merge_matvec_residual, attention_rope_heads, attention_rope_heads_simt, attention_rope_split,
    attention_rope_split_lazy, attention_rope_split_lazy_simt,
};
use llama::{LlamaConfig, Stamp};

/// The tile sizes and model dims of one stamp: the static dims of its megakernel (the
/// literals of its `decode_step!` line), so that the baseline launches exactly the tiles
/// the megakernel runs. Names as in `llama::decode`.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct Shape {
    pub b: usize,
    pub hd: usize,
    pub nkv: usize,
    pub g: usize,
    pub d: usize,
    pub v: usize,
    pub s: usize,
    /// Positions the KV cache holds per sequence (the megakernel's run-time dim `P`; the
    /// baseline compiles its kernels for it).
    pub positions: usize,
    pub nq: usize,
    pub qt: usize,
    pub rt: usize,
    pub no: usize,
    pub ot: usize,
    pub nm: usize,
    pub mt: usize,
    pub nd: usize,
    pub dt: usize,
    /// The splits of `k` of the output and down projections (1 where they run whole),
    /// each `KO` and `KD` columns.
    pub kp: usize,
    pub ko: usize,
    pub kd: usize,
    /// The LM head's tiles: `vt` of `nv` rows. The megakernel's head has two tile sizes
    /// (`VT` of `NV`, then `WT` of `NW`), so that its 528 tasks fill four waves of the
    /// SMs' persistent CTAs; the baseline's head kernel, whose CTAs the hardware places as
    /// SMs free up, takes the larger size throughout (`nv = NW`, `V / NW` tiles).
    pub nv: usize,
    pub vt: usize,
    /// Where the norms run (the stamp's `norms = ..` form).
    pub norms: Norms,
    /// The op of the stamp's attention tasks (one of [`ATTENTION_OPS`]): the baseline's
    /// attention kernel calls the same one.
    pub attention: &'static TileOp,
    /// The KV heads of one attention task when the stamp takes `attention = heads(..)`
    /// (`attention_rope_heads`: whole caches, no merge); `None` for split-KV pieces.
    pub attention_heads: Option<usize>,
    /// The output projection merges the split-KV pieces itself (`attention = merged(..)`:
    /// `attention_merge_matvec_residual`, no merge task).
    pub merged_o: bool,
}

/// Where a stamp's norms run: its `decode_step!` line's `norms = ..` form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norms {
    /// `fused(..)`: inside the GEMV tasks that read them (no `norm1` group).
    Fused,
    /// `tasks(..)`: a task per sequence, the projections whole.
    Tasks,
    /// `reducing(..)`: tasks that also sum the split-K output and down projections with
    /// their residuals (a `norm0` group for layer 0).
    Reducing,
}

/// The ops a `decode_step!` stamp's attention tasks may call: split-KV pieces, or whole
/// heads (`attention = heads(..)`).
pub const ATTENTION_OPS: [&TileOp; 5] = [
    &attention_rope_split::OP,
    &attention_rope_split_lazy::OP,
    &attention_rope_split_lazy_simt::OP,
    &attention_rope_heads::OP,
    &attention_rope_heads_simt::OP,
];

impl Shape {
    /// The sizes of `stamp`'s megakernel with a KV cache of `positions` positions per
    /// sequence. Errors, naming the dim, when the megakernel lacks one of them or has it
    /// symbolic (the baseline then needs updating with it).
    pub fn of(stamp: Stamp, positions: usize) -> Result<Shape, String> {
        Shape::from_kernel(stamp.kernel(), positions)
    }

    /// The sizes read from `kernel`'s static dims, with a cache of `positions` positions.
    pub fn from_kernel(kernel: &Kernel, positions: usize) -> Result<Shape, String> {
        let dim = |name: &str| -> Result<usize, String> {
            let d = kernel.graph.dims.iter().find(|d| d.name == name).ok_or_else(|| {
                format!("megakernel `{}` has no dim `{name}`: the kernel-per-operator baseline reads it", kernel.name())
            })?;
            match d.kind {
                DimKind::Static(v) if v > 0 => Ok(v as usize),
                _ => Err(format!("megakernel `{}`: dim `{name}` is not a positive static size", kernel.name())),
            }
        };
        Ok(Shape {
            b: dim("B")?,
            hd: dim("HD")?,
            nkv: dim("NKV")?,
            g: dim("G")?,
            d: dim("D")?,
            v: dim("V")?,
            s: dim("S")?,
            positions,
            nq: dim("NQ")?,
            qt: dim("QT")?,
            rt: dim("RT")?,
            no: dim("NO")?,
            ot: dim("OT")?,
            nm: dim("NM")?,
            mt: dim("MT")?,
            nd: dim("ND")?,
            dt: dim("DT")?,
            kp: dim("KP")?,
            ko: dim("KO")?,
            kd: dim("KD")?,
            nv: dim("NW")?,
            vt: dim("V")? / dim("NW")?,
            norms: match (
                kernel.graph.groups.iter().any(|g| g.name == "norm1"),
                kernel.graph.groups.iter().any(|g| g.name == "norm0"),
            ) {
                (false, _) => Norms::Fused,
                (true, false) => Norms::Tasks,
                (true, true) => Norms::Reducing,
            },
            attention: ATTENTION_OPS
                .into_iter()
                .find(|a| kernel.cuda.ops.iter().any(|op| op.name == a.name))
                .ok_or_else(|| format!("megakernel `{}` calls none of the attention ops", kernel.name()))?,
            attention_heads: match kernel.graph.dims.iter().any(|d| d.name == "H") {
                true => Some(dim("H")?),
                false => None,
            },
            merged_o: kernel.cuda.ops.iter().any(|op| op.name == attention_merge_matvec_residual::OP.name),
        })
    }

    /// Errors unless these sizes tile `config`'s model (what `decode_step!` asserts).
    pub fn check(&self, config: &LlamaConfig) -> Result<(), String> {
        let c = config;
        let checks = [
            (self.hd == c.hidden_size, "HD is the hidden size"),
            (self.nkv == c.num_kv_heads, "NKV is the number of KV heads"),
            (self.g * self.nkv == c.num_heads, "G · NKV is the number of query heads"),
            (self.d == c.head_dim, "D is the head dim"),
            (self.v == c.vocab_size && self.vt * self.nv == self.v, "VT · NV is the vocabulary"),
            (self.qt * self.nq == self.nkv * (self.g + 2) * self.d, "QT · NQ is the fused QKV rows"),
            (self.rt * self.nq == (self.g + 2) * self.d, "RT · NQ is one KV head's QKV rows"),
            (self.ot * self.no == self.hd, "OT · NO is the hidden size"),
            (self.mt * self.nm == c.intermediate_size, "MT · NM is the intermediate size"),
            (self.dt * self.nd == self.hd, "DT · ND is the hidden size"),
            (self.kp * self.ko == self.nkv * self.g * self.d, "KP · KO is the output projection's k"),
            (self.kp * self.kd == c.intermediate_size, "KP · KD is the down projection's k"),
            (
                self.attention_heads.is_none_or(|h| self.nkv.is_multiple_of(h) && self.s == 1),
                "H divides NKV, with S = 1",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, what)) => Err(format!("the stamp's sizes do not tile the model: {what}")),
            None => Ok(()),
        }
    }

    /// Positions the KV cache holds per sequence and KV head.
    pub fn max_positions(&self) -> usize {
        self.positions
    }
}

/// Bytes one decode step must read from memory at least: every weight once (the tied
/// LM head once, the `B` embedding rows besides) and the KV cache up to the step's length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepBytes {
    /// Weights, norm vectors and LM head, plus the embedding rows looked up.
    pub weights: f64,
    /// Keys and values of `kv` positions of every layer, sequence and KV head.
    pub kv: f64,
}

impl StepBytes {
    /// The bytes of one step of `config` at `batch` sequences attending over `kv`
    /// positions (bf16 everywhere; activations, a few MB at most, are left out).
    pub fn new(config: &LlamaConfig, batch: usize, kv: usize) -> StepBytes {
        let c = config;
        let (h, i, d) = (c.hidden_size as f64, c.intermediate_size as f64, c.head_dim as f64);
        let (nh, nkv, l) = (c.num_heads as f64, c.num_kv_heads as f64, c.num_layers as f64);
        let per_layer = 2.0 * h + (nh + 2.0 * nkv) * d * h + h * nh * d + 3.0 * h * i;
        let head = c.vocab_size as f64 * h;
        let weights = 2.0 * (l * per_layer + h + head + batch as f64 * h);
        let kv = 2.0 * 2.0 * l * batch as f64 * nkv * kv as f64 * d;
        StepBytes { weights, kv }
    }

    /// All of it.
    pub fn total(&self) -> f64 {
        self.weights + self.kv
    }

    /// The floor: the time to move these bytes at `copy_bw` bytes/s (a device-to-device
    /// copy's read + written bytes per second).
    pub fn floor_seconds(&self, copy_bw: f64) -> f64 {
        self.total() / copy_bw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stamp_has_a_shape_that_tiles_its_model() {
        for stamp in Stamp::ALL {
            let shape = Shape::of(stamp, 100).unwrap();
            let geo = stamp.geometry();
            let config = LlamaConfig::preset(geo.preset).unwrap();
            shape.check(&config).unwrap();
            assert_eq!((shape.b, shape.s, shape.max_positions()), (geo.batch, geo.chunks, 100));
        }
        let s = Shape::of(Stamp::Llama1bB1, 8192).unwrap();
        assert_eq!((s.hd, s.nq, s.qt, s.max_positions()), (2048, 24, 128, 8192));
        let tiny = LlamaConfig::preset("tiny").unwrap();
        assert!(s.check(&tiny).unwrap_err().contains("HD is the hidden size"));
    }

    #[test]
    fn step_bytes_count_every_weight_once_and_the_live_kv() {
        // llama-3.2-1b: 1.236e9 parameters (tied head counted once) -> 2.47 GB
        let c = LlamaConfig::preset("llama-3.2-1b").unwrap();
        let b = StepBytes::new(&c, 1, 1024);
        let params = 16.0 * (2.0 * 2048.0 + 3072.0 * 2048.0 + 2048.0 * 2048.0 + 3.0 * 2048.0 * 8192.0)
            + 2048.0
            + 128256.0 * 2048.0
            + 2048.0;
        assert_eq!(b.weights, 2.0 * params);
        assert!((b.weights / 1e9 - 2.47).abs() < 0.01, "{}", b.weights);
        // 16 layers x 8 heads x 1024 positions x 64 x (K and V) x 2 bytes
        assert_eq!(b.kv, 16.0 * 8.0 * 1024.0 * 64.0 * 2.0 * 2.0);
        assert_eq!(StepBytes::new(&c, 8, 8192).kv, 64.0 * b.kv);
        // at 4.2 TB/s of copy bandwidth the 1B floor is the 0.59 ms
        let floor = b.floor_seconds(4.2e12);
        assert!((floor * 1e3 - 0.597).abs() < 0.005, "{floor}");
        assert_eq!(b.total(), b.weights + b.kv);
    }
}
