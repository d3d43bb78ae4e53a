//! Names a megakernel gives its dims and tile indices may be names of the user's module
//! (a constant, a unit struct, an enum variant brought into scope), and its tensors may
//! take the names the generated `launch_with` once used for itself (`backend`,
//! `options`, `args`): the generated task code binds none of them. (Tensor names stay
//! `launch`'s parameter names.)
use et_core::prelude::*;

/// A constant of the module with the name of a symbolic dim.
pub const N: usize = 4;
/// A unit struct with the name of a static dim.
#[allow(non_camel_case_types)]
pub struct C;
/// An enum whose variant, brought into scope, has the name of a tile index.
#[allow(non_camel_case_types)]
pub enum Which {
    i,
}
use Which::i;

/// A tile index that is a module-level constant's name too.
#[allow(non_upper_case_globals)]
pub const j: i64 = 7;

#[megakernel(dims(C = 2))]
pub fn names_like_items(
    options: &Tensor<f32, { [N * C] }>,
    backend: &mut Tensor<f32, { [N * C] }>,
    args: &mut Tensor<f32, { [N * C] }>,
) {
    tile!(p[i] in [N] {
        add(options.tile([i], [C]), options.tile([i], [C]), backend.tile([i], [C]));
    });
    tile!(q[j] in [N * C] {
        add(options.tile([j], [1]), options.tile([j], [1]), args.tile([j], [1]));
    });
}

pub fn main() {
    // the module's items are still theirs
    assert_eq!(N, 4);
    assert_eq!(j, 7);
    let _ = (C, i);
    for n in [1usize, 3, 6] {
        let x = Tensor::<f32>::random(&[2 * n], n as u64);
        let mut y = Tensor::<f32>::poisoned(&[2 * n]);
        let mut z = Tensor::<f32>::poisoned(&[2 * n]);
        names_like_items::launch(&Cpu::new(), &x, &mut y, &mut z).unwrap();
        for e in 0..2 * n {
            assert_eq!(y.get(&[e]), 2.0 * x.get(&[e]));
            assert_eq!(z.get(&[e]), 2.0 * x.get(&[e]));
        }
    }
}
