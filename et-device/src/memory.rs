//! Device tensors.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr};
use et_core::{BackendTensor, Element, RawTensor};

/// A contiguous row-major tensor in device memory.
pub struct CudaTensor<T: Element> {
    pub(crate) bytes: CudaSlice<u8>,
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
        CudaTensor { addr, bytes, shape: shape.to_vec(), _elem: PhantomData }
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
