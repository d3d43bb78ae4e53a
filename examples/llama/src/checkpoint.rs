//! Hugging Face model directories: `config.json` plus `model.safetensors`, or shards listed
//! by `model.safetensors.index.json`.
//!
//! Tensors keep HF's names (see [`LlamaWeights::named`]); bf16, f16 and f32 checkpoints
//! load, converted to bf16 (rounding to nearest even). Each shard is read whole and copied
//! into the stacked tensors before the next is read, so memory peaks at the weights plus
//! one shard.

use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use crate::weights::LlamaWeights;
use et_core::{bf16, f16};
use safetensors::{Dtype, SafeTensorError, SafeTensors, tensor::TensorView};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The model config's file name.
pub const CONFIG: &str = "config.json";
/// The file name of an unsharded checkpoint.
pub const SINGLE: &str = "model.safetensors";
/// The file name of a sharded checkpoint's index.
pub const INDEX: &str = "model.safetensors.index.json";

/// The part of `model.safetensors.index.json` that says which file holds which tensor.
#[derive(Deserialize)]
struct Index {
    weight_map: HashMap<String, String>,
}

/// Whether `name` names a file directly inside the model directory: one normal path
/// component, so that an index cannot send the loader to `../` or an absolute path.
fn is_plain_file_name(name: &str) -> bool {
    let mut parts = Path::new(name).components();
    matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(_)), None))
}

/// One destination of a load: a tensor's HF name, expected shape and storage.
type Slot<'a> = (String, Vec<usize>, &'a mut [bf16]);

impl LlamaConfig {
    /// The config of a Hugging Face model directory (its `config.json`), without its
    /// weights: enough to pick and compile the megakernel while they load.
    pub fn from_model_dir(dir: &Path) -> Result<Self> {
        LlamaConfig::from_file(&dir.join(CONFIG))
    }
}

impl LlamaWeights {
    /// Reads a Hugging Face model directory. A tied model's `lm_head.weight`, if present,
    /// is ignored; every other tensor must be present with its exact shape.
    pub fn load(dir: &Path) -> Result<Self> {
        let config = LlamaConfig::from_model_dir(dir)?;
        let mut weights = LlamaWeights::zeros(&config)?;
        let mut by_file: BTreeMap<String, Vec<Slot<'_>>> = BTreeMap::new();
        let index_path = dir.join(INDEX);
        if index_path.exists() {
            let text = std::fs::read_to_string(&index_path).map_err(Error::io(&index_path))?;
            let index: Index =
                serde_json::from_str(&text).map_err(|e| Error::format(&index_path)(format!("invalid index: {e}")))?;
            for slot in weights.named_mut() {
                let Some(file) = index.weight_map.get(&slot.0) else {
                    return Err(Error::MissingTensor { name: slot.0, path: index_path });
                };
                if !is_plain_file_name(file) {
                    let message = format!("`{}` is in `{file}`, which is not a file name inside the directory", slot.0);
                    return Err(Error::format(&index_path)(message));
                }
                by_file.entry(file.clone()).or_default().push(slot);
            }
        } else {
            by_file.insert(SINGLE.to_string(), weights.named_mut());
        }
        for (file, slots) in by_file {
            let path = dir.join(file);
            let bytes = std::fs::read(&path).map_err(Error::io(&path))?;
            let st = SafeTensors::deserialize(&bytes).map_err(|e| Error::format(&path)(e.to_string()))?;
            for (name, shape, out) in slots {
                let view = match st.tensor(&name) {
                    Ok(view) => view,
                    Err(SafeTensorError::TensorNotFound(_)) => return Err(Error::MissingTensor { name, path }),
                    Err(e) => return Err(Error::format(&path)(e.to_string())),
                };
                let bad = |message| Error::BadTensor { name: name.clone(), path: path.clone(), message };
                if view.shape() != shape {
                    return Err(bad(format!("shape {:?}, expected {shape:?}", view.shape())));
                }
                convert(&view, out).map_err(bad)?;
            }
        }
        Ok(weights)
    }

