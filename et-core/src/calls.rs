//! The launch-time check of op calls whose tiles have symbolic extents (`x.tile([0, j],
//! [B, 64])`): their shape contract and arena need the dims' values, so every backend
//! checks them here, before anything runs. Calls with constant extents were checked when
//! the megakernel compiled.

use et_graph::{ArgKind, TileAccess};

use crate::error::{Error, Result};
use crate::kernel::Kernel;

impl Kernel {
    /// Checks each op call that has a symbolic tile extent against its op's contract at
    /// these `dims` (the launch's values, in the graph's dim order), and its arena bytes
    /// against the bytes the kernel was compiled with. The error names the megakernel,
    /// the op, the tile group and the extents.
    pub fn check_op_calls(&self, dims: &[i64]) -> Result<()> {
        for (k, (op, &(g, stmt))) in self.cuda.ops.iter().zip(self.cuda.sites).enumerate() {
            let Some(group) = self.graph.groups.get(g as usize) else {
                return Err(self.call_error(k, op.path, "?", format!("names tile group {g}, which does not exist")));
            };
            let tiles: Vec<&TileAccess> = group.tiles.iter().filter(|t| t.stmt == stmt).collect();
            if tiles.iter().all(|t| t.size.iter().all(|x| x.as_constant().is_some())) {
                continue;
            }
            let fail = |why: String| self.call_error(k, op.path, &group.name, why);
            let mut tiles = tiles.into_iter();
            let mut extents: Vec<Vec<usize>> = Vec::with_capacity(op.args.len());
            for kind in op.args {
                if *kind == ArgKind::Scalar {
                    extents.push(Vec::new());
                    continue;
                }
                let tile = tiles.next().ok_or_else(|| fail("has fewer tiles than the op's tile parameters".into()))?;
                let mut e = Vec::with_capacity(tile.size.len());
                for x in tile.size.iter() {
                    if x.has_vars() || x.terms.iter().any(|&(t, _)| matches!(t, et_graph::Term::Dim(d) if d as usize >= dims.len())) {
                        return Err(fail("has a tile extent that is not an expression of the dims".into()));
                    }
                    let v = x.eval(&[], dims);
                    if !(1..=i32::MAX as i64).contains(&v) {
                        return Err(fail(format!("has a tile extent of {v}, outside 1 ..= {}", i32::MAX)));
                    }
                    e.push(v as usize);
                }
                extents.push(e);
            }
            if tiles.next().is_some() {
                return Err(fail("has more tiles than the op's tile parameters".into()));
            }
            let refs: Vec<&[usize]> = extents.iter().map(Vec::as_slice).collect();
            let shown = extents.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(", ");
            if let Err(why) = (op.contract)(&refs) {
                return Err(fail(format!("is called with extents {shown} at this launch: {why}")));
            }
            let (need, have) = ((op.smem)(&refs), self.cuda.smem.get(k).copied().unwrap_or(0));
            if op.uses_smem && need > have {
                return Err(fail(format!(
                    "needs {need} bytes of shared-memory arena at extents {shown}, but the kernel was compiled \
                     with {have} (its size at the dims' declared maxima)"
                )));
            }
        }
        Ok(())
    }

    fn call_error(&self, call: usize, op: &str, group: &str, why: String) -> Error {
        Error::Shape(format!("megakernel `{}`: tile op `{op}` (call {call}) in tile group `{group}` {why}", self.name()))
    }
}
