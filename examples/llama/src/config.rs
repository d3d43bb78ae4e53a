//! Model shapes: the presets and the parsing of a Hugging Face `config.json`.

use crate::error::{Error, Result};
use serde::Deserialize;
use std::path::Path;

/// Llama 3's frequency-dependent RoPE scaling (`rope_type: "llama3"`), see [`crate::rope`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeScaling {
    /// Factor by which low frequencies are divided.
    pub factor: f32,
    /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are scaled.
    pub low_freq_factor: f32,
    /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are kept.
    pub high_freq_factor: f32,
    /// The context length the model was pre-trained with.
    pub original_max_position_embeddings: usize,
}

/// The shape and hyper-parameters of a Llama 3 model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Width of the MLP (gate and up projections).
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_layers: usize,
    /// Number of query heads.
    pub num_heads: usize,
    /// Number of key/value heads (grouped-query attention: `num_heads` is a multiple).
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Number of tokens.
    pub vocab_size: usize,
    /// The epsilon of every RMSNorm.
    pub rms_norm_eps: f32,
    /// Base of the RoPE frequencies.
    pub rope_theta: f32,
    /// Llama 3 RoPE scaling; `None` for plain RoPE.
    pub rope_scaling: Option<RopeScaling>,
    /// Whether the LM head is the embedding matrix.
    pub tie_word_embeddings: bool,
    /// Longest context the model supports.
    pub max_position_embeddings: usize,
}

/// The names [`LlamaConfig::preset`] accepts.
pub const PRESETS: [&str; 3] = ["tiny", "llama-3.2-1b", "llama-3.1-8b"];

/// The RoPE scaling of the released Llama 3.1/3.2 models, with their `factor`.
const fn llama3_scaling(factor: f32) -> RopeScaling {
    RopeScaling { factor, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192 }
}

impl LlamaConfig {
    /// A named configuration: `llama-3.2-1b` and `llama-3.1-8b` have Hugging Face's shapes;
    /// `tiny` is small enough for the CPU backend and debug-build tests, with RoPE scaling
    /// chosen so that its 8 frequencies fall in all three bands of the Llama 3 rule.
    pub fn preset(name: &str) -> Result<Self> {
        let base = LlamaConfig {
            hidden_size: 2048,
            intermediate_size: 8192,
            num_layers: 16,
            num_heads: 32,
            num_kv_heads: 8,
            head_dim: 64,
            vocab_size: 128256,
            rms_norm_eps: 1e-5,
            rope_theta: 500000.0,
            rope_scaling: Some(llama3_scaling(32.0)),
            tie_word_embeddings: true,
            max_position_embeddings: 131072,
        };
        match name {
            "llama-3.2-1b" => Ok(base),
            "llama-3.1-8b" => Ok(LlamaConfig {
                hidden_size: 4096,
                intermediate_size: 14336,
                num_layers: 32,
                head_dim: 128,
                rope_scaling: Some(llama3_scaling(8.0)),
                tie_word_embeddings: false,
                ..base
            }),
            "tiny" => Ok(LlamaConfig {
                hidden_size: 128,
                intermediate_size: 256,
                num_layers: 2,
                num_heads: 4,
                num_kv_heads: 2,
                head_dim: 64,
                vocab_size: 256,
                rope_theta: 10000.0,
                rope_scaling: Some(RopeScaling {
                    factor: 8.0,
                    low_freq_factor: 1.0,
                    high_freq_factor: 4.0,
                    original_max_position_embeddings: 256,
                }),
                max_position_embeddings: 2048,
                ..base
            }),
            _ => Err(Error::Config(format!("unknown preset `{name}` (known: {})", PRESETS.join(", ")))),
        }
    }