    /// Writes a Hugging Face model directory (created if needed) with bf16 tensors: one
    /// `model.safetensors` for `shards == 1`, else the tensors split in order over at most
    /// `shards` files `model-0000k-of-0000n.safetensors` and an index.
    pub fn save(&self, dir: &Path, shards: usize) -> Result<()> {
        if shards == 0 {
            return Err(Error::Input("a checkpoint needs at least one shard".into()));
        }
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        let config_path = dir.join(CONFIG);
        std::fs::write(&config_path, self.config.to_hf_json()).map_err(Error::io(&config_path))?;
        let named = self.named();
        let per_file = named.len().div_ceil(shards);
        let files = named.len().div_ceil(per_file);
        let mut weight_map = BTreeMap::new();
        let mut total_size = 0;
        for (k, chunk) in named.chunks(per_file).enumerate() {
            let file =
                if files == 1 { SINGLE.to_string() } else { format!("model-{:05}-of-{files:05}.safetensors", k + 1) };
            let bytes: Vec<Vec<u8>> = chunk
                .iter()
                .map(|(_, _, data)| data.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect())
                .collect();
            let path = dir.join(&file);
            let views = chunk
                .iter()
                .zip(&bytes)
                .map(|((name, shape, _), b)| Ok((name.as_str(), TensorView::new(Dtype::BF16, shape.clone(), b)?)))
                .collect::<Result<Vec<_>, SafeTensorError>>()
                .map_err(|e| Error::format(&path)(e.to_string()))?;
            safetensors::serialize_to_file(views, None, &path).map_err(|e| Error::format(&path)(e.to_string()))?;
            total_size += bytes.iter().map(Vec::len).sum::<usize>();
            weight_map.extend(chunk.iter().map(|(name, ..)| (name.clone(), file.clone())));
        }
        if files > 1 {
            let index = serde_json::json!({ "metadata": { "total_size": total_size }, "weight_map": weight_map });
            let path = dir.join(INDEX);
            std::fs::write(&path, serde_json::to_string_pretty(&index).expect("a JSON value always serializes"))
                .map_err(Error::io(&path))?;
        }
        Ok(())
    }
}

