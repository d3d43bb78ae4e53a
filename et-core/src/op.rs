//! What [`tile_op!`](crate::tile_op) records about a tile op, and how a kernel's ops
//! become CUDA: each op once, keyed by its full path, in a namespace of its own.

use std::fmt::Write;

pub use et_graph::ArgKind;

use crate::dtype::Element;
use crate::tile::{TileMut, TileRef};

/// A tile op as `tile_op!` describes it: `<op path>::OP`.
#[derive(Clone, Copy, Debug)]
pub struct TileOp {
    /// The function's name, which is also the name of its CUDA device function.
    pub name: &'static str,
    /// The function's full Rust path: the op's identity.
    pub path: &'static str,
    /// The CUDA source defining the device function `name`.
    pub cuda: &'static str,
    /// `file!()` of the `tile_op!` invocation.
    pub file: &'static str,
    /// `line!()` of the `tile_op!` invocation: the first line of `cuda` is numbered so.
    pub line: u32,
    /// How the op uses each parameter, in order.
    pub args: &'static [ArgKind],
    /// The shape relations the arguments must satisfy, given one extent list per
    /// parameter (empty for scalars): `Err` says which relation fails.
    pub contract: fn(&[&[usize]]) -> Result<(), &'static str>,
    /// The bytes of shared-memory arena a call with these extents needs (0 when none).
    pub smem: fn(&[&[usize]]) -> usize,
    /// Whether the op declares `smem`, and so takes the arena as its last CUDA argument.
    pub uses_smem: bool,
}

/// The CUDA of a kernel's ops, `ops[k]` callable as `et_op_<k>::<name>`: each op's text
/// once (by full path) inside its own namespace, so that ops of the same name from
/// different modules do not collide, under a `#line` naming its `tile_op!` site.
pub(crate) fn cuda_ops(ops: &[TileOp], out: &mut String) {
    for (k, op) in ops.iter().enumerate() {
        let _ = match ops[..k].iter().position(|o| o.path == op.path) {
            Some(j) => write!(out, "\nnamespace et_op_{k} = et_op_{j};"),
            None => write!(
                out,
                "\n// tile op {}\nnamespace et_op_{k} {{\n#line {} \"{}\"\n{}\n}}",
                op.path, op.line, op.file, op.cuda
            ),
        };
    }
}

/// The number of elements of a tile with these extents (for contracts).
pub const fn numel(extents: &[usize]) -> usize {
    let (mut n, mut d) = (1, 0);
    while d < extents.len() {
        n *= extents[d];
        d += 1;
    }
    n
}

/// Whether two tiles have the same extents (for contracts).
pub const fn same(a: &[usize], b: &[usize]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut d = 0;
    while d < a.len() && a[d] == b[d] {
        d += 1;
    }
    d == a.len()
}

/// A parameter type that a tile op may take besides tiles.
pub trait Scalar: Copy {}
impl Scalar for i64 {}
impl Scalar for i32 {}
impl Scalar for u32 {}
impl Scalar for f32 {}

/// The extents of a `TileRef` parameter (`tile_op!` checks the parameter kinds with these).
#[doc(hidden)]
pub fn read<T: Element, const R: usize>(t: &TileRef<'_, T, R>) -> [usize; R] {
    t.shape()
}

/// The extents of a `TileMut` parameter.
#[doc(hidden)]
pub fn write<T: Element, const R: usize>(t: &TileMut<'_, T, R>) -> [usize; R] {
    t.shape()
}

/// The (no) extents of a scalar parameter.
#[doc(hidden)]
pub fn scalar<S: Scalar>(_: &S) -> [usize; 0] {
    []
}

/// A compile-time error message: `const` code cannot format, so it is assembled here.
#[doc(hidden)]
pub struct Message {
    buf: [u8; 512],
    len: usize,
}

impl Message {
    const fn push(mut self, s: &str) -> Self {
        let s = s.as_bytes();
        let mut i = 0;
        while i < s.len() && self.len < self.buf.len() {
            self.buf[self.len] = s[i];
            (self.len, i) = (self.len + 1, i + 1);
        }
        self
    }

    /// The text (cut at a character boundary where it overflowed the buffer).
    pub const fn as_str(&self) -> &str {
        let bytes = self.buf.split_at(self.len).0;
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => match std::str::from_utf8(bytes.split_at(e.valid_up_to()).0) {
                Ok(s) => s,
                Err(_) => "",
            },
        }
    }
}

/// Why a call of `op`, written `called_as` with these `extents`, is wrong, given its
/// contract's `verdict`: what `#[megakernel]` asserts at compile time for each op call.
#[doc(hidden)]
pub const fn call_error(op: &TileOp, called_as: &str, extents: &str, verdict: Result<(), &str>) -> Option<Message> {
    let m = Message { buf: [0; 512], len: 0 };
    if !same_str(op.name, called_as) {
        let m = m.push("tile op `").push(op.path).push("` is called as `").push(called_as);
        return Some(m.push("`: the CUDA calls an op by its own name, import it as `").push(op.name).push("`"));
    }
    match verdict {
        Ok(()) => None,
        Err(why) => {
            let m = m.push("tile op `").push(op.name).push("` (").push(op.path).push(") called with extents ");
            Some(m.push(extents).push(": ").push(why))
        }
    }
}

