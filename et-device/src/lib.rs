//! `et-device`: the CUDA backend of `et`.
//!
//! - [`Cuda`] implements [`et_core::Backend`]: device tensors ([`CudaTensor`]), a
//!   persistent cooperative launch of one CTA per SM, static per-SM queues or the device
//!   ready queue, event counters that need no reset between launches (monotonic epochs),
//!   a watchdog that turns a stuck wait into an error naming the task and element, and
//!   Chrome/Perfetto traces of every task that ran.
//! - [`compile`] turns a megakernel's CUDA source into a CUBIN with NVRTC, caching it on
//!   disk (`ET_CACHE_DIR`, else the user's cache directory) and in the process. It needs
//!   libnvrtc but no GPU, so CI compiles every kernel (`tests/nvrtc_compile.rs`).
//!
//! The raw driver and NVRTC calls live in one private module (`driver`), each with its
//! safety argument; the rest speaks in cudarc's safe types.
//!
//! Nothing here panics when CUDA is missing: [`Cuda::new`] and [`Compiler::new`] return
//! [`et_core::Error::Unavailable`] saying what is missing, and [`auto_backend`] runs a
//! program's work on the GPU where one opens, else on the CPU backend.
//!
//! ```no_run
//! use et_core::prelude::*;
//!
//! #[megakernel]
//! fn double(x: &Tensor<f32, { [N * 8] }>, y: &mut Tensor<f32, { [N * 8] }>) {
//!     tile!(t[i] in [N] {
//!         add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
//!     });
//! }
//!
//! fn main() -> Result<(), et_core::Error> {
//!     let gpu = et_device::Cuda::new(0)?;
//!     let x = gpu.upload(&Tensor::<f32>::random(&[64], 1))?;
//!     let mut y = gpu.upload(&Tensor::<f32>::zeros(&[64]))?;
//!     double::launch(&gpu, &x, &mut y)?;
//!     println!("{:?}", gpu.download(&y)?.as_slice());
//!     Ok(())
//! }
//! ```
//!
//! Views borrow their tensor ([`CudaTensor::rows_mut`] and the others), so a tensor and
//! a mutable alias of it cannot be passed to one launch:
//!
//! ```compile_fail,E0502
//! use et_core::prelude::*;
//!
//! #[megakernel]
//! fn double(x: &Tensor<f32, { [N * 8] }>, y: &mut Tensor<f32, { [N * 8] }>) {
//!     tile!(t[i] in [N] {
//!         add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
//!     });
//! }
//!
//! fn run(gpu: &et_device::Cuda) -> Result<(), et_core::Error> {
//!     let mut d = gpu.upload(&Tensor::<f32>::zeros(&[16]))?;
//!     let mut second = d.rows_mut(8..16)?;
//!     double::launch(gpu, &d, &mut second)?; // `d` is mutably borrowed by `second`
//!     Ok(())
//! }
//! # fn main() {}
//! ```
//!

mod abort;
mod auto;
mod availability;
mod cache;
mod checked;
pub mod compile;
mod device;
mod driver;
mod memory;
mod modules;
mod pending;
mod runtime;
mod states;
mod trace;

pub use auto::{OnBackend, auto_backend};
pub use availability::{driver_available, nvrtc_available};
pub use compile::{CompileOutput, Compiler, env_options};
pub use device::Cuda;
pub use memory::{CudaTensor, CudaView, CudaViewMut};
