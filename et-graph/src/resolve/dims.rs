//! Solving the symbolic dims from tensor shapes: one fixpoint, run symbolically by the
//! compile-time rule (which dims are determined) and on real shapes at launch.

use super::ResolveError;
use crate::affine::Term;
use crate::check::first_too_large;
use crate::spec::{DimKind, GraphSpec};

/// One step of solving the dims: `dim` is read from extent `axis` of tensor `tensor`,
/// of the form `c*dim + k` once the dims of earlier steps are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DimStep {
    /// The dim solved.
    pub dim: u16,
    /// Its coefficient in the extent.
    pub coefficient: i64,
    /// The tensor parameter read.
    pub tensor: usize,
    /// The dimension of that tensor.
    pub axis: usize,
}

/// The steps that solve the symbolic dims, in order: repeatedly, the first extent with
/// exactly one unknown dim solves it. A symbolic dim that no step solves is undetermined.
pub fn dim_plan(spec: &GraphSpec) -> Vec<DimStep> {
    let mut known: Vec<bool> = spec.dims.iter().map(|d| matches!(d.kind, DimKind::Static(_))).collect();
    let mut steps = Vec::new();
    let mut progress = true;
    while progress {
        progress = false;
        for (tensor, ts) in spec.tensors.iter().enumerate() {
            for (axis, extent) in ts.shape.iter().enumerate() {
                let mut unknown = extent.terms.iter().filter_map(|&(term, c)| match term {
                    Term::Dim(d) if !known[d as usize] => Some((d, c)),
                    _ => None,
                });
                if let (Some((dim, coefficient)), None) = (unknown.next(), unknown.next()) {
                    known[dim as usize] = true;
                    steps.push(DimStep { dim, coefficient, tensor, axis });
                    progress = true;
                }
            }
        }
    }
    steps
}

/// Resolves every dim from the tensor shapes: static dims take their value, symbolic
/// dims follow [`dim_plan`]; then every extent is checked against its declaration.
pub fn resolve_dims(spec: &GraphSpec, shapes: &[Vec<i64>]) -> Result<Vec<i64>, ResolveError> {
    for (t, ts) in spec.tensors.iter().enumerate() {
        if shapes[t].len() != ts.shape.len() {
            return Err(ResolveError::Rank {
                tensor: ts.name.to_string(),
                expected: ts.shape.len(),
                got: shapes[t].len(),
            });
        }
    }
    let dn: Vec<&str> = spec.dims.iter().map(|d| &*d.name).collect();
    let mut dims: Vec<Option<i64>> =
        spec.dims.iter().map(|d| if let DimKind::Static(v) = d.kind { Some(v) } else { None }).collect();
    let mut source: Vec<String> = vec![String::new(); dims.len()];
    for DimStep { dim, coefficient: c, tensor, axis } in dim_plan(spec) {
        let (ts, extent) = (&spec.tensors[tensor], &spec.tensors[tensor].shape[axis]);
        let known: Vec<i64> = dims.iter().map(|v| v.unwrap_or(0)).collect();
        let (got, name) = (shapes[tensor][axis], &dn[dim as usize]);
        let too_large = || ResolveError::Magnitude {
            what: format!("`{name}` as solved from `{}` dimension {axis} ({got})", ts.name),
        };
        let rest = extent.checked_eval(&[], &known).ok_or_else(too_large)?;
        let left = got.checked_sub(rest).ok_or_else(too_large)?;
        // (checked_div fails exactly where `%` would overflow too)
        let quotient = left.checked_div(c).ok_or_else(too_large)?;
        if left % c != 0 || quotient < 1 {
            return Err(ResolveError::Shape {
                tensor: ts.name.to_string(),
                dim: axis,
                declared: extent.display(&[], &dn).to_string(),
                expected: None,
                got,
                because: format!("no positive whole value of `{name}` gives {got}"),
            });
        }
        dims[dim as usize] = Some(quotient);
        source[dim as usize] = format!("`{name}` = {quotient} from `{}` dimension {axis}", ts.name);
    }
    let mut out = Vec::with_capacity(dims.len());
    for (d, v) in dims.iter().enumerate() {
        let spec_d = &spec.dims[d];
        let Some(v) = *v else {
            return Err(ResolveError::Dim {
                dim: spec_d.name.to_string(),
                message: "no tensor shape determines it; use it in a parameter's shape as `c*D + k`".into(),
            });
        };
        if let DimKind::Symbolic { max: Some(m) } = spec_d.kind
            && v > m
        {
            return Err(ResolveError::Dim {
                dim: spec_d.name.to_string(),
                message: format!("resolved to {v} ({}), above its declared bound {m}", source[d]),
            });
        }
        out.push(v);
    }
    // every expression evaluated from here on (extents, indices, counts) stays in range
    if let Some(what) = first_too_large(spec, &out) {
        return Err(ResolveError::Magnitude { what });
    }
    for (t, ts) in spec.tensors.iter().enumerate() {
        for (k, extent) in ts.shape.iter().enumerate() {
            let want = extent.eval(&[], &out);
            if want != shapes[t][k] {
                let because: Vec<String> = extent
                    .terms
                    .iter()
                    .filter_map(|&(term, _)| match term {
                        Term::Dim(d) if !source[d as usize].is_empty() => Some(source[d as usize].clone()),
                        Term::Dim(d) => match spec.dims[d as usize].kind {
                            DimKind::Static(_) => Some(format!("`{}` is static", dn[d as usize])),
                            DimKind::Symbolic { .. } => None,
                        },
                        _ => None,
                    })
                    .collect();
                return Err(ResolveError::Shape {
                    tensor: ts.name.to_string(),
                    dim: k,
                    declared: extent.display(&[], &dn).to_string(),
                    expected: Some(want),
                    got: shapes[t][k],
                    because: because.join(", "),
                });
            }
        }
    }
    Ok(out)
}
