//! The tile-op library: each op is a Rust CPU reference plus a CUDA device function.
//!
//! Declare your own with [`tile_op!`](crate::tile_op): the Rust function is what the CPU
//! backend runs and what Rust type-checks at the call site; the CUDA text is a device
//! function of the same name that the generated kernel calls with `et::Tile` arguments.
//! A CUDA op is executed by the whole CTA: split the work over `threadIdx.x`/`blockDim.x`.

mod elementwise;
mod linear;
mod reduce;

pub use elementwise::add;
pub use linear::{gemv, matmul};
pub use reduce::{row_sum, sum_splits};

/// Declares a tile op: a Rust function (the CPU reference, type-checked at call sites)
/// and, under the same name in the type namespace, a module holding its CUDA source.
///
/// ```
/// use et_core::prelude::*;
///
/// et_core::tile_op! {
///     cuda = r#"
///     template <int R> __device__ void scale2(et::Tile<float, R> t) {
///         for (int k = threadIdx.x; k < t.numel(); k += blockDim.x) t.flat(k) *= 2.0f;
///     }"#;
///     /// Doubles every element of a tile.
///     pub fn scale2<const R: usize>(mut t: TileMut<'_, f32, R>) {
///         et_core::tile::for_each_index(t.shape(), |i| { let v = t.get(i); t.set(i, 2.0 * v) });
///     }
/// }
/// assert!(scale2::CUDA.contains("scale2"));
/// ```
#[macro_export]
macro_rules! tile_op {
    (cuda = $cuda:expr; $(#[$meta:meta])* $vis:vis fn $name:ident $($rest:tt)*) => {
        $(#[$meta])*
        $vis fn $name $($rest)*

        #[doc(hidden)]
        #[allow(non_snake_case, non_camel_case_types)]
        $vis mod $name {
            /// CUDA source of this op's device function.
            pub const CUDA: &str = $cuda;
            /// What the op does with each parameter.
            pub const OP: $crate::ops::TileOp = $crate::ops::TileOp { args: $crate::__op_args!(@find $($rest)*) };
        }
    };
}

/// A tile op's description: how it uses each parameter.
pub struct TileOp {
    /// One per parameter, from its type.
    pub args: &'static [et_graph::ArgKind],
}

/// The argument kinds of a `tile_op!` function's parameter list: `: TileRef` reads,
/// `: TileMut` writes, any other type is a scalar.
#[doc(hidden)]
#[macro_export]
macro_rules! __op_args {
    (@find ($($params:tt)*) $($rest:tt)*) => { &$crate::__op_args!(@scan [] $($params)*) };
    (@find $skip:tt $($rest:tt)*) => { $crate::__op_args!(@find $($rest)*) };
    (@scan [$($k:expr,)*]) => { [$($k,)*] };
    (@scan [$($k:expr,)*] : TileRef $($rest:tt)*) => {
        $crate::__op_args!(@scan [$($k,)* $crate::__private::ArgKind::Read,] $($rest)*)
    };
    (@scan [$($k:expr,)*] : TileMut $($rest:tt)*) => {
        $crate::__op_args!(@scan [$($k,)* $crate::__private::ArgKind::Write,] $($rest)*)
    };
    (@scan [$($k:expr,)*] : $ty:tt $($rest:tt)*) => {
        $crate::__op_args!(@scan [$($k,)* $crate::__private::ArgKind::Scalar,] $($rest)*)
    };
    (@scan [$($k:expr,)*] $skip:tt $($rest:tt)*) => { $crate::__op_args!(@scan [$($k,)*] $($rest)*) };
}
