//! The backend-neutral description of a tensor passed to a launch.

use crate::dtype::DType;

/// A tensor as a kernel argument: an address in the backend's memory (host or device),
/// a dtype, a shape and strides (in elements).
///
/// Plain data: making one is safe, launching with one is not ([`crate::Backend::launch`]
/// is `unsafe` and states what the addresses must satisfy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawTensor {
    /// Address of element 0 in the backend's address space.
    pub addr: u64,
    /// Element type.
    pub dtype: DType,
    /// Extents.
    pub shape: Vec<i64>,
    /// Strides in elements.
    pub strides: Vec<i64>,
}

impl RawTensor {
    /// A contiguous row-major tensor at `addr`.
    pub fn new(addr: u64, dtype: DType, shape: &[usize]) -> Self {
        // the strides of `row_major_strides`, without its intermediate vector: a launch
        // makes one of these per tensor argument, and allocations are most of their cost
        let mut strides = vec![0i64; shape.len()];
        let mut step = 1usize;
        for (k, &extent) in shape.iter().enumerate().rev() {
            strides[k] = i64::try_from(step).unwrap_or(i64::MAX);
            step = step.saturating_mul(extent);
        }
        RawTensor { addr, dtype, shape: signed(shape), strides }
    }

    /// Whether the strides are the contiguous row-major ones of the shape.
    pub(crate) fn is_row_major(&self) -> bool {
        let shape: Vec<usize> = self.shape.iter().map(|&e| e.max(0) as usize).collect();
        crate::tensor::row_major_strides(&shape).into_iter().map(|s| s as i64).eq(self.strides.iter().copied())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product::<i64>().max(0) as usize
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Extents or strides as the task graph takes them, saturated rather than wrapped: an
/// extent past `i64` is then one that resolution reports as too large, not a negative one.
pub(crate) fn signed(values: &[usize]) -> Vec<i64> {
    values.iter().map(|&v| i64::try_from(v).unwrap_or(i64::MAX)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_tensor_has_the_row_major_strides_saturated() {
        for shape in [&[][..], &[7], &[3, 5], &[2, 0, 4], &[128, 1024, 64], &[usize::MAX, 2, 3], &[3, usize::MAX, 2]] {
            let raw = RawTensor::new(0, DType::F32, shape);
            assert_eq!(raw.strides, signed(&crate::tensor::row_major_strides(shape)), "{shape:?}");
            assert_eq!(raw.shape, signed(shape));
            if shape.iter().all(|&e| e < 1 << 40) {
                assert!(raw.is_row_major(), "{shape:?}");
            }
        }
    }
}