const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut i = 0;
    while i < a.len() && i < b.len() && a[i] == b[i] {
        i += 1;
    }
    i == a.len() && i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{add, gemv, matmul, row_sum, sum_splits};

    #[test]
    fn library_contracts_accept_matching_and_reject_mismatched_extents() {
        assert_eq!(row_sum::contract(&[&[32, 32], &[32]]), Ok(()));
        assert_eq!(row_sum::contract(&[&[32, 4], &[32, 1]]), Ok(()));
        assert_eq!(row_sum::contract(&[&[32, 32], &[16]]), Err("dst must have as many rows as src"));
        assert_eq!(row_sum::contract(&[&[32, 32], &[32, 2]]), Err("dst's extents after the first must be 1"));
        assert_eq!(matmul::contract(&[&[8, 16], &[16, 4], &[8, 4]]), Ok(()));
        assert!(matmul::contract(&[&[8, 16], &[8, 4], &[8, 4]]).unwrap_err().contains("inner extents"));
        assert!(matmul::contract(&[&[8, 16], &[16, 4], &[4, 8]]).is_err());
        assert_eq!(gemv::contract(&[&[8, 16], &[1, 16], &[8]]), Ok(()));
        assert!(gemv::contract(&[&[8, 16], &[8], &[8]]).is_err());
        assert!(gemv::contract(&[&[8, 16], &[16], &[1, 4]]).is_err());
        assert_eq!(sum_splits::contract(&[&[128, 8], &[32, 8]]), Ok(()));
        assert!(sum_splits::contract(&[&[100, 8], &[32, 8]]).is_err());
        assert!(sum_splits::contract(&[&[128, 4], &[32, 8]]).is_err());
        assert_eq!(add::contract(&[&[4, 2], &[4, 2], &[4, 2]]), Ok(()));
        assert!(add::contract(&[&[4, 2], &[2, 4], &[4, 2]]).is_err());
        assert_eq!(add::contract(&[&[4, 2], &[4, 2]]), Err("wrong number of arguments"));
    }

    #[test]
    fn ops_are_described_by_full_path_and_parameter_kinds() {
        assert_eq!(row_sum::OP.path, "et_core::ops::reduce::row_sum");
        assert_eq!(row_sum::OP.name, "row_sum");
        assert_eq!(row_sum::OP.args, [ArgKind::Read, ArgKind::Write]);
        assert_eq!(matmul::OP.args, [ArgKind::Read, ArgKind::Read, ArgKind::Write]);
        assert!(row_sum::OP.file.ends_with("reduce.rs"));
        assert!(row_sum::OP.cuda.contains("void row_sum("));
        assert_eq!((row_sum::OP.contract)(&[&[2, 2], &[3]]), row_sum::contract(&[&[2, 2], &[3]]));
    }

    #[test]
    fn each_op_is_compiled_once_in_its_own_namespace_under_its_line() {
        let other = TileOp { path: "elsewhere::row_sum", line: 7, file: "elsewhere.rs", ..row_sum::OP };
        let mut out = String::new();
        cuda_ops(&[row_sum::OP, other, row_sum::OP], &mut out);
        assert_eq!(out.matches("void row_sum(").count(), 2, "{out}");
        let first = format!("namespace et_op_0 {{\n#line {} \"{}\"\n", row_sum::OP.line, row_sum::OP.file);
        assert!(out.contains(&first), "{out}");
        assert!(out.contains("namespace et_op_1 {\n#line 7 \"elsewhere.rs\"\n"), "{out}");
        assert!(out.contains("namespace et_op_2 = et_op_0;"), "{out}");
    }

    #[test]
    fn call_errors_name_the_op_and_the_extents() {
        assert!(call_error(&row_sum::OP, "row_sum", "[2, 2], [2]", Ok(())).is_none());
        let m = call_error(&row_sum::OP, "row_sum", "[2, 2], [3]", Err("rows differ")).unwrap();
        assert_eq!(
            m.as_str(),
            "tile op `row_sum` (et_core::ops::reduce::row_sum) called with extents [2, 2], [3]: rows differ"
        );
        let m = call_error(&row_sum::OP, "sums", "[2, 2], [2]", Ok(())).unwrap();
        assert!(m.as_str().contains("is called as `sums`"), "{}", m.as_str());
        for pad in ["", "x"] {
            let long = format!("{pad}{}", "é".repeat(400));
            let m = call_error(&row_sum::OP, "row_sum", "", Err(&long)).unwrap();
            assert!(m.as_str().len() >= 510 && m.as_str().ends_with('é'), "{}", m.as_str());
        }
    }
}
