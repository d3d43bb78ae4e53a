//! The key/value cache of a batch of sequences.

use crate::config::LlamaConfig;
use et_core::{Tensor, bf16};

/// Keys and values of every layer, sequence, KV head and position, in bf16, each
/// `[L, B, kv_heads, max_pos, head_dim]`: one head's positions are contiguous, so that
/// attention reads a sequence's history as one block.
#[derive(Clone, Debug, PartialEq)]
pub struct KvCache {
    /// Keys after RoPE.
    pub k: Tensor<bf16>,
    /// Values.
    pub v: Tensor<bf16>,
}

impl KvCache {
    /// An all-zero cache for `batch` sequences of at most `max_pos` positions.
    pub fn new(config: &LlamaConfig, batch: usize, max_pos: usize) -> Self {
        let shape = [config.num_layers, batch, config.num_kv_heads, max_pos, config.head_dim];
        KvCache { k: Tensor::zeros(&shape), v: Tensor::zeros(&shape) }
    }

    /// Number of sequences.
    pub fn batch(&self) -> usize {
        self.k.shape()[1]
    }

    /// Number of positions each sequence can hold.
    pub fn max_pos(&self) -> usize {
        self.k.shape()[3]
    }

    /// Whether the cache has the layer and head shapes of `config`.
    pub fn fits(&self, config: &LlamaConfig) -> bool {
        let s = self.k.shape();
        (s[0], s[2], s[4]) == (config.num_layers, config.num_kv_heads, config.head_dim)
    }

    /// Element offset of position 0 of one head.
    fn head_start(&self, layer: usize, seq: usize, kv_head: usize) -> usize {
        let s = self.k.shape();
        ((layer * s[1] + seq) * s[2] + kv_head) * s[3] * s[4]
    }

    /// Stores one head's key and value (bf16 numbers held in f32) at `pos`.
    pub fn write(&mut self, layer: usize, seq: usize, kv_head: usize, pos: usize, k: &[f32], v: &[f32]) {
        let d = self.k.shape()[4];
        let at = self.head_start(layer, seq, kv_head) + pos * d;
        for (dst, src) in [(&mut self.k, k), (&mut self.v, v)] {
            dst.as_mut_slice()[at..at + d].iter_mut().zip(src).for_each(|(o, x)| *o = bf16::from_f32(*x));
        }
    }

    /// Keys and values of positions `0..len` of one head, `len` rows of `head_dim` each.
    pub fn history(&self, layer: usize, seq: usize, kv_head: usize, len: usize) -> (&[bf16], &[bf16]) {
        let at = self.head_start(layer, seq, kv_head);
        let n = len * self.k.shape()[4];
        (&self.k.as_slice()[at..at + n], &self.v.as_slice()[at..at + n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_land_in_their_head_and_position() {
        let c = LlamaConfig::preset("tiny").unwrap();
        let mut cache = KvCache::new(&c, 3, 5);
        assert_eq!((cache.batch(), cache.max_pos(), cache.fits(&c)), (3, 5, true));
        let k: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let v: Vec<f32> = (0..64).map(|i| -(i as f32)).collect();
        cache.write(1, 2, 1, 4, &k, &v);
        assert_eq!(cache.k.get(&[1, 2, 1, 4, 7]).to_f32(), 7.0);
        assert_eq!(cache.v.get(&[1, 2, 1, 4, 15]).to_f32(), -15.0);
        let (keys, values) = cache.history(1, 2, 1, 5);
        assert_eq!((keys.len(), keys[4 * 64 + 3].to_f32(), values[4 * 64 + 3].to_f32()), (320, 3.0, -3.0));
        assert!(keys[..256].iter().all(|x| x.to_f32() == 0.0));
        let nonzero = cache.k.as_slice().iter().filter(|x| x.to_f32() != 0.0).count();
        assert_eq!(nonzero, 63);
    }
}
