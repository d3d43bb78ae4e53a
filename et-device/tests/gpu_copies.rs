//! Writes and copies into existing device tensors, and repeated launches that reuse a
//! graph state over other tensors (ignored where there is no GPU).

use et_core::prelude::*;
use et_core::relative_error;
use et_device::Cuda;
use splitk::split_row_sum;

fn gpu() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn writes_land_in_place_and_in_order_with_launches() {
    let gpu = gpu();
    let mut t = gpu.upload(&Tensor::<i32>::from_vec(&[2, 3], vec![0; 6]).unwrap()).unwrap();
    gpu.write(&mut t, &[1, 2, 3, 4, 5, 6]).unwrap();
    gpu.write(&mut *t.rows_mut(1..2).unwrap(), &[-4, -5, -6]).unwrap();
    assert_eq!(gpu.download(&t).unwrap().as_slice(), [1, 2, 3, -4, -5, -6]);
    let err = gpu.write(&mut t, &[1, 2]).unwrap_err().to_string();
    assert!(err.contains("writing 2 elements into a tensor of shape [2, 3] (6 elements)"), "{err}");
    // a write between two launches is seen by the second and not by the first
    let (a1, a2) = (Tensor::<f32>::random(&[64, 128], 1), Tensor::<f32>::random(&[64, 128], 2));
    let mut da = gpu.upload(&a1).unwrap();
    let mut part = gpu.poisoned::<f32>(&[64, 4]).unwrap();
    let mut c = gpu.poisoned::<f32>(&[64]).unwrap();
    split_row_sum::launch(&gpu, &da, &mut part, &mut c).unwrap();
    let first = gpu.download(&c).unwrap();
    gpu.write(&mut da, a2.as_slice()).unwrap();
    split_row_sum::launch(&gpu, &da, &mut part, &mut c).unwrap();
    assert!(relative_error(&first, &splitk::row_sum_reference(&a1)) < 1e-5);
    assert!(relative_error(&gpu.download(&c).unwrap(), &splitk::row_sum_reference(&a2)) < 1e-5);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn copies_stay_on_the_device_and_refuse_shared_memory() {
    let gpu = gpu();
    let src = gpu.upload(&Tensor::<f32>::from_vec(&[4], vec![1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
    let mut dst = gpu.poisoned::<f32>(&[4]).unwrap();
    gpu.copy(&src, &mut dst).unwrap();
    assert_eq!(gpu.download(&dst).unwrap().as_slice(), [1.0, 2.0, 3.0, 4.0]);
    let mut wrong = gpu.poisoned::<f32>(&[2, 2]).unwrap();
    let err = gpu.copy(&src, &mut wrong).unwrap_err().to_string();
    assert!(err.contains("copying a tensor of shape [4] into one of shape [2, 2]"), "{err}");
    // a view swapped out of its borrow still shares its parent's memory
    let mut buf = gpu.upload(&Tensor::<f32>::from_vec(&[8], (0..8).map(|v| v as f32).collect()).unwrap()).unwrap();
    let mut escaped = gpu.poisoned::<f32>(&[4]).unwrap();
    std::mem::swap(&mut *buf.rows_mut(2..6).unwrap(), &mut escaped);
    let mut tail = buf.rows_mut(4..8).unwrap();
    let err = gpu.copy(&escaped, &mut tail).unwrap_err().to_string();
    assert!(err.contains("shares"), "{err}");
    drop(tail);
    assert_eq!(gpu.download(&buf).unwrap().as_slice(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_graph_state_serves_launches_over_other_tensors_of_the_same_shapes() {
    let gpu = gpu();
    let inputs: Vec<Tensor<f32>> = (0..3).map(|s| Tensor::<f32>::random(&[96, 128], 20 + s)).collect();
    let dev: Vec<_> = inputs.iter().map(|a| gpu.upload(a).unwrap()).collect();
    let mut part = gpu.poisoned::<f32>(&[96, 4]).unwrap();
    let mut outs: Vec<_> = (0..3).map(|_| gpu.poisoned::<f32>(&[96]).unwrap()).collect();
    // the same kernel and shapes each time, the tensors changing between launches
    for round in 0..2 {
        for (i, out) in outs.iter_mut().enumerate() {
            let k = (i + round) % 3;
            split_row_sum::launch(&gpu, &dev[k], &mut part, out).unwrap();
            let got = gpu.download(out).unwrap();
            assert!(relative_error(&got, &splitk::row_sum_reference(&inputs[k])) < 1e-5, "round {round}, out {i}");
        }
    }
}
