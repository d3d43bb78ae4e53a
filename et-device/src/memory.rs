//! Device tensors, and views that share their memory.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use et_core::{BackendTensor, Element, Error, RawTensor};

/// A contiguous row-major tensor in device memory. Views made with [`CudaTensor::rows`]
/// and [`CudaTensor::reshape`] share the allocation, which lives while any of them does.
pub struct CudaTensor<T: Element> {
    pub(crate) storage: Arc<CudaSlice<u8>>,
    pub(crate) addr: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) _elem: PhantomData<T>,
}

impl<T: Element> std::fmt::Debug for CudaTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaTensor<{}>{:?} @ {:#x}", T::DTYPE, self.shape, self.addr)
    }
}

impl<T: Element> CudaTensor<T> {
    pub(crate) fn new(bytes: CudaSlice<u8>, shape: &[usize]) -> Self {
        let addr = bytes.device_ptr(bytes.stream()).0;
        CudaTensor { addr, storage: Arc::new(bytes), shape: shape.to_vec(), _elem: PhantomData }
    }

    /// The extents.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }

    /// A view of `rows` along dimension 0 (e.g. one layer of stacked weights), sharing
    /// this tensor's memory.
    pub fn rows(&self, rows: Range<usize>) -> Result<CudaTensor<T>, Error> {
        let extent = self.shape.first().copied().unwrap_or(0);
        if rows.start > rows.end || rows.end > extent {
            return Err(Error::Shape(format!("rows {rows:?} of a tensor with {extent} rows")));
        }
        let row_elems: usize = self.shape[1..].iter().product();
        let mut shape = self.shape.clone();
        shape[0] = rows.len();
        Ok(CudaTensor {
            storage: self.storage.clone(),
            addr: self.addr + (rows.start * row_elems * std::mem::size_of::<T>()) as u64,
            shape,
            _elem: PhantomData,
        })
    }

    /// The same elements under another shape with as many elements, sharing memory.
    pub fn reshape(&self, shape: &[usize]) -> Result<CudaTensor<T>, Error> {
        if shape.iter().product::<usize>() != self.len() {
            return Err(Error::Shape(format!("cannot view {:?} ({} elements) as {shape:?}", self.shape, self.len())));
        }
        Ok(CudaTensor { storage: self.storage.clone(), addr: self.addr, shape: shape.to_vec(), _elem: PhantomData })
    }
}

impl<T: Element> BackendTensor<T> for CudaTensor<T> {
    fn raw(&self) -> RawTensor {
        RawTensor::new(self.addr, T::DTYPE, &self.shape)
    }
}

/// Views an element slice as bytes.
pub(crate) fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    // SAFETY: every Element is a plain scalar (f32, bf16, f16, i32, u32) without padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Builds elements from bytes.
pub(crate) fn from_bytes<T: Element>(b: &[u8]) -> Vec<T> {
    let n = b.len() / std::mem::size_of::<T>();
    let mut out = vec![T::default(); n];
    // SAFETY: `out` holds exactly `b.len()` bytes and every bit pattern is a valid scalar.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), out.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    out
}
