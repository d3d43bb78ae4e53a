//! Element types that tensors hold, with their CUDA spellings.

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
    /// The type's name in generated CUDA (`float`, `et::bf16`, ...).
    const CUDA: &'static str;
    /// Converts to `f32` (exact for every type but large integers).
    fn to_f32(self) -> f32;
    /// Converts from `f32`, rounding to nearest even for the 16-bit floats.
    fn from_f32(v: f32) -> Self;
    /// Converts to `i64` (used when the tensor holds indices or counts).
    fn to_i64(self) -> i64;
    /// A value that no correct kernel writes: NaN for floats, a large sentinel for
    /// integers. Outputs are poisoned with it before runs in tests.
    fn poison() -> Self;
}

macro_rules! float_element {
    ($t:ty, $dt:ident, $cuda:literal, $to:expr, $from:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            const CUDA: &'static str = $cuda;
            #[inline]
            fn to_f32(self) -> f32 {
                ($to)(self)
            }
            #[inline]
            fn from_f32(v: f32) -> Self {
                ($from)(v)
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self.to_f32() as i64
            }
            fn poison() -> Self {
                Self::from_f32(f32::NAN)
            }
        }
    };
}

float_element!(f32, F32, "float", |x: f32| x, |v: f32| v);
float_element!(bf16, BF16, "et::bf16", bf16::to_f32, bf16::from_f32);
float_element!(f16, F16, "et::f16", f16::to_f32, f16::from_f32);

macro_rules! int_element {
    ($t:ty, $dt:ident, $cuda:literal) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            const CUDA: &'static str = $cuda;
            #[inline]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline]
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn poison() -> Self {
                0x7eadbeef as $t
            }
        }
    };
}

int_element!(i32, I32, "int");
int_element!(u32, U32, "unsigned int");
