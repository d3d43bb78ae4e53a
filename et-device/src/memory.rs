//! Device tensors, and views that share their memory.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use et_core::{BackendTensor, Element, Error, RawTensor};

/// A contiguous row-major tensor in device memory.
///
/// Views ([`CudaTensor::rows`], [`CudaTensor::reshape`], and their `_mut` forms) share
/// the allocation and borrow their parent, like slices do: a view made through `&self`
/// is read-only and a view made through `&mut self` excludes every other use of the
/// parent while it lives. So the borrow checker rejects a launch that would be handed a
/// tensor together with a mutable alias of it
/// (the crate documentation shows it failing to compile).
///
/// As a second line of defence (a view's tensor can be swapped out of it with
/// `std::mem::swap`, outliving the borrow), [`crate::Cuda`] also rejects at launch any
/// written argument whose memory overlaps another argument's.
pub struct CudaTensor<T: Element> {
    storage: Arc<CudaSlice<u8>>,
    /// Byte offset of element 0 in `storage`.
    offset: usize,
    shape: Vec<usize>,
    _elem: PhantomData<T>,
}

/// A read-only view of part of a [`CudaTensor`], borrowing it; dereferences to a
/// `CudaTensor` that launches and downloads like any other.
pub struct CudaView<'a, T: Element> {
    view: CudaTensor<T>,
    _parent: PhantomData<&'a CudaTensor<T>>,
}

/// A writable view of part of a [`CudaTensor`], borrowing it mutably; dereferences to a
/// `CudaTensor` that launches and downloads like any other.
pub struct CudaViewMut<'a, T: Element> {
    view: CudaTensor<T>,
    _parent: PhantomData<&'a mut CudaTensor<T>>,
}

impl<T: Element> std::ops::Deref for CudaView<'_, T> {
    type Target = CudaTensor<T>;
    fn deref(&self) -> &CudaTensor<T> {
        &self.view
    }
}

impl<T: Element> std::ops::Deref for CudaViewMut<'_, T> {
    type Target = CudaTensor<T>;
    fn deref(&self) -> &CudaTensor<T> {
        &self.view
    }
}

impl<T: Element> std::ops::DerefMut for CudaViewMut<'_, T> {
    fn deref_mut(&mut self) -> &mut CudaTensor<T> {
        &mut self.view
    }
}

impl<T: Element> std::fmt::Debug for CudaTensor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaTensor<{}>{:?} @ {:#x}", T::DTYPE, self.shape, self.addr())
    }
}

impl<T: Element> CudaTensor<T> {
    pub(crate) fn new(bytes: CudaSlice<u8>, shape: &[usize]) -> Self {
        CudaTensor { storage: Arc::new(bytes), offset: 0, shape: shape.to_vec(), _elem: PhantomData }
    }

    /// The device address of element 0.
    pub(crate) fn addr(&self) -> u64 {
        self.storage.device_ptr(self.storage.stream()).0 + self.offset as u64
    }

    /// The bytes of this tensor inside its allocation.
    pub(crate) fn bytes(&self) -> cudarc::driver::CudaView<'_, u8> {
        self.storage.slice(self.offset..self.offset + self.num_bytes())
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

    /// A read-only view of `rows` along dimension 0 (e.g. one layer of stacked weights),
    /// sharing this tensor's memory.
    pub fn rows(&self, rows: Range<usize>) -> Result<CudaView<'_, T>, Error> {
        Ok(CudaView { view: self.rows_of(rows)?, _parent: PhantomData })
    }

    /// A writable view of `rows` along dimension 0, sharing this tensor's memory.
    pub fn rows_mut(&mut self, rows: Range<usize>) -> Result<CudaViewMut<'_, T>, Error> {
        Ok(CudaViewMut { view: self.rows_of(rows)?, _parent: PhantomData })
    }

    /// The same elements, read-only, under another shape with as many elements.
    pub fn reshape(&self, shape: &[usize]) -> Result<CudaView<'_, T>, Error> {
        Ok(CudaView { view: self.reshaped(shape)?, _parent: PhantomData })
    }

    /// The same elements, writable, under another shape with as many elements.
    pub fn reshape_mut(&mut self, shape: &[usize]) -> Result<CudaViewMut<'_, T>, Error> {
        Ok(CudaViewMut { view: self.reshaped(shape)?, _parent: PhantomData })
    }

    fn rows_of(&self, rows: Range<usize>) -> Result<CudaTensor<T>, Error> {
        let extent = self.shape.first().copied().unwrap_or(0);
        if rows.start > rows.end || rows.end > extent {
            return Err(Error::Shape(format!("rows {rows:?} of a tensor with {extent} rows")));
        }
        let row_bytes = self.shape[1..].iter().product::<usize>() * std::mem::size_of::<T>();
        let mut shape = self.shape.clone();
        shape[0] = rows.len();
        Ok(CudaTensor {
            storage: self.storage.clone(),
            offset: self.offset + rows.start * row_bytes,
            shape,
            _elem: PhantomData,
        })
    }

    fn reshaped(&self, shape: &[usize]) -> Result<CudaTensor<T>, Error> {
        if shape.iter().product::<usize>() != self.len() {
            return Err(Error::Shape(format!("cannot view {:?} ({} elements) as {shape:?}", self.shape, self.len())));
        }
        Ok(CudaTensor { storage: self.storage.clone(), offset: self.offset, shape: shape.to_vec(), _elem: PhantomData })
    }
}

impl<T: Element> BackendTensor<T> for CudaTensor<T> {
    fn raw(&self) -> RawTensor {
        RawTensor::new(self.addr(), T::DTYPE, &self.shape)
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
