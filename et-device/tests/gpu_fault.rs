//! A device fault inside a task (its own test binary: a fault poisons the CUDA context of
//! the whole process, which CUDA clears only when the process ends, and the other GPU
//! tests share a process).

use std::time::{Duration, Instant};

use et_core::prelude::*;
use et_device::Cuda;

mod trapping {
    use et_core::prelude::*;

    // a tile op that faults on the device
    et_core::tile_op! {
        cuda = "__device__ void trap_op(et::Tile<float, 1> t) { __trap(); }";
        /// Does nothing on the CPU; traps on the GPU.
        pub fn trap_op(_t: TileMut<'_, f32, 1>) {}
    }

    #[megakernel]
    pub fn traps(x: &mut Tensor<f32, { [N * 8] }>) {
        tile!(t[i] in [N] {
            trap_op(x.tile([i], [8]));
        });
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_device_fault_names_the_megakernel_and_a_new_backend_says_the_context_is_lost() {
    let gpu = Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let mut x = gpu.upload(&Tensor::<f32>::zeros(&[64])).unwrap();
    let t0 = Instant::now();
    let err = trapping::traps::launch(&gpu, &mut x).unwrap_err().to_string();
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
    assert!(err.contains("megakernel `traps` faulted on the device"), "{err}");
    // the faulted backend refuses further work with the same explanation
    let again = trapping::traps::launch(&gpu, &mut x).unwrap_err().to_string();
    assert!(again.contains("`traps` faulted"), "{again}");
    drop((x, gpu));
    // CUDA keeps the fault until the process ends: a new backend says so, without a panic
    let err = Cuda::new(0).unwrap_err().to_string();
    assert!(err.contains("context is unusable") && err.contains("start a new process"), "{err}");
}
