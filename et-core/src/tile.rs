//! Tiles: the rectangular pieces of tensors that tile ops read and write.
//!
//! Inside a tile body, each tensor parameter is bound to an [`InTensor`] (for `&Tensor`)
//! or an [`OutTensor`] (for `&mut Tensor`); `t.tile([i, j], [32, 32])` cuts the tile at
//! tile coordinates `(i, j)` of extent `32 x 32`, i.e. rows `32i .. 32i + 32` and columns
//! `32j .. 32j + 32`. Tile ops take [`TileRef`] (read) and [`TileMut`] (write) arguments,
//! so Rust checks the dtype, rank and direction of every argument at the call site.

use std::marker::PhantomData;

use crate::dtype::Element;
use crate::raw::RawTensor;

/// A read-only tensor parameter inside a tile body.
#[derive(Clone, Copy)]
pub struct InTensor<'a, T: Element> {
    view: View<'a, T>,
}

/// A written tensor parameter inside a tile body.
#[derive(Clone, Copy)]
pub struct OutTensor<'a, T: Element> {
    view: View<'a, T>,
}

#[derive(Clone, Copy)]
struct View<'a, T> {
    ptr: *mut T,
    shape: &'a [i64],
    strides: &'a [i64],
    /// Whether the tiles cut from it report their touches to the CPU backend's observer.
    observed: bool,
}

impl<'a, T: Element> View<'a, T> {
    /// # Safety
    /// `raw` describes live host memory holding `T`s for the lifetime `'a`.
    unsafe fn new(raw: &'a RawTensor) -> Self {
        assert_eq!(raw.dtype, T::DTYPE, "tensor dtype");
        View { ptr: raw.addr as *mut T, shape: &raw.shape, strides: &raw.strides, observed: false }
    }

    fn tile<const R: usize>(&self, index: [i64; R], size: [usize; R]) -> (*mut T, [usize; R], [isize; R]) {
        assert_eq!(R, self.shape.len(), "tile rank must equal the tensor's rank");
        let mut offset = 0isize;
        let mut strides = [0isize; R];
        for d in 0..R {
            // checked: a size past i64 or a start or end that overflows is outside too
            let span = i64::try_from(size[d]).ok().and_then(|s| {
                let start = index[d].checked_mul(s)?;
                Some((start, start.checked_add(s)?))
            });
            let Some((start, _)) = span.filter(|&(start, end)| start >= 0 && end <= self.shape[d]) else {
                panic!("tile {index:?} x {size:?} is outside a tensor of shape {:?}", self.shape)
            };
            offset += (start * self.strides[d]) as isize;
            strides[d] = self.strides[d] as isize;
        }
        // SAFETY: the offset was checked to lie inside the tensor.
        (unsafe { self.ptr.offset(offset) }, size, strides)
    }
}

impl<'a, T: Element> InTensor<'a, T> {
    /// Binds a launch argument.
    ///
    /// # Safety
    /// `raw` must describe live host memory holding `T`s, readable for `'a`, that no
    /// task writes while this task reads it (the megakernel's events guarantee that).
    pub unsafe fn bind(raw: &'a RawTensor) -> Self {
        // SAFETY: forwarded to the caller.
        InTensor { view: unsafe { View::new(raw) } }
    }

    /// The tile at tile coordinates `index` with extents `size`.
    pub fn tile<const R: usize>(&self, index: [i64; R], size: [usize; R]) -> TileRef<'a, T, R> {
        let (ptr, shape, strides) = self.view.tile(index, size);
        TileRef { ptr, shape, strides, observed: false, _life: PhantomData }
    }

    /// The tensor's extents.
    pub fn shape(&self) -> &'a [i64] {
        self.view.shape
    }
}

impl<'a, T: Element> OutTensor<'a, T> {
    /// Binds a launch argument.
    ///
    /// # Safety
    /// As [`InTensor::bind`], and the memory is writable, and no other task touches the
    /// tiles this task writes while it runs.
    pub unsafe fn bind(raw: &'a RawTensor) -> Self {
        // SAFETY: forwarded to the caller.
        OutTensor { view: unsafe { View::new(raw) } }
    }

    /// As [`OutTensor::bind`], for a launch whose touches the CPU backend records (see
    /// [`crate::LaunchOptions::observe`]): every element a tile of it reads or writes is
    /// logged on the running task.
    ///
    /// # Safety
    /// As [`OutTensor::bind`].
    pub(crate) unsafe fn bind_observed(raw: &'a RawTensor) -> Self {
        // SAFETY: forwarded to the caller.
        OutTensor { view: View { observed: raw.is_row_major(), ..unsafe { View::new(raw) } } }
    }