/// Copies a checkpoint tensor (little-endian bf16, f16 or f32) into bf16 storage of the
/// same number of elements.
fn convert(view: &TensorView<'_>, out: &mut [bf16]) -> Result<(), String> {
    let data = view.data();
    let pairs = || data.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    match view.dtype() {
        Dtype::BF16 => out.iter_mut().zip(pairs()).for_each(|(o, b)| *o = bf16::from_bits(b)),
        Dtype::F16 => out.iter_mut().zip(pairs()).for_each(|(o, b)| *o = bf16::from_f32(f16::from_bits(b).to_f32())),
        Dtype::F32 => out
            .iter_mut()
            .zip(data.chunks_exact(4))
            .for_each(|(o, c)| *o = bf16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        other => return Err(format!("dtype {other:?} is not supported (bf16, f16 or f32)")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory under the system's temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("llama-checkpoint-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tiny(tied: bool) -> LlamaWeights {
        let c = LlamaConfig { tie_word_embeddings: tied, ..LlamaConfig::preset("tiny").unwrap() };
        LlamaWeights::random(&c, 42).unwrap()
    }

    /// Rewrites every tensor of `file` with `to` applied to its bf16 values.
    fn rewrite(file: &Path, dtype: Dtype, to: impl Fn(bf16) -> Vec<u8>) {
        let bytes = std::fs::read(file).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let data: Vec<(String, Vec<usize>, Vec<u8>)> = st
            .iter()
            .map(|(name, v)| {
                let values = v.data().chunks_exact(2).map(|c| bf16::from_bits(u16::from_le_bytes([c[0], c[1]])));
                (name.to_string(), v.shape().to_vec(), values.flat_map(&to).collect())
            })
            .collect();
        let views = data.iter().map(|(n, s, b)| (n.as_str(), TensorView::new(dtype, s.clone(), b).unwrap()));
        safetensors::serialize_to_file(views, None, file).unwrap();
    }

    #[test]
    fn unsharded_and_sharded_round_trip_exactly() {
        for (tied, shards) in [(true, 1), (false, 1), (true, 4), (false, 7)] {
            let w = tiny(tied);
            let dir = TempDir::new(&format!("rt-{tied}-{shards}"));
            w.save(&dir.0, shards).unwrap();
            assert_eq!(dir.0.join(INDEX).exists(), shards > 1);
            if shards == 4 {
                assert!(dir.0.join("model-00004-of-00004.safetensors").exists());
            }
            assert_eq!(LlamaWeights::load(&dir.0).unwrap(), w, "tied {tied}, {shards} shards");
        }
    }

    #[test]
    fn f32_and_f16_checkpoints_convert_to_bf16() {
        let w = tiny(false);
        let dir = TempDir::new("f32");
        w.save(&dir.0, 1).unwrap();
        rewrite(&dir.0.join(SINGLE), Dtype::F32, |v| v.to_f32().to_le_bytes().to_vec());
        assert_eq!(LlamaWeights::load(&dir.0).unwrap(), w);
        // f16 has fewer exponent bits than bf16: expect the values through f16 and back
        w.save(&dir.0, 1).unwrap();
        rewrite(&dir.0.join(SINGLE), Dtype::F16, |v| f16::from_f32(v.to_f32()).to_bits().to_le_bytes().to_vec());
        let loaded = LlamaWeights::load(&dir.0).unwrap();
        let via_f16 = |t: &et_core::Tensor<bf16>| -> Vec<bf16> {
            t.as_slice().iter().map(|v| bf16::from_f32(f16::from_f32(v.to_f32()).to_f32())).collect()
        };
        assert_eq!(loaded.wq.as_slice(), via_f16(&w.wq));
        assert_eq!(loaded.head().as_slice(), via_f16(w.head()));
        w.save(&dir.0, 1).unwrap();
        rewrite(&dir.0.join(SINGLE), Dtype::I16, |v| v.to_bits().to_le_bytes().to_vec());
        let err = LlamaWeights::load(&dir.0).unwrap_err().to_string();
        assert!(err.contains("is not supported (bf16, f16 or f32)") && err.contains("tensor `"), "{err}");
    }

    #[test]
    fn tied_checkpoint_may_carry_an_lm_head() {
        let untied = tiny(false);
        let dir = TempDir::new("tied-extra");
        untied.save(&dir.0, 1).unwrap();
        let config = LlamaConfig { tie_word_embeddings: true, ..untied.config.clone() };
        std::fs::write(dir.0.join(CONFIG), config.to_hf_json()).unwrap();
        let loaded = LlamaWeights::load(&dir.0).unwrap();
        assert!(loaded.lm_head.is_none() && loaded.embed == untied.embed);
    }

    #[test]
    fn missing_and_misshapen_tensors_are_named() {
        let w = tiny(false);
        let dir = TempDir::new("errors");
        w.save(&dir.0, 1).unwrap();
        // drop one tensor, reshape another
        let file = dir.0.join(SINGLE);
        let bytes = std::fs::read(&file).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let kept: Vec<(String, TensorView<'_>)> =
            st.tensors().into_iter().filter(|(n, _)| n != "model.layers.1.mlp.up_proj.weight").collect();
        safetensors::serialize_to_file(kept.clone(), None, &file).unwrap();
        let err = LlamaWeights::load(&dir.0).unwrap_err();
        assert!(matches!(err, Error::MissingTensor { .. }), "{err}");
        assert!(err.to_string().contains("tensor `model.layers.1.mlp.up_proj.weight` is missing from"), "{err}");

        let reshaped = kept.into_iter().map(|(n, v)| {
            if n == "model.norm.weight" {
                (n, TensorView::new(v.dtype(), vec![8, 16], v.data()).unwrap())
            } else {
                (n, v)
            }
        });
        let mut all: Vec<_> = reshaped.collect();
        let up = st.tensor("model.layers.1.mlp.up_proj.weight").unwrap();
        all.push(("model.layers.1.mlp.up_proj.weight".into(), up));
        safetensors::serialize_to_file(all, None, &file).unwrap();
        let err = LlamaWeights::load(&dir.0).unwrap_err().to_string();
        assert!(err.contains("tensor `model.norm.weight`") && err.contains("shape [8, 16], expected [128]"), "{err}");

        // a sharded checkpoint whose index omits a tensor
        let sharded = TempDir::new("errors-index");
        w.save(&sharded.0, 3).unwrap();
        let index = std::fs::read_to_string(sharded.0.join(INDEX)).unwrap();
        let index = index.replace("\"lm_head.weight\"", "\"lm_head.weight.renamed\"");
        std::fs::write(sharded.0.join(INDEX), index).unwrap();
        let err = LlamaWeights::load(&sharded.0).unwrap_err().to_string();
        assert!(err.contains("tensor `lm_head.weight` is missing from") && err.contains(INDEX), "{err}");

        // a sharded checkpoint whose index points outside the directory
        let escaping = TempDir::new("errors-escape");
        w.save(&escaping.0, 2).unwrap();
        let index = std::fs::read_to_string(escaping.0.join(INDEX)).unwrap();
        for bad in ["../model-00001-of-00002.safetensors", "/etc/passwd", "a/b.safetensors", ""] {
            let index = index.replacen("\"model-00001-of-00002.safetensors\"", &format!("{bad:?}"), 1);
            std::fs::write(escaping.0.join(INDEX), index).unwrap();
            let err = LlamaWeights::load(&escaping.0).unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`, which is not a file name inside the directory")), "{err}");
        }

        let err = LlamaWeights::load(Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/config.json"), "{err}");
    }
}
