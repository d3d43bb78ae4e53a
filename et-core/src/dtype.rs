//! Element types that tensors hold.

pub use et_graph::DType;
pub use half::{bf16, f16};

mod sealed {
    pub trait Sealed {}
}

/// A scalar type a [`crate::Tensor`] can hold.
///
/// Sealed: the set of element types is fixed by what the CUDA prelude and the tile ops
/// implement.
pub trait Element: Copy + Send + Sync + PartialEq + std::fmt::Debug + Default + sealed::Sealed + 'static {
    /// The runtime dtype tag.
    const DTYPE: DType;
    /// Converts to `f32` (exact for every type but large integers).
    fn to_f32(self) -> f32;
    /// Converts from `f32`, rounding to nearest even for the 16-bit floats.
    fn from_f32(v: f32) -> Self;
    /// A value that no correct kernel writes: NaN for floats, a large sentinel for
    /// integers. Outputs are poisoned with it before runs in tests.
    fn poison() -> Self;
}

macro_rules! float_element {
    ($t:ty, $dt:ident, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            #[inline]
            fn to_f32(self) -> f32 {
                ($to)(self)
            }
            #[inline]
            fn from_f32(v: f32) -> Self {
                ($from)(v)
            }
            fn poison() -> Self {
                Self::from_f32(f32::NAN)
            }
        }
    };
}

float_element!(f32, F32, |x: f32| x, |v: f32| v);
float_element!(bf16, BF16, bf16::to_f32, bf16::from_f32);
float_element!(f16, F16, f16::to_f32, f16::from_f32);

macro_rules! int_element {
    ($t:ty, $dt:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            #[inline]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            fn poison() -> Self {
                0x7eadbeef as $t
            }
        }
    };
}

int_element!(i32, I32);
int_element!(u32, U32);