    /// The tile at tile coordinates `index` with extents `size`, as a [`TileMut`] or a
    /// [`TileRef`], whichever the op being called takes.
    pub fn tile<const R: usize, V: FromOutTile<'a, T, R>>(&self, index: [i64; R], size: [usize; R]) -> V {
        let (ptr, shape, strides) = self.view.tile(index, size);
        V::from_parts(ptr, shape, strides, self.view.observed)
    }

    /// The tile at tile coordinates `index` with extents `size`, writable.
    pub fn tile_mut<const R: usize>(&self, index: [i64; R], size: [usize; R]) -> TileMut<'a, T, R> {
        self.tile(index, size)
    }

    /// The same tile, read-only (an output read back by a later op of the same task).
    pub fn tile_ref<const R: usize>(&self, index: [i64; R], size: [usize; R]) -> TileRef<'a, T, R> {
        let (ptr, shape, strides) = self.view.tile(index, size);
        TileRef { ptr, shape, strides, observed: self.view.observed, _life: PhantomData }
    }

    /// The tensor's extents.
    pub fn shape(&self) -> &'a [i64] {
        self.view.shape
    }
}

/// The tile types an [`OutTensor`] can hand out: [`TileMut`] to write, [`TileRef`] to
/// read back what an earlier task or op wrote.
pub trait FromOutTile<'a, T, const R: usize>: Sized {
    #[doc(hidden)]
    fn from_parts(ptr: *mut T, shape: [usize; R], strides: [isize; R], observed: bool) -> Self;
}

impl<'a, T, const R: usize> FromOutTile<'a, T, R> for TileRef<'a, T, R> {
    fn from_parts(ptr: *mut T, shape: [usize; R], strides: [isize; R], observed: bool) -> Self {
        TileRef { ptr, shape, strides, observed, _life: PhantomData }
    }
}

impl<'a, T, const R: usize> FromOutTile<'a, T, R> for TileMut<'a, T, R> {
    fn from_parts(ptr: *mut T, shape: [usize; R], strides: [isize; R], observed: bool) -> Self {
        TileMut { ptr, shape, strides, observed, _life: PhantomData }
    }
}

/// A read-only tile of rank `R`.
#[derive(Clone, Copy)]
pub struct TileRef<'a, T, const R: usize> {
    ptr: *const T,
    shape: [usize; R],
    strides: [isize; R],
    observed: bool,
    _life: PhantomData<&'a T>,
}

/// A writable tile of rank `R`.
pub struct TileMut<'a, T, const R: usize> {
    ptr: *mut T,
    shape: [usize; R],
    strides: [isize; R],
    observed: bool,
    _life: PhantomData<&'a mut T>,
}

fn offset<const R: usize>(shape: &[usize; R], strides: &[isize; R], idx: [usize; R]) -> isize {
    let mut off = 0;
    for d in 0..R {
        assert!(idx[d] < shape[d], "index {idx:?} outside tile {shape:?}");
        off += idx[d] as isize * strides[d];
    }
    off
}

impl<T: Element, const R: usize> TileRef<'_, T, R> {
    /// Extents.
    pub fn shape(&self) -> [usize; R] {
        self.shape
    }

    /// The element at `idx` (tile coordinates).
    #[inline]
    pub fn get(&self, idx: [usize; R]) -> T {
        // SAFETY: `offset` checks idx against the tile, which lies inside its tensor.
        let p = unsafe { self.ptr.offset(offset(&self.shape, &self.strides, idx)) };
        if self.observed {
            crate::cpu::observe::touch(p as usize, size_of::<T>(), false);
        }
        // SAFETY: as above (a relaxed atomic: see `crate::relaxed`).
        unsafe { crate::relaxed::load(p) }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tile has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element at row-major position `k` of the tile.
    ///
    /// # Panics
    /// When `k` is not below [`TileRef::len`], as [`TileRef::get`] does for an index
    /// outside the tile.
    #[inline]
    pub fn get_flat(&self, k: usize) -> T {
        assert!(k < self.len(), "flat index {k} outside tile {:?} of {} elements", self.shape, self.len());
        self.get(unflatten(self.shape, k))
    }
}

