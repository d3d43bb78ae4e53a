//! Element loads and stores that tasks on several threads may race on without undefined
//! behaviour.
//!
//! The CPU backend runs tasks on many threads, and the event protocol orders every write
//! before the reads that wait for it. Where a launch computes its own routing, the race
//! rule can only be checked after the run (`LaunchOptions::observe`), so two tasks may
//! touch one element unordered before it is reported. Every element access of a tile (and
//! every read of routing data or a condition) is therefore a relaxed atomic access: a race
//! yields a wrong value, which the observer reports, never undefined behaviour. On x86-64
//! and AArch64 a relaxed load or store of 2 or 4 aligned bytes is the ordinary instruction.

use std::mem::{align_of, size_of, transmute_copy};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use crate::dtype::Element;

/// Every element type is 2 or 4 bytes, aligned to its size (what the atomics need).
const fn check<T>() {
    assert!((size_of::<T>() == 2 || size_of::<T>() == 4) && align_of::<T>() == size_of::<T>());
}

/// The element at `p`.
///
/// # Safety
/// `p` points to a live, aligned `T` (other threads may load or store it meanwhile).
#[inline]
pub(crate) unsafe fn load<T: Element>(p: *const T) -> T {
    const { check::<T>() };
    // SAFETY: `p` is live and aligned to its size (the caller; `check`), and every access
    // to it while tasks run is one of these atomics. An element type is plain bits of its
    // size (f32, bf16, f16, i32, u32), so every bit pattern read is a valid `T`.
    unsafe {
        if size_of::<T>() == 2 {
            transmute_copy(&AtomicU16::from_ptr(p as *mut u16).load(Ordering::Relaxed))
        } else {
            transmute_copy(&AtomicU32::from_ptr(p as *mut u32).load(Ordering::Relaxed))
        }
    }
}

/// Writes `v` at `p`.
///
/// # Safety
/// `p` points to a live, aligned, writable `T` (other threads may load or store it
/// meanwhile).
#[inline]
pub(crate) unsafe fn store<T: Element>(p: *mut T, v: T) {
    const { check::<T>() };
    // SAFETY: as `load`.
    unsafe {
        if size_of::<T>() == 2 {
            AtomicU16::from_ptr(p as *mut u16).store(transmute_copy(&v), Ordering::Relaxed)
        } else {
            AtomicU32::from_ptr(p as *mut u32).store(transmute_copy(&v), Ordering::Relaxed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{bf16, f16};

    #[test]
    fn every_element_type_round_trips() {
        fn round_trip<T: Element>(v: T) {
            let mut cell = T::default();
            // SAFETY: `cell` is a live, aligned local.
            unsafe {
                store(&mut cell, v);
                assert_eq!(load(&cell), v);
            }
        }
        round_trip(1.5f32);
        round_trip(bf16::from_f32(-2.25));
        round_trip(f16::from_f32(0.125));
        round_trip(-7i32);
        round_trip(u32::MAX);
    }
}
