//! Compressed lists of lists, the adjacency format of the resolved graph and the device.

/// A compressed list of lists (`offsets.len() == rows + 1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Csr {
    /// Row `r` is `items[offsets[r] .. offsets[r + 1]]`.
    pub offsets: Vec<u32>,
    /// Concatenated rows.
    pub items: Vec<u32>,
}

impl Csr {
    /// Packs `rows`; `None` when the items do not fit the device's 32-bit offsets.
    pub(crate) fn from_rows(rows: &[Vec<u32>]) -> Option<Csr> {
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        let mut items = Vec::new();
        offsets.push(0);
        for r in rows {
            items.extend_from_slice(r);
            offsets.push(u32::try_from(items.len()).ok()?);
        }
        Some(Csr { offsets, items })
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> &[u32] {
        &self.items[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }
}
