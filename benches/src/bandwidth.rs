//! The device-to-device copy bandwidth: the 100% of the decode benchmarks (a step can at
//! best stream its bytes as fast as the GPU copies memory).

use std::time::Duration;

use cudarc::driver::sys::CUevent_flags;
use et_device::Cuda;

use crate::median;

/// Bytes copied per measurement (1 GiB: far past the L2, so DRAM is what is timed).
pub const COPY_BYTES: usize = 1 << 30;

/// The bandwidth of a 1 GiB `cuMemcpyDtoD` in bytes per second, counting the bytes read
/// and written (`2 · 1 GiB / time`): the median of `timed` copies after `warm` copies,
/// each timed with CUDA events.
pub fn copy_bandwidth(gpu: &Cuda, warm: usize, timed: usize) -> Result<f64, String> {
    let err = |what: &'static str| move |e: cudarc::driver::DriverError| format!("copy bandwidth: {what}: {e:?}");
    let stream = gpu.stream();
    let src = stream.alloc_zeros::<u8>(COPY_BYTES).map_err(err("allocating"))?;
    let mut dst = stream.alloc_zeros::<u8>(COPY_BYTES).map_err(err("allocating"))?;
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let start = gpu.context().new_event(timing).map_err(err("creating an event"))?;
    let end = gpu.context().new_event(timing).map_err(err("creating an event"))?;
    let mut times = Vec::with_capacity(timed);
    for i in 0..warm + timed {
        start.record(stream).map_err(err("recording"))?;
        stream.memcpy_dtod(&src, &mut dst).map_err(err("copying"))?;
        end.record(stream).map_err(err("recording"))?;
        stream.synchronize().map_err(err("copying"))?;
        let t = Duration::from_secs_f64(start.elapsed_ms(&end).map_err(err("reading the events"))? as f64 / 1e3);
        if i >= warm {
            times.push(t.as_secs_f64());
        }
    }
    Ok(2.0 * COPY_BYTES as f64 / median(&times))
}