impl<T: Element, const R: usize> TileMut<'_, T, R> {
    /// Extents.
    pub fn shape(&self) -> [usize; R] {
        self.shape
    }

    /// The element at `idx`.
    #[inline]
    pub fn get(&self, idx: [usize; R]) -> T {
        // SAFETY: as TileRef::get.
        let p = unsafe { self.ptr.offset(offset(&self.shape, &self.strides, idx)) };
        if self.observed {
            crate::cpu::observe::touch(p as usize, size_of::<T>(), false);
        }
        // SAFETY: as TileRef::get.
        unsafe { crate::relaxed::load(p) }
    }

    /// Writes the element at `idx`.
    #[inline]
    pub fn set(&mut self, idx: [usize; R], v: T) {
        // SAFETY: as TileRef::get; the task owns this tile while it runs.
        let p = unsafe { self.ptr.offset(offset(&self.shape, &self.strides, idx)) };
        if self.observed {
            crate::cpu::observe::touch(p as usize, size_of::<T>(), true);
        }
        // SAFETY: as above (a relaxed atomic: see `crate::relaxed`).
        unsafe { crate::relaxed::store(p, v) }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the tile has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes row-major position `k` of the tile.
    ///
    /// # Panics
    /// When `k` is not below [`TileMut::len`], as [`TileMut::set`] does for an index
    /// outside the tile.
    #[inline]
    pub fn set_flat(&mut self, k: usize, v: T) {
        assert!(k < self.len(), "flat index {k} outside tile {:?} of {} elements", self.shape, self.len());
        self.set(unflatten(self.shape, k), v)
    }

    /// Writes position `k` of dimension 0 (other coordinates 0).
    #[inline]
    pub fn set_row(&mut self, k: usize, v: T) {
        let mut idx = [0; R];
        idx[0] = k;
        self.set(idx, v)
    }
}

fn unflatten<const R: usize>(shape: [usize; R], mut k: usize) -> [usize; R] {
    let mut idx = [0; R];
    for d in (0..R).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

/// Visits every index of a box of extents `shape`, row-major.
pub fn for_each_index<const R: usize>(shape: [usize; R], mut f: impl FnMut([usize; R])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = [0usize; R];
    loop {
        f(idx);
        let mut d = R;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;

    #[test]
    #[should_panic(expected = "flat index 4 outside tile [2, 2] of 4 elements")]
    fn a_flat_index_past_the_tile_panics_instead_of_wrapping() {
        let t = Tensor::<f32>::from_vec(&[4, 4], (0..16).map(|v| v as f32).collect()).unwrap();
        let raw = t.raw();
        // SAFETY: `t` outlives the view and nothing writes it meanwhile.
        let view = unsafe { InTensor::<f32>::bind(&raw) };
        let tile = view.tile([1, 1], [2, 2]);
        // rows 2..4, columns 2..4, row-major
        assert_eq!((0..4).map(|k| tile.get_flat(k)).collect::<Vec<_>>(), [10.0, 11.0, 14.0, 15.0]);
        tile.get_flat(4);
    }

    #[test]
    #[should_panic(expected = "tile [0] x [18446744073709551615] is outside a tensor of shape [4]")]
    fn a_tile_size_past_i64_is_outside_instead_of_wrapping() {
        let t = Tensor::<f32>::zeros(&[4]);
        let raw = t.raw();
        // SAFETY: `t` outlives the view and nothing writes it meanwhile.
        let view = unsafe { InTensor::<f32>::bind(&raw) };
        view.tile([0], [usize::MAX]);
    }

    #[test]
    #[should_panic(expected = "tile [4611686018427387904] x [4] is outside a tensor of shape [4]")]
    fn a_tile_start_that_overflows_is_outside_instead_of_wrapping() {
        let t = Tensor::<f32>::zeros(&[4]);
        let raw = t.raw();
        // SAFETY: as above.
        let view = unsafe { InTensor::<f32>::bind(&raw) };
        view.tile([1 << 62], [4]);
    }

    #[test]
    #[should_panic(expected = "flat index 6 outside tile [2, 3] of 6 elements")]
    fn a_flat_write_past_the_tile_panics_instead_of_wrapping() {
        let mut t = Tensor::<f32>::zeros(&[4, 6]);
        let raw = t.raw_mut();
        // SAFETY: `t` outlives the view and nothing else touches it meanwhile.
        let view = unsafe { OutTensor::<f32>::bind(&raw) };
        let mut tile = view.tile_mut([1, 1], [2, 3]);
        tile.set_flat(5, 1.0);
        tile.set_flat(6, 1.0);
    }
}
