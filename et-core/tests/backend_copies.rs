//! `Backend::write`, `Backend::copy` and `Backend::copy_into` on the CPU backend: in
//! place, and errors that leave the destination as it was.

use et_core::{Backend, Cpu, Tensor};

#[test]
fn write_replaces_the_elements_in_place_and_rejects_another_length() {
    let cpu = Cpu::new();
    let mut t = cpu.upload(&Tensor::<i32>::from_vec(&[2, 2], vec![1, 2, 3, 4]).unwrap()).unwrap();
    let before = t.as_slice().as_ptr();
    cpu.write(&mut t, &[5, 6, 7, 8]).unwrap();
    assert_eq!(t.as_slice(), [5, 6, 7, 8]);
    assert_eq!(t.shape(), [2, 2]);
    assert_eq!(t.as_slice().as_ptr(), before, "written where it was, not reallocated");
    let err = cpu.write(&mut t, &[1, 2, 3]).unwrap_err().to_string();
    assert!(err.contains("writing 3 elements into a tensor of shape [2, 2] (4 elements)"), "{err}");
    assert_eq!(t.as_slice(), [5, 6, 7, 8]);
}

#[test]
fn copy_replaces_the_elements_and_rejects_another_shape() {
    let cpu = Cpu::new();
    let src = Tensor::<f32>::from_vec(&[3], vec![1.5, -2.0, 4.0]).unwrap();
    let mut dst = Tensor::<f32>::zeros(&[3]);
    cpu.copy(&src, &mut dst).unwrap();
    assert_eq!(dst.as_slice(), src.as_slice());
    let mut other = Tensor::<f32>::zeros(&[1, 3]);
    let err = cpu.copy(&src, &mut other).unwrap_err().to_string();
    assert!(err.contains("copying a tensor of shape [3] into one of shape [1, 3]"), "{err}");
    assert!(other.as_slice().iter().all(|&v| v == 0.0));
}

#[test]
fn copy_into_places_the_elements_from_an_offset_and_rejects_what_does_not_fit() {
    let cpu = Cpu::new();
    let src = Tensor::<i32>::from_vec(&[2], vec![7, 8]).unwrap();
    let mut log = Tensor::<i32>::zeros(&[3, 2]);
    cpu.copy_into(&src, &mut log, 2).unwrap();
    cpu.copy_into(&src, &mut log, 4).unwrap();
    assert_eq!(log.as_slice(), [0, 0, 7, 8, 7, 8]);
    // the last row, and one element past it
    let err = cpu.copy_into(&src, &mut log, 5).unwrap_err().to_string();
    assert!(err.contains("copying 2 elements from element 5 on into a tensor of shape [3, 2] (6 elements)"), "{err}");
    assert!(cpu.copy_into(&src, &mut log, usize::MAX).is_err(), "an offset that overflows is an error too");
    assert_eq!(log.as_slice(), [0, 0, 7, 8, 7, 8]);
}
