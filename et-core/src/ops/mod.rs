//! The tile-op library: each op is a Rust CPU reference plus a CUDA device function.
//!
//! Declare your own with [`tile_op!`](crate::tile_op): the Rust function is what the CPU
//! backend runs and what Rust type-checks at the call site; the CUDA text is a device
//! function of the same name that the generated kernel calls with `et::Tile` arguments.
//! A CUDA op is executed by the whole CTA: split the work over `threadIdx.x`/`blockDim.x`.

pub mod decode;
mod elementwise;
mod linear;
pub mod moe;
pub mod prefetch;
mod reduce;

pub use decode::*;
pub use elementwise::add;
pub use linear::{gemv, matmul};
pub use moe::{moe_combine, moe_gather, moe_group, router_topk};
pub use prefetch::{gemv_consume, gemv_prefetch};
pub use reduce::{row_sum, sum_splits};

/// Declares a tile op: a Rust function (the CPU reference, type-checked at call sites)
/// and, under the same name in the type namespace, a module with its description
/// `OP` ([`TileOp`](crate::TileOp)) and its `const fn contract`.
///
/// The CUDA text defines a device function of the op's name; its first line is numbered
/// as the line of `tile_op!` in NVRTC errors, so open the literal on that line. The
/// optional `contract` lists the shape relations the arguments must satisfy, as
/// `condition => "what breaks"`, over each parameter's extents (`&[usize]` under the
/// parameter's name, empty for scalars; [`numel`](crate::op::numel) and
/// [`same`](crate::op::same) help). `#[megakernel]` checks it at compile time for
/// every call, and the CPU function checks it before it runs.
///
/// An op that needs shared memory declares how much, before the contract, as
/// `smem = |extents| <bytes>;`: a constant expression over the parameters' extents (each
/// parameter's name, as in the contract, or `extents`, the whole list). The megakernel's
/// per-CTA arena is the largest amount any of its op calls declares, and the generated
/// call passes it to such an op as one more, last, argument: `unsigned char* smem`,
/// 128-byte aligned (`et::Ctx::smem()`). The CPU backend ignores it. Parameters are `TileRef`
/// (read), `TileMut` (written) or [scalars](crate::op::Scalar), written as such. Give a
/// scalar's CUDA parameter a declared type (`int by`, not a deduced template parameter):
/// an argument computed from tile indices reaches it as `et::ScalarArg`, which converts
/// to that type and stops the task when the value does not fit it.
///
/// ```
/// use et_core::prelude::*;
///
/// et_core::tile_op! { cuda = r#"
///     template <int R> __device__ void scale_into(et::Tile<float, R> src, et::Tile<float, R> dst) {
///         for (int k = threadIdx.x; k < dst.numel() && k < src.numel(); k += blockDim.x)
///             dst.flat(k) = 2.0f * src.flat(k);
///     }"#;
///     contract { same(src, dst) => "src and dst must have the same extents" }
///     /// `dst = 2 src`.
///     pub fn scale_into<const R: usize>(src: TileRef<'_, f32, R>, mut dst: TileMut<'_, f32, R>) {
///         et_core::tile::for_each_index(dst.shape(), |i| dst.set(i, 2.0 * src.get(i)));
///     }
/// }
/// assert_eq!(scale_into::OP.path, concat!(module_path!(), "::scale_into"));
/// assert_eq!(scale_into::OP.args, [et_core::op::ArgKind::Read, et_core::op::ArgKind::Write]);
/// assert!(scale_into::contract(&[&[4, 8], &[8, 4]]).is_err());
/// ```
#[macro_export]
macro_rules! tile_op {
    (cuda = $cuda:expr; smem = |$s:ident| $bytes:expr; contract { $($cond:expr => $why:expr),* $(,)? } $(#[$m:meta])* $vis:vis fn $name:ident $($rest:tt)*) => {
        $crate::tile_op!(@sig [$cuda; [$s; $bytes; true]] [$($cond => $why),*] [$(#[$m])* $vis fn $name] [] $($rest)*);
    };
    (cuda = $cuda:expr; smem = |$s:ident| $bytes:expr; $(#[$m:meta])* $vis:vis fn $($rest:tt)*) => {
        $crate::tile_op!(cuda = $cuda; smem = |$s| $bytes; contract {} $(#[$m])* $vis fn $($rest)*);
    };
    (cuda = $cuda:expr; contract { $($cond:expr => $why:expr),* $(,)? } $(#[$m:meta])* $vis:vis fn $name:ident $($rest:tt)*) => {
        $crate::tile_op!(@sig [$cuda; [__et_extents; 0usize; false]] [$($cond => $why),*] [$(#[$m])* $vis fn $name] [] $($rest)*);
    };
    (cuda = $cuda:expr; $(#[$m:meta])* $vis:vis fn $($rest:tt)*) => {
        $crate::tile_op!(cuda = $cuda; contract {} $(#[$m])* $vis fn $($rest)*);
    };
    // split the signature: generics, then `(params) { body }`
    (@sig $c:tt $k:tt $h:tt [$($g:tt)*] ($($p:tt)*) $body:block) => {
        $crate::tile_op!(@param [$c $k $h [$($g)*] ($($p)*) $body] [] $($p)*);
    };
    (@sig $c:tt $k:tt $h:tt [$($g:tt)*] $t:tt $($rest:tt)*) => { $crate::tile_op!(@sig $c $k $h [$($g)* $t] $($rest)*); };
    // classify each parameter by its type (`op::read`/`write`/`scalar` then check it)
    (@param $all:tt $done:tt mut $($rest:tt)*) => { $crate::tile_op!(@param $all $done $($rest)*); };
    (@param $all:tt [$($d:tt)*] $n:ident : TileRef $($rest:tt)*) => { $crate::tile_op!(@ty $all [$($d)* (Read read $n)] TileRef $($rest)*); };
    (@param $all:tt [$($d:tt)*] $n:ident : TileMut $($rest:tt)*) => { $crate::tile_op!(@ty $all [$($d)* (Write write $n)] TileMut $($rest)*); };
    (@param $all:tt [$($d:tt)*] $n:ident : $($rest:tt)*) => { $crate::tile_op!(@ty $all [$($d)* (Scalar scalar $n)] $($rest)*); };
    (@ty $all:tt $done:tt $t:ty $(, $($rest:tt)*)?) => { $crate::tile_op!(@param $all $done $($($rest)*)?); };
    (@param [[$cuda:expr; [$s:ident; $bytes:expr; $uses_smem:literal]] [$($cond:expr => $why:expr),*] [$(#[$m:meta])* $vis:vis fn $name:ident] [$($g:tt)*] $params:tt $body:block]
        [$(($kind:ident $ext:ident $n:ident))*]) => {
        $(#[$m])*
        $vis fn $name $($g)* $params {
            if let ::core::result::Result::Err(why) = $name::contract(&[$($crate::op::$ext(&$n).as_slice()),*]) {
                ::core::panic!("tile op `{}`: {why}", ::core::stringify!($name));
            }
            $body
        }

        #[doc(hidden)]
        #[allow(non_snake_case, non_camel_case_types)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;

            /// The op's description.
            pub const OP: $crate::TileOp = $crate::TileOp {
                name: ::core::stringify!($name),
                path: ::core::module_path!(),
                cuda: $cuda,
                file: ::core::file!(),
                line: ::core::line!(),
                args: &[$($crate::op::ArgKind::$kind),*],
                contract,
                smem,
                uses_smem: $uses_smem,
            };

            /// Checks the op's shape relations on one extent list per parameter.
            #[allow(unused_variables)]
            pub const fn contract(extents: &[&[usize]]) -> ::core::result::Result<(), &'static str> {
                #[allow(unused_imports)]
                use $crate::op::{numel, same};
                let &[$($n),*] = extents else { return ::core::result::Result::Err("wrong number of arguments") };
                $(if !($cond) { return ::core::result::Result::Err($why); })*
                ::core::result::Result::Ok(())
            }

            /// The bytes of the CTA's shared-memory arena the op needs for tiles of these
            /// extents (0 for an op that declares no `smem`).
            #[allow(unused_variables)]
            pub const fn smem(extents: &[&[usize]]) -> usize {
                #[allow(unused_imports)]
                use $crate::op::{numel, same};
                let &[$($n),*] = extents else { return 0 };
                let $s = extents;
                $bytes
            }
        }
    };
}