    /// Reads a Hugging Face `config.json`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(Error::io(path))?;
        Self::from_hf_json(&text).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            e => e,
        })
    }

    /// Parses the text of a Hugging Face `config.json` of a `LlamaForCausalLM`, as written
    /// by transformers 4 (`rope_theta` and `rope_scaling`) or 5 (`rope_parameters`).
    /// Missing optional keys take transformers' `LlamaConfig` defaults.
    pub fn from_hf_json(text: &str) -> Result<Self> {
        let hf: HfConfig =
            serde_json::from_str(text).map_err(|e| Error::Config(format!("invalid config.json: {e}")))?;
        hf.into_config()
    }

    /// This config as a transformers 4 `config.json` (which transformers 5 reads too).
    pub fn to_hf_json(&self) -> String {
        let rope_scaling = self.rope_scaling.map(|s| {
            serde_json::json!({
                "rope_type": "llama3",
                "factor": s.factor,
                "low_freq_factor": s.low_freq_factor,
                "high_freq_factor": s.high_freq_factor,
                "original_max_position_embeddings": s.original_max_position_embeddings,
            })
        });
        let json = serde_json::json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_act": "silu",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": rope_scaling,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "torch_dtype": "bfloat16",
        });
        serde_json::to_string_pretty(&json).expect("a JSON value always serializes")
    }

    /// Checks the relations between the sizes that the model relies on.
    pub fn validate(&self) -> Result<()> {
        let sizes = [
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_layers),
            ("num_attention_heads", self.num_heads),
            ("num_key_value_heads", self.num_kv_heads),
            ("head_dim", self.head_dim),
            ("vocab_size", self.vocab_size),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(Error::Config(format!("`{name}` must be positive")));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(Error::Config(format!(
                "num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                self.num_heads, self.num_kv_heads
            )));
        }
        if !self.head_dim.is_multiple_of(2) {
            return Err(Error::Config(format!("head_dim ({}) must be even for RoPE", self.head_dim)));
        }
        if self.vocab_size > u32::MAX as usize {
            return Err(Error::Config(format!("vocab_size ({}) does not fit token ids of 32 bits", self.vocab_size)));
        }
        if !(self.rms_norm_eps >= 0.0 && self.rope_theta > 1.0) {
            return Err(Error::Config(format!(
                "rms_norm_eps ({}) must be non-negative and rope_theta ({}) above 1",
                self.rms_norm_eps, self.rope_theta
            )));
        }
        if let Some(s) = self.rope_scaling
            && !(s.factor > 0.0 && s.high_freq_factor > s.low_freq_factor && s.low_freq_factor > 0.0)
        {
            return Err(Error::Config(format!(
                "llama3 rope scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0, got {s:?}"
            )));
        }
        Ok(())
    }

    /// Number of query heads that share one key/value head.
    pub fn group_size(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }
}

/// The keys of a Hugging Face Llama `config.json` that this crate reads; others are ignored.
#[derive(Deserialize)]
struct HfConfig {
    model_type: Option<String>,
    hidden_act: Option<String>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    hidden_size: Option<usize>,
    intermediate_size: Option<usize>,
    num_hidden_layers: Option<usize>,
    num_attention_heads: Option<usize>,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    vocab_size: Option<usize>,
    rms_norm_eps: Option<f32>,
    rope_theta: Option<f32>,
    rope_scaling: Option<HfRope>,
    rope_parameters: Option<HfRope>,
    tie_word_embeddings: Option<bool>,
    max_position_embeddings: Option<usize>,
}

/// `rope_scaling` (transformers 4) or `rope_parameters` (transformers 5, which also holds
/// `rope_theta`).
#[derive(Deserialize)]
struct HfRope {
    #[serde(alias = "type")]
    rope_type: Option<String>,
    rope_theta: Option<f32>,
    factor: Option<f32>,
    low_freq_factor: Option<f32>,
    high_freq_factor: Option<f32>,
    original_max_position_embeddings: Option<usize>,
}

impl HfRope {
    /// The scaling this entry describes, `key` naming it in errors.
    fn scaling(&self, key: &str) -> Result<Option<RopeScaling>> {
        let need = |v: Option<f32>, field: &str| {
            v.ok_or_else(|| Error::Config(format!("`{key}.{field}` is required for rope_type \"llama3\"")))
        };
        match self.rope_type.as_deref() {
            None => Err(Error::Config(format!("`{key}.rope_type` is missing"))),
            Some("default") => Ok(None),
            Some("llama3") => Ok(Some(RopeScaling {
                factor: need(self.factor, "factor")?,
                low_freq_factor: need(self.low_freq_factor, "low_freq_factor")?,
                high_freq_factor: need(self.high_freq_factor, "high_freq_factor")?,
                original_max_position_embeddings: self.original_max_position_embeddings.ok_or_else(|| {
                    Error::Config(format!(
                        "`{key}.original_max_position_embeddings` is required for rope_type \"llama3\""
                    ))
                })?,
            })),
            Some(other) => Err(Error::Config(format!(
                "`{key}.rope_type` is \"{other}\"; only \"llama3\" and \"default\" are supported"
            ))),
        }
    }
}

