//! Hand-built megakernels for the CPU backend tests: graphs written directly as
//! `GraphSpec` data, with CPU task functions, as the macro would emit them.
#![allow(dead_code)]

use et_core::__private::*;
use et_core::cpu::TaskContext;
pub use et_core::graph::build::*;

/// A megakernel built at run time: its description, owned, and its CPU task functions.
pub struct TestKernel {
    pub kernel: Kernel,
    pub cpu: &'static [CpuTaskFn],
}

impl TestKernel {
    /// What backends launch.
    pub fn entry(&self) -> KernelEntry<'_> {
        KernelEntry { kernel: &self.kernel, cpu_tasks: self.cpu }
    }
}

pub fn kernel(
    name: &'static str,
    dims: Vec<DimSpec>,
    tensors: Vec<TensorSpec>,
    events: Vec<EventSpec>,
    groups: Vec<GroupSpec>,
    cpu: &'static [CpuTaskFn],
) -> TestKernel {
    TestKernel {
        kernel: Kernel {
            graph: graph(name, dims, tensors, events, groups),
            cuda: CudaSource { body: Cow::Borrowed(""), ops: &[], block_threads: 128, smem: &[], sites: &[] },
            module_path: module_path!(),
            file: file!(),
        },
        cpu,
    }
}

/// Split-K row sum (the design brief's example): `part[i*32.., j] = Σ a[i*32.., j*32..+32]`,
/// then `c[i*32..] = Σ_j part[i*32.., j]`, the total of block `i` waiting for exactly its
/// own 4 partials. With `drop_wait`, the total forgets to wait.
pub fn split_row_sum(drop_wait: bool) -> TestKernel {
    fn partial(cx: &TaskContext<'_>) {
        let (i, j) = (cx.var(0), cx.var(1));
        let a = cx.input::<f32>(0);
        let part = cx.output::<f32>(1);
        et_core::ops::row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
        cx.after_op();
        cx.signal(0);
    }
    fn total(cx: &TaskContext<'_>) {
        cx.wait(0);
        total_no_wait(cx);
    }
    fn total_no_wait(cx: &TaskContext<'_>) {
        let i = cx.var(0);
        let part = cx.output::<f32>(1);
        let c = cx.output::<f32>(2);
        et_core::ops::row_sum(part.tile_ref([i, 0], [32, 4]), c.tile([i], [32]));
        cx.after_op();
    }
    let r32 = dim(0).scale(32);
    kernel(
        if drop_wait { "split_row_sum_missing_wait" } else { "split_row_sum" },
        vec![symbolic("R")],
        vec![
            tensor("a", DType::F32, vec![r32.clone(), lit(128)], Access::Read),
            tensor("part", DType::F32, vec![r32.clone(), lit(4)], Access::Write),
            tensor("c", DType::F32, vec![r32], Access::Write),
        ],
        vec![event("done", vec![dim(0)], Count::Inferred)],
        vec![
            group("partial", &["i", "j"], vec![dim(0), lit(4)], vec![], vec![at(0, vec![point(var(0))])]),
            group(
                "total",
                &["i"],
                vec![dim(0)],
                if drop_wait { vec![] } else { vec![at(0, vec![point(var(0))])] },
                vec![],
            ),
        ],
        if drop_wait { &[partial, total_no_wait] } else { &[partial, total] },
    )
}

/// The sequential reference of [`split_row_sum`].
pub fn split_row_sum_reference(a: &et_core::Tensor<f32>) -> (Vec<f32>, Vec<f32>) {
    let rows = a.shape()[0];
    let mut part = vec![0f32; rows * 4];
    let mut c = vec![0f32; rows];
    for r in 0..rows {
        for j in 0..4 {
            part[r * 4 + j] = (0..32).map(|k| a.get(&[r, j * 32 + k])).sum();
        }
        c[r] = (0..4).map(|j| part[r * 4 + j]).sum();
    }
    (part, c)
}
