//! The layer's shapes and the sizes of the per-token-count capacity layout (used by
//! `host` and the kernel-per-operator baseline; the megakernel's own layout, which does not
//! depend on the token count, is `crate::layer::Layout`).

/// The shapes of one MoE layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeConfig {
    /// Hidden size `H` (the tokens' width).
    pub hidden: usize,
    /// Experts `E`.
    pub experts: usize,
    /// Experts per token `K`.
    pub top_k: usize,
    /// An expert's intermediate size `I`.
    pub inter: usize,
}

/// Rows of a token tile: an expert's tokens are processed 16 at a time (the GEMV family's
/// tensor-core unit), or all at once below 16 tokens.
pub const TOKEN_TILE: usize = 16;

impl MoeConfig {
    /// Qwen3-30B-A3B's MoE block.
    pub const QWEN3_MOE: MoeConfig = MoeConfig { hidden: 2048, experts: 128, top_k: 8, inter: 768 };
    /// A small layer for CPU tests.
    pub const TINY: MoeConfig = MoeConfig { hidden: 64, experts: 8, top_k: 2, inter: 32 };

    /// A preset by name: `qwen3-moe` or `tiny`.
    pub fn preset(name: &str) -> Result<MoeConfig, String> {
        match name {
            "qwen3-moe" => Ok(Self::QWEN3_MOE),
            "tiny" => Ok(Self::TINY),
            _ => Err(format!("unknown config `{name}` (known: qwen3-moe, tiny)")),
        }
    }

    /// The rows of a token tile at `tokens` tokens: 16, or the token count below 16.
    pub fn tile_rows(tokens: usize) -> usize {
        tokens.clamp(1, TOKEN_TILE)
    }

    /// Token tiles per expert (`MT`): enough tiles of [`Self::tile_rows`] to hold every token.
    pub fn token_tiles(tokens: usize) -> usize {
        tokens.max(1).div_ceil(Self::tile_rows(tokens))
    }

    /// Row slots per expert in the capacity layout (`C = rows · MT ≥ tokens`).
    pub fn capacity(tokens: usize) -> usize {
        Self::tile_rows(tokens) * Self::token_tiles(tokens)
    }

    /// Checks that the sizes make a layer.
    pub fn validate(&self) -> Result<(), String> {
        if self.hidden == 0 || self.experts == 0 || self.inter == 0 {
            return Err(format!("{self:?}: every size must be positive"));
        }
        if !self.inter.is_multiple_of(self.up_rows()) || !self.hidden.is_multiple_of(self.down_rows()) {
            return Err(format!("{self:?}: inter must be a multiple of 64 (or below it), hidden of 128 (or below it)"));
        }
        if self.top_k == 0 || self.top_k > self.experts || self.top_k > 64 {
            return Err(format!("{self:?}: top_k must be 1 to min(experts, 64)"));
        }
        Ok(())
    }

    /// Weight rows of a gate/up task (`NI`): 64, or the whole intermediate size below it.
    pub fn up_rows(&self) -> usize {
        self.inter.min(64)
    }

    /// Weight rows of a down task (`ND`): 128, or the whole hidden size below it.
    pub fn down_rows(&self) -> usize {
        self.hidden.min(128)
    }

    /// Experts of a router task (`EQ`): the largest of 16, 8, 4, 2 that divides the
    /// experts and is fewer, so the router is read in two slices at least (one task for
    /// every expert read the whole router in one CTA); all of them for a single expert.
    pub fn router_rows(&self) -> usize {
        [16, 8, 4, 2].into_iter().find(|&r| r < self.experts && self.experts.is_multiple_of(r)).unwrap_or(self.experts)
    }

    /// Bytes of one expert's weights (gate, up and down, bf16).
    pub fn expert_bytes(&self) -> usize {
        3 * self.hidden * self.inter * 2
    }

    /// Bytes of the router weight (bf16).
    pub fn router_bytes(&self) -> usize {
        self.experts * self.hidden * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capacity_holds_every_token_in_whole_tiles() {
        for t in [1, 3, 8, 15, 16, 17, 128, 1000, 1024] {
            let (r, mt) = (MoeConfig::tile_rows(t), MoeConfig::token_tiles(t));
            assert!(r * mt >= t && r * (mt - 1) < t, "{t} tokens: {r} x {mt}");
        }
        assert_eq!((MoeConfig::tile_rows(1), MoeConfig::token_tiles(1)), (1, 1));
        assert_eq!((MoeConfig::tile_rows(1024), MoeConfig::token_tiles(1024)), (16, 64));
        assert!(MoeConfig::preset("qwen3-moe").unwrap().validate().is_ok());
        assert!(MoeConfig::preset("nope").unwrap_err().contains("unknown config"));
        assert!(MoeConfig { top_k: 9, ..MoeConfig::TINY }.validate().is_err());
        // the router slices of the stamps (`layer::moe_layer!`'s EQ)
        assert_eq!((MoeConfig::QWEN3_MOE.router_rows(), MoeConfig::TINY.router_rows()), (16, 4));
        assert_eq!(MoeConfig { experts: 1, ..MoeConfig::TINY }.router_rows(), 1);
    }
}
