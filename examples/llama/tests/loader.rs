//! `LlamaWeights::load` on model directories whose `config.json` describes weights no
//! memory holds: a config error naming the tensor and its shape, before any allocation
//! (not an allocation abort or a capacity-overflow panic).

use std::path::PathBuf;

use llama::{Error, LlamaWeights};

/// A fresh directory under the system's temp dir holding `config.json`, removed on drop.
struct ModelDir(PathBuf);

impl ModelDir {
    fn with_config(tag: &str, config: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("llama-loader-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), config).unwrap();
        ModelDir(dir)
    }
}

impl Drop for ModelDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

fn config(hidden: u64, inter: u64, layers: u64, heads: u64, vocab: u64) -> String {
    format!(
        r#"{{"model_type": "llama", "hidden_size": {hidden}, "intermediate_size": {inter},
            "num_hidden_layers": {layers}, "num_attention_heads": {heads}, "vocab_size": {vocab}}}"#
    )
}

#[test]
fn sizes_too_large_for_memory_are_a_config_error_naming_the_tensor() {
    // 4e9 x 4096 bf16: 30 TiB of embedding
    let dir = ModelDir::with_config("huge-vocab", &config(4096, 14336, 2, 32, 4_000_000_000));
    let err = LlamaWeights::load(&dir.0).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("`model.embed_tokens.weight` of shape [4000000000, 4096]"), "{text}");
    assert!(text.contains("cannot be allocated"), "{text}");

    // 2e8 layers of a small model: the stacked per-layer norms alone take 48 GiB
    let dir = ModelDir::with_config("huge-depth", &config(128, 256, 200_000_000, 4, 256));
    let text = LlamaWeights::load(&dir.0).unwrap_err().to_string();
    assert!(text.contains("`model.layers.*.input_layernorm.weight` of shape [200000000, 128]"), "{text}");
}

#[test]
fn sizes_whose_product_overflows_are_a_config_error() {
    // a [2^30, 2^40] embedding: 2^70 elements
    let huge = 1u64 << 40;
    let dir = ModelDir::with_config("overflow", &config(huge, huge, 2, 1, 1 << 30));
    let err = LlamaWeights::load(&dir.0).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert!(err.to_string().contains("overflow"), "{err}");
}
