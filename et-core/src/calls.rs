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
                    if x.has_vars()
                        || x.terms.iter().any(|&(t, _)| matches!(t, et_graph::Term::Dim(d) if d as usize >= dims.len()))
                    {
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
            match unpanicked(|| (op.contract)(&refs)) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => return Err(fail(format!("is called with extents {shown} at this launch: {why}"))),
                Err(panic) => {
                    return Err(fail(format!("is called with extents {shown}, and its contract panicked: {panic}")));
                }
            }
            let need = unpanicked(|| (op.smem)(&refs)).map_err(|panic| {
                fail(format!("is called with extents {shown}, and its arena size panicked: {panic}"))
            })?;
            let have = self.cuda.smem.get(k).copied().unwrap_or(0);
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
        Error::Shape(format!(
            "megakernel `{}`: tile op `{op}` (call {call}) in tile group `{group}` {why}",
            self.name()
        ))
    }
}

/// Runs a user op's contract or arena function, which may index its extents past their
/// rank (a rule written for another shape): a panic becomes its message, so that the
/// launch returns an error naming the call instead of unwinding through the backend.
fn unpanicked<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string())
    })
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use et_graph::build::*;
    use et_graph::{Access, DType};

    use crate::kernel::{CudaSource, DEFAULT_THREADS, Kernel};
    use crate::ops::{add, gemv_prefetch};

    /// `g[i] in [1]` calls one op on tiles of `x: [B, 256]` sized `[B, 256]` (`by_batch`)
    /// or `[4, 256]`, `args` of them.
    fn kernel(op: crate::TileOp, args: usize, by_batch: bool, smem: &'static [usize]) -> Kernel {
        let rows = if by_batch { dim(0) } else { lit(4) };
        let tiles = (0..args).map(|_| tile_of(0, vec![lit(0), lit(0)], vec![rows.clone(), lit(256)], Access::Read));
        let graph = graph(
            "k",
            vec![symbolic("B")],
            vec![tensor("x", DType::BF16, vec![dim(0), lit(256)], Access::Read)],
            vec![],
            vec![with_tiles(group("g", &["i"], vec![lit(1)], vec![], vec![]), tiles.collect())],
        );
        let ops: &'static [crate::TileOp] = Box::leak(Box::new([op]));
        let cuda = CudaSource { body: Cow::Borrowed(""), ops, block_threads: DEFAULT_THREADS, smem, sites: &[(0, 0)] };
        Kernel { graph, cuda, module_path: "m", file: "f.rs" }
    }

    #[test]
    fn symbolic_calls_are_checked_with_the_launch_dims() {
        assert!(kernel(add::OP, 3, true, &[0]).check_op_calls(&[5]).is_ok());
        // two tiles for add's three tile parameters: named, not a panic
        let err = kernel(add::OP, 2, true, &[0]).check_op_calls(&[5]).unwrap_err().to_string();
        assert!(err.contains("fewer tiles than the op's tile parameters"), "{err}");
        // constant extents were checked at compile time: not again here
        assert!(kernel(add::OP, 2, false, &[0]).check_op_calls(&[5]).is_ok());
    }

    #[test]
    fn a_contract_or_arena_size_that_panics_is_an_error_naming_the_call() {
        // rules written for a rank-3 tile, called with a rank-2 one
        let third = |e: &[&[usize]]| if e[0][2] > 0 { Ok(()) } else { Err("never") };
        let op = crate::TileOp { contract: third, ..add::OP };
        let err = kernel(op, 3, true, &[0]).check_op_calls(&[5]).unwrap_err().to_string();
        assert!(err.contains("megakernel `k`: tile op `et_core::ops::elementwise::add` (call 0)"), "{err}");
        assert!(err.contains("[5, 256]") && err.contains("its contract panicked: index out of bounds"), "{err}");
        let op = crate::TileOp { smem: |e| e[0][2], uses_smem: true, ..add::OP };
        let err = kernel(op, 3, true, &[0]).check_op_calls(&[5]).unwrap_err().to_string();
        assert!(err.contains("its arena size panicked: index out of bounds"), "{err}");
    }

    #[test]
    fn an_arena_larger_than_compiled_is_an_error_naming_the_call() {
        let need = |b: usize| (gemv_prefetch::OP.smem)(&[&[b, 256]]);
        let k = kernel(gemv_prefetch::OP, 1, true, Box::leak(Box::new([need(8)])));
        assert!(k.check_op_calls(&[8]).is_ok());
        let err = k.check_op_calls(&[16]).unwrap_err().to_string();
        assert!(err.contains("megakernel `k`: tile op `et_core::ops::prefetch::gemv_prefetch` (call 0)"), "{err}");
        assert!(err.contains("in tile group `g`") && err.contains(&format!("compiled with {}", need(8))), "{err}");
        let err = k.check_op_calls(&[0]).unwrap_err().to_string();
        assert!(err.contains("tile extent of 0"), "{err}");
    }
}
