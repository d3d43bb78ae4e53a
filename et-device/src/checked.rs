//! The shapes a kernel was already launched with, and what checking them gave: the dims
//! they resolve to (every extent checked against its declaration, every op call against
//! its contract) and the tensors whose data the task graph reads.
//!
//! Solving the dims, checking the op calls and listing the data tensors took about 6 us
//! of host time per launch of the Llama step, and their result depends only on the
//! graph, the op calls and the shapes; a launch with the same three reuses it. The op
//! calls are `'static` tables of the kernel, compared by address (`'static` data is
//! never freed, so an equal address is the same table); a kernel whose tables sit
//! elsewhere is checked afresh. At most [`CAPACITY`] results are kept.

use et_core::graph::GraphSpec;
use et_core::graph::resolve::data_tensors;
use et_core::{Error, Kernel, RawTensor, TileOp};

use crate::cache::Lru;
use crate::states::same_spec;

/// Results kept per backend.
pub(crate) const CAPACITY: usize = 64;

/// What a launch's checks depend on.
pub(crate) struct CheckKey {
    spec: GraphSpec,
    ops: &'static [TileOp],
    smem: &'static [usize],
    sites: &'static [(u16, u16)],
    shapes: Vec<Vec<i64>>,
}

/// What the checks of one kernel and shapes gave.
pub(crate) struct Checked {
    /// The value of every dim.
    pub dims: Vec<i64>,
    /// The tensors whose integers the task graph reads (`data_tensors`).
    pub data: Vec<u16>,
}

/// A launch's [`CheckKey`], borrowed.
struct CheckProbe<'a> {
    kernel: &'a Kernel,
    args: &'a [RawTensor],
}

impl PartialEq<CheckProbe<'_>> for CheckKey {
    fn eq(&self, p: &CheckProbe<'_>) -> bool {
        let cuda = &p.kernel.cuda;
        // cheapest comparisons first
        std::ptr::eq(self.ops, cuda.ops)
            && std::ptr::eq(self.smem, cuda.smem)
            && std::ptr::eq(self.sites, cuda.sites)
            && self.shapes.len() == p.args.len()
            && self.shapes.iter().zip(p.args).all(|(s, a)| *s == a.shape)
            && same_spec(&self.spec, &p.kernel.graph)
    }
}

/// The checked launches of one backend.
pub(crate) type CheckCache = Lru<CheckKey, Checked>;

/// The dims and data tensors of a launch of `kernel` over `args`: from `cache` when this
/// kernel was launched with these shapes before, else solved and checked (the errors of
/// [`Kernel::dims_for`]) and remembered.
pub(crate) fn check<'c>(cache: &'c mut CheckCache, kernel: &Kernel, args: &[RawTensor]) -> Result<&'c Checked, Error> {
    let probe = CheckProbe { kernel, args };
    let (checked, _) = cache.get_or_try_insert(&probe, || {
        let shapes: Vec<Vec<i64>> = args.iter().map(|a| a.shape.clone()).collect();
        let dims = kernel.dims_for(&shapes)?;
        let key = CheckKey {
            spec: kernel.graph.clone(),
            ops: kernel.cuda.ops,
            smem: kernel.cuda.smem,
            sites: kernel.cuda.sites,
            shapes,
        };
        Ok::<_, Error>((key, Checked { dims, data: data_tensors(&kernel.graph) }))
    })?;
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use et_core::graph::resolve::resolve_dims;

    fn raw(shape: &[usize]) -> RawTensor {
        RawTensor::new(0x1000, et_core::DType::F32, shape)
    }

    #[test]
    fn a_result_serves_only_the_same_kernel_and_shapes() {
        let kernel = &splitk::split_row_sum::KERNEL; // a [R*32, 128], part [R*32, 4], c [R*32]
        let args = |r: usize| vec![raw(&[r * 32, 128]), raw(&[r * 32, 4]), raw(&[r * 32])];
        let mut cache = CheckCache::new(4);
        let dims = check(&mut cache, kernel, &args(2)).unwrap().dims.clone();
        assert_eq!(dims, resolve_dims(&kernel.graph, &[vec![64, 128], vec![64, 4], vec![64]]).unwrap());
        assert!(cache.get_or_try_insert(&CheckProbe { kernel, args: &args(2) }, || Err(())).is_ok(), "a hit");
        // other shapes, other dims
        assert!(cache.get_or_try_insert(&CheckProbe { kernel, args: &args(3) }, || Err(())).is_err());
        assert_eq!(check(&mut cache, kernel, &args(3)).unwrap().dims, [3]);
        // a kernel built at run time whose op tables live elsewhere is checked afresh
        assert!(!kernel.cuda.smem.is_empty(), "a leaked copy of an empty table could share its address");
        let mut moved = kernel.clone();
        moved.cuda.smem = Box::leak(kernel.cuda.smem.to_vec().into_boxed_slice());
        assert!(cache.get_or_try_insert(&CheckProbe { kernel: &moved, args: &args(2) }, || Err(())).is_err());
        // a graph that differs misses too
        let mut renamed = kernel.clone();
        renamed.graph.name = "renamed".into();
        assert!(cache.get_or_try_insert(&CheckProbe { kernel: &renamed, args: &args(2) }, || Err(())).is_err());
    }

    #[test]
    fn wrong_shapes_are_the_same_error_every_time_and_are_not_remembered() {
        let kernel = &splitk::split_row_sum::KERNEL;
        let bad = [raw(&[64, 128]), raw(&[64, 4]), raw(&[32])];
        let mut cache = CheckCache::new(4);
        let first = check(&mut cache, kernel, &bad).err().unwrap().to_string();
        let second = check(&mut cache, kernel, &bad).err().unwrap().to_string();
        assert_eq!(first, second);
        assert!(first.contains("`c`"), "{first}");
        assert!(cache.get_or_try_insert(&CheckProbe { kernel, args: &bad }, || Err(())).is_err(), "not cached");
    }
}
