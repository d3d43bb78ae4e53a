//! Host tensors: contiguous row-major storage with a shape.

use crate::dtype::Element;
use crate::raw::RawTensor;
use et_graph::schedule::SplitMix64;

/// A contiguous, row-major tensor in host memory.
///
/// This is the CPU backend's tensor and the staging type for device tensors.
#[derive(Clone, PartialEq)]
pub struct Tensor<T: Element> {
    shape: Vec<usize>,
    data: Vec<T>,
}

impl<T: Element> std::fmt::Debug for Tensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor<{}>{:?}", T::DTYPE, self.shape)
    }
}

/// The number of elements of `shape`, or `None` when the product of its nonzero extents
/// overflows `i64`: a kernel argument's extents and row-major strides are `i64`, and every
/// stride is at most that product (`[0, 2^40, 2^40]` holds no element, but its first
/// stride would overflow).
///
/// Checked because a wrapped product would size the storage below the shape, and a launch
/// trusts the shape: tiles are bounds-checked against it, not against the storage.
fn element_count(shape: &[usize]) -> Option<usize> {
    let nonzero = shape.iter().filter(|&&d| d != 0).try_fold(1i64, |n, &d| n.checked_mul(i64::try_from(d).ok()?))?;
    usize::try_from(nonzero).ok().map(|n| if shape.contains(&0) { 0 } else { n })
}

/// [`element_count`], for constructors that cannot return an error.
fn element_count_or_panic(shape: &[usize]) -> usize {
    element_count(shape)
        .unwrap_or_else(|| panic!("tensor shape {shape:?} is too large: its extents' product passes 2^63"))
}

impl<T: Element> Tensor<T> {
    /// A tensor of `shape` filled with `value`.
    ///
    /// # Panics
    /// When the number of elements overflows `usize` (as `vec!` does when it cannot
    /// allocate them).
    pub fn full(shape: &[usize], value: T) -> Self {
        Tensor { shape: shape.to_vec(), data: vec![value; element_count_or_panic(shape)] }
    }

    /// A tensor of zeros.
    pub fn zeros(shape: &[usize]) -> Self {
        Self::full(shape, T::default())
    }

    /// A tensor filled with [`Element::poison`], so that unwritten outputs show.
    pub fn poisoned(shape: &[usize]) -> Self {
        Self::full(shape, T::poison())
    }

    /// Wraps row-major data. Errors when `data.len()` is not the product of `shape` (or
    /// that product overflows `usize`).
    pub fn from_vec(shape: &[usize], data: Vec<T>) -> Result<Self, crate::Error> {
        let Some(n) = element_count(shape) else {
            return Err(crate::Error::Shape(format!(
                "Tensor::from_vec: shape {shape:?} is too large: its extents' product passes 2^63"
            )));
        };
        if n != data.len() {
            return Err(crate::Error::Shape(format!(
                "Tensor::from_vec: shape {shape:?} holds {n} elements, but {} were given",
                data.len()
            )));
        }
        Ok(Tensor { shape: shape.to_vec(), data })
    }

    /// A tensor of values drawn uniformly from `[-1, 1)` with a seeded generator.
    ///
    /// # Panics
    /// As [`Tensor::full`].
    pub fn random(shape: &[usize], seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let n = element_count_or_panic(shape);
        Tensor { shape: shape.to_vec(), data: (0..n).map(|_| T::from_f32(rng.unit_f32() * 2.0 - 1.0)).collect() }
    }

    /// The extents.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements in row-major order.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The elements in row-major order, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Consumes the tensor, returning its elements.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        row_major_strides(&self.shape)
    }

    fn flat(&self, index: &[usize]) -> usize {
        assert_eq!(index.len(), self.shape.len(), "index rank");
        index.iter().zip(&self.shape).zip(self.strides()).fold(0, |acc, ((&i, &s), st)| {
            assert!(i < s, "index {index:?} out of bounds for shape {:?}", self.shape);
            acc + i * st
        })
    }

    /// The element at `index`. Panics when out of bounds.
    pub fn get(&self, index: &[usize]) -> T {
        self.data[self.flat(index)]
    }

    /// Sets the element at `index`. Panics when out of bounds.
    pub fn set(&mut self, index: &[usize], value: T) {
        let k = self.flat(index);
        self.data[k] = value;
    }

    /// Converts every element through `f32`.
    pub fn to_f32(&self) -> Tensor<f32> {
        Tensor { shape: self.shape.clone(), data: self.data.iter().map(|v| v.to_f32()).collect() }
    }

    /// Converts every element from `f32` (rounding for 16-bit floats).
    pub fn from_f32(t: &Tensor<f32>) -> Self {
        Tensor { shape: t.shape.clone(), data: t.data.iter().map(|&v| T::from_f32(v)).collect() }
    }

    /// The kernel-argument view of this tensor for reading (host address).
    pub fn raw(&self) -> RawTensor {
        RawTensor::new(self.data.as_ptr() as u64, T::DTYPE, &self.shape)
    }

    /// The kernel-argument view of this tensor for writing: the address comes from a
    /// unique borrow, so writes through it do not alias a shared one.
    pub fn raw_mut(&mut self) -> RawTensor {
        RawTensor::new(self.data.as_mut_ptr() as u64, T::DTYPE, &self.shape)
    }
}

/// Row-major strides of `shape`, in elements (saturating at `usize::MAX` for a shape no
/// tensor can have: the constructors refuse those).
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1].saturating_mul(shape[k + 1]);
    }
    strides
}

/// How close two tensors are: `‖a − b‖ / ‖b‖` over all elements, computed in f64, with
/// `f64::INFINITY` when either holds a NaN or the shapes differ.
pub fn relative_error<A: Element, B: Element>(a: &Tensor<A>, b: &Tensor<B>) -> f64 {
    if a.shape() != b.shape() {
        return f64::INFINITY;
    }
    let (mut num, mut den) = (0f64, 0f64);
    for (x, y) in a.as_slice().iter().zip(b.as_slice()) {
        let (x, y) = (x.to_f32() as f64, y.to_f32() as f64);
        if x.is_nan() || y.is_nan() {
            return f64::INFINITY;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}