impl HfConfig {
    fn into_config(self) -> Result<LlamaConfig> {
        if let Some(t) = self.model_type.as_deref().filter(|t| *t != "llama") {
            return Err(Error::Config(format!("model_type is \"{t}\", expected \"llama\"")));
        }
        if let Some(a) = self.hidden_act.as_deref().filter(|a| *a != "silu") {
            return Err(Error::Config(format!("hidden_act is \"{a}\"; only \"silu\" is supported")));
        }
        if self.attention_bias == Some(true) || self.mlp_bias == Some(true) {
            return Err(Error::Config("attention_bias and mlp_bias are not supported".into()));
        }
        let need = |v: Option<usize>, key: &str| v.ok_or_else(|| Error::Config(format!("`{key}` is missing")));
        let hidden_size = need(self.hidden_size, "hidden_size")?;
        let num_heads = need(self.num_attention_heads, "num_attention_heads")?;
        let head_dim = match self.head_dim {
            Some(d) => d,
            None if num_heads > 0 && hidden_size.is_multiple_of(num_heads) => hidden_size / num_heads,
            None => {
                return Err(Error::Config(format!(
                    "no `head_dim`, and hidden_size ({hidden_size}) is not a multiple of num_attention_heads ({num_heads})"
                )));
            }
        };
        let (rope_theta, rope_scaling) = match (&self.rope_parameters, &self.rope_scaling) {
            (Some(p), _) => (p.rope_theta.or(self.rope_theta), p.scaling("rope_parameters")?),
            (None, Some(s)) => (self.rope_theta, s.scaling("rope_scaling")?),
            (None, None) => (self.rope_theta, None),
        };
        let config = LlamaConfig {
            hidden_size,
            intermediate_size: need(self.intermediate_size, "intermediate_size")?,
            num_layers: need(self.num_hidden_layers, "num_hidden_layers")?,
            num_heads,
            num_kv_heads: self.num_key_value_heads.unwrap_or(num_heads),
            head_dim,
            vocab_size: need(self.vocab_size, "vocab_size")?,
            rms_norm_eps: self.rms_norm_eps.unwrap_or(1e-6),
            rope_theta: rope_theta.unwrap_or(10000.0),
            rope_scaling,
            tie_word_embeddings: self.tie_word_embeddings.unwrap_or(false),
            max_position_embeddings: self.max_position_embeddings.unwrap_or(2048),
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `config.json` of Llama-3.2-1B as published (transformers 4.45).
    const HF4_1B: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
      "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
      "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
      "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
      "pretraining_tp": 1, "rms_norm_eps": 1e-05,
      "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256
    }"#;

    /// Llama-3.1-8B as transformers 5 writes it: `rope_parameters` holds the theta.
    const HF5_8B: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "dtype": "bfloat16", "hidden_act": "silu",
      "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
      "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
      "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
      "rope_parameters": {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                          "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
                          "rope_type": "llama3"},
      "tie_word_embeddings": false, "vocab_size": 128256
    }"#;

    #[test]
    fn published_configs_match_the_presets() {
        assert_eq!(LlamaConfig::from_hf_json(HF4_1B).unwrap(), LlamaConfig::preset("llama-3.2-1b").unwrap());
        // no head_dim key: derived as hidden_size / num_attention_heads = 128
        assert_eq!(LlamaConfig::from_hf_json(HF5_8B).unwrap(), LlamaConfig::preset("llama-3.1-8b").unwrap());
    }

    #[test]
    fn presets_are_valid_and_round_trip_through_json() {
        for name in PRESETS {
            let c = LlamaConfig::preset(name).unwrap();
            c.validate().unwrap();
            assert_eq!(LlamaConfig::from_hf_json(&c.to_hf_json()).unwrap(), c, "{name}");
        }
        assert_eq!(LlamaConfig::preset("tiny").unwrap().group_size(), 2);
        assert!(LlamaConfig::preset("llama-4").unwrap_err().to_string().contains("unknown preset `llama-4`"));
    }

    #[test]
    fn plain_rope_and_defaults() {
        let c = LlamaConfig::from_hf_json(
            r#"{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
                "num_attention_heads": 4, "vocab_size": 10, "rope_scaling": null}"#,
        )
        .unwrap();
        assert_eq!((c.num_kv_heads, c.head_dim, c.rope_scaling), (4, 16, None));
        assert_eq!((c.rope_theta, c.rms_norm_eps, c.tie_word_embeddings), (10000.0, 1e-6, false));
        let v5 = LlamaConfig::from_hf_json(
            r#"{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
                "vocab_size": 10, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}}"#,
        )
        .unwrap();
        assert_eq!((v5.rope_theta, v5.rope_scaling), (1000.0, None));
    }

    #[test]
    fn errors_name_the_problem() {
        let err = |text: &str| LlamaConfig::from_hf_json(text).unwrap_err().to_string();
        assert!(err(&HF4_1B.replace("\"hidden_size\": 2048,", "")).contains("`hidden_size` is missing"));
        assert!(err(&HF4_1B.replace("\"llama3\"", "\"yarn\"")).contains("\"yarn\"; only \"llama3\""));
        assert!(err(&HF4_1B.replace("\"factor\": 32.0,", "")).contains("`rope_scaling.factor` is required"));
        assert!(err(&HF5_8B.replace("\"factor\": 8.0,", "")).contains("`rope_parameters.factor` is required"));
        assert!(
            err(&HF4_1B.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5"))
                .contains("num_attention_heads (32) is not a multiple of num_key_value_heads (5)")
        );
        assert!(err(&HF4_1B.replace("\"model_type\": \"llama\"", "\"model_type\": \"mistral\"")).contains("mistral"));
        assert!(err(&HF4_1B.replace("\"mlp_bias\": false", "\"mlp_bias\": true")).contains("mlp_bias"));
        assert!(err("{").contains("invalid config.json"));
        let missing = LlamaConfig::from_file(Path::new("/nonexistent/config.json")).unwrap_err();
        assert!(matches!(missing, Error::Io { .. }), "{missing}");
    }
}
