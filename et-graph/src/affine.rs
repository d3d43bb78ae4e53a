//! Affine expressions over tile indices and dims, and interval reasoning over them.

use std::borrow::Cow;
use std::fmt;

use crate::spec::{DimKind, DimSpec, List};

/// A variable of an affine expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Term {
    /// The `n`-th tile index of the enclosing tile group.
    Var(u16),
    /// The `n`-th dim of the megakernel.
    Dim(u16),
}

/// `constant + Σ coefficient · term`, kept normalised: terms sorted, merged, non-zero.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Affine {
    /// The constant part.
    pub constant: i64,
    /// `(term, coefficient)` pairs.
    pub terms: List<(Term, i64)>,
}

impl Affine {
    /// The constant `c`.
    pub const fn constant(c: i64) -> Affine {
        Affine { constant: c, terms: Cow::Borrowed(&[]) }
    }

    /// A single term with coefficient 1.
    pub fn term(t: Term) -> Affine {
        Affine { constant: 0, terms: Cow::Owned(vec![(t, 1)]) }
    }

    /// Builds a normalised expression from unsorted, possibly repeated terms.
    pub fn from_terms(constant: i64, terms: impl IntoIterator<Item = (Term, i64)>) -> Affine {
        let mut v: Vec<(Term, i64)> = Vec::new();
        for (t, c) in terms {
            match v.iter_mut().find(|(u, _)| *u == t) {
                Some((_, acc)) => *acc += c,
                None => v.push((t, c)),
            }
        }
        v.retain(|(_, c)| *c != 0);
        v.sort();
        Affine { constant, terms: Cow::Owned(v) }
    }

    /// [`Affine::from_terms`], or `None` when the constant or a merged coefficient
    /// overflows `i64`.
    pub fn checked_from_terms(constant: i64, terms: impl IntoIterator<Item = (Term, Option<i64>)>) -> Option<Affine> {
        let mut v: Vec<(Term, i64)> = Vec::new();
        for (t, c) in terms {
            let c = c?;
            match v.iter_mut().find(|(u, _)| *u == t) {
                Some((_, acc)) => *acc = acc.checked_add(c)?,
                None => v.push((t, c)),
            }
        }
        v.retain(|(_, c)| *c != 0);
        v.sort();
        Some(Affine { constant, terms: Cow::Owned(v) })
    }

    /// `self + other`, or `None` when a coefficient or the constant overflows `i64`.
    pub fn checked_add(&self, other: &Affine) -> Option<Affine> {
        let terms = self.terms.iter().chain(other.terms.iter()).map(|&(t, c)| (t, Some(c)));
        Affine::checked_from_terms(self.constant.checked_add(other.constant)?, terms)
    }

    /// `k · self`, or `None` when a coefficient or the constant overflows `i64`.
    pub fn checked_scale(&self, k: i64) -> Option<Affine> {
        let terms = self.terms.iter().map(|&(t, c)| (t, c.checked_mul(k)));
        Affine::checked_from_terms(self.constant.checked_mul(k)?, terms)
    }

    /// An upper bound of `|self|` when each term's magnitude is at most `bound(term)`:
    /// `|constant| + Σ |coefficient| · bound(term)`, computed in `i128` and saturating,
    /// so that it never overflows whatever the expression holds.
    pub fn magnitude(&self, bound: impl Fn(Term) -> i128) -> i128 {
        self.terms.iter().fold(i128::from(self.constant).abs(), |acc, &(t, c)| {
            acc.saturating_add(i128::from(c).abs().saturating_mul(bound(t)))
        })
    }

    /// The constant value, if the expression has no terms.
    pub fn as_constant(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// Whether the expression mentions any tile index.
    pub fn has_vars(&self) -> bool {
        self.terms.iter().any(|(t, _)| matches!(t, Term::Var(_)))
    }

    /// `self + other`.
    pub fn add(&self, other: &Affine) -> Affine {
        Affine::from_terms(self.constant + other.constant, self.terms.iter().chain(other.terms.iter()).copied())
    }

    /// `self - other`.
    pub fn sub(&self, other: &Affine) -> Affine {
        self.add(&other.scale(-1))
    }

    /// `k · self`.
    pub fn scale(&self, k: i64) -> Affine {
        Affine::from_terms(self.constant * k, self.terms.iter().map(|&(t, c)| (t, c * k)))
    }

    /// Evaluates with concrete tile indices and dims. The caller keeps the value in range:
    /// a launch's dims pass [`crate::check::first_too_large`] first, which bounds every
    /// expression of its graph by 2^48; elsewhere use [`Affine::checked_eval`].
    pub fn eval(&self, vars: &[i64], dims: &[i64]) -> i64 {
        self.terms.iter().fold(self.constant, |acc, &(t, c)| {
            acc + c * match t {
                Term::Var(v) => vars[v as usize],
                Term::Dim(d) => dims[d as usize],
            }
        })
    }

    /// Evaluates with concrete tile indices and dims; `None` when the value or a partial
    /// sum overflows `i64`.
    pub fn checked_eval(&self, vars: &[i64], dims: &[i64]) -> Option<i64> {
        self.terms.iter().try_fold(self.constant, |acc, &(t, c)| {
            let v = match t {
                Term::Var(v) => vars[v as usize],
                Term::Dim(d) => dims[d as usize],
            };
            acc.checked_add(c.checked_mul(v)?)
        })
    }

    /// Replaces every tile index `v` by `with(v)` (an affine expression of dims).
    pub fn substitute_vars(&self, with: impl Fn(u16, i64) -> Affine) -> Affine {
        let mut out =
            Affine::from_terms(self.constant, self.terms.iter().filter(|(t, _)| matches!(t, Term::Dim(_))).copied());
        for &(t, c) in self.terms.iter() {
            if let Term::Var(v) = t {
                out = out.add(&with(v, c));
            }
        }
        out
    }

    /// Replaces static dims by their values.
    pub fn substitute_static(&self, dims: &[DimSpec]) -> Affine {
        let mut constant = self.constant;
        let mut terms = Vec::new();
        for &(t, c) in self.terms.iter() {
            match t {
                Term::Dim(d) => match dims[d as usize].kind {
                    DimKind::Static(v) => constant += c * v,
                    DimKind::Symbolic { .. } => terms.push((t, c)),
                },
                Term::Var(_) => terms.push((t, c)),
            }
        }
        Affine::from_terms(constant, terms)
    }

    /// The largest value over a tile domain `0 <= var_k < domain[k]`, as an expression of
    /// dims. Each domain extent is assumed to be at least 1.
    pub fn max_over(&self, domain: &[Affine]) -> Affine {
        self.substitute_vars(|v, c| {
            if c > 0 { domain[v as usize].sub(&Affine::constant(1)).scale(c) } else { Affine::constant(0) }
        })
    }

    /// The smallest value over a tile domain, as an expression of dims.
    pub fn min_over(&self, domain: &[Affine]) -> Affine {
        self.substitute_vars(|v, c| {
            if c < 0 { domain[v as usize].sub(&Affine::constant(1)).scale(c) } else { Affine::constant(0) }
        })
    }

    /// Proves `self >= 0` for every admissible value of the dims: static dims take their
    /// value, symbolic dims range over `1 ..= max` (unbounded when no max is declared).
    /// On failure returns a failing assignment of the dims it mentions, as small as it
    /// can be: every dim starts at 1 and, in order, a dim with a negative coefficient
    /// grows only as far as needed (up to its bound) to make the expression negative.
    pub fn prove_nonnegative(&self, dims: &[DimSpec]) -> Result<(), Vec<(u16, i64)>> {
        let e = self.substitute_static(dims);
        let terms: Vec<(u16, i64)> =
            e.terms.iter().filter_map(|&(t, c)| if let Term::Dim(d) = t { Some((d, c)) } else { None }).collect();
        let mut witness: Vec<(u16, i64)> = terms.iter().map(|&(d, _)| (d, 1)).collect();
        let value = |w: &[(u16, i64)]| {
            terms.iter().zip(w).fold(e.constant as i128, |acc, (&(_, c), &(_, v))| acc + c as i128 * v as i128)
        };
        for (k, &(d, c)) in terms.iter().enumerate() {
            let now = value(&witness);
            if now >= 0 && c < 0 {
                let max = match dims[d as usize].kind {
                    DimKind::Symbolic { max } => max.unwrap_or(i64::MAX),
                    DimKind::Static(v) => v,
                };
                // the smallest v with now + c * (v - 1) < 0
                witness[k].1 = (2 + now / -(c as i128)).min(max as i128) as i64;
            }
        }
        if value(&witness) >= 0 && !e.has_vars() { Ok(()) } else { Err(witness) }
    }

    /// [`Affine::prove_nonnegative`] for the dims at which every expression of
    /// `at_least_one` is at least 1: the extents of a tile domain, whose group has no task,
    /// and so no access to bound, where one of them is 0 or less (`N - 2` is an index of
    /// `[N - 1]`'s tasks, which exist from `N = 2`). An extent `x` with a positive
    /// coefficient `a` on a dim that `self` has with a positive coefficient `c` bounds that
    /// dim from below: `a · self - c · (x - 1) >= 0` proves `self >= 0` wherever `x >= 1`,
    /// and no longer mentions the dim when `x` has no other. On failure returns a failing
    /// assignment at which the extents are at least 1 where one dim decides it, else the
    /// unconditional one.
    pub fn prove_nonnegative_where(&self, dims: &[DimSpec], at_least_one: &[Affine]) -> Result<(), Vec<(u16, i64)>> {
        let Err(witness) = self.prove_nonnegative(dims) else {
            return Ok(());
        };
        let e = self.substitute_static(dims);
        for x in at_least_one.iter().map(|x| x.substitute_static(dims)) {
            if x.terms.iter().any(|&(t, _)| matches!(t, Term::Var(_))) {
                continue;
            }
            for &(t, a) in x.terms.iter().filter(|&&(_, a)| a > 0) {
                let Some(&(_, c)) = e.terms.iter().find(|&&(u, c)| u == t && c > 0) else {
                    continue;
                };
                let traded = e
                    .checked_scale(a)
                    .zip(x.sub(&Affine::constant(1)).checked_scale(-c))
                    .and_then(|(l, r)| l.checked_add(&r));
                if traded.is_some_and(|r| r.prove_nonnegative(dims).is_ok()) {
                    return Ok(());
                }
            }
        }
        Err(Self::witness_inside(&e, dims, at_least_one, witness))
    }

    /// The smallest value of `e`'s one symbolic dim from `witness` on at which `e` is
    /// negative and every `at_least_one` is at least 1, or `witness` as it is (several
    /// dims, or none found within a few thousand values).
    fn witness_inside(
        e: &Affine,
        dims: &[DimSpec],
        at_least_one: &[Affine],
        witness: Vec<(u16, i64)>,
    ) -> Vec<(u16, i64)> {
        let [(d, from)] = witness[..] else {
            return witness;
        };
        let max = match dims[d as usize].kind {
            DimKind::Symbolic { max } => max.unwrap_or(i64::MAX),
            DimKind::Static(v) => v,
        };
        let mut values: Vec<i64> = dims.iter().map(|s| if let DimKind::Static(v) = s.kind { v } else { 1 }).collect();
        for v in from..=max.min(from.saturating_add(4096)) {
            values[d as usize] = v;
            let at = |x: &Affine| x.checked_eval(&[], &values);
            if at(e).is_some_and(|y| y < 0) && at_least_one.iter().all(|x| at(x).is_some_and(|y| y >= 1)) {
                return vec![(d, v)];
            }
        }
        witness
    }

    /// Formats with the given names for tile indices and dims.
    pub fn display<'a>(&'a self, vars: &'a [&'a str], dims: &'a [&'a str]) -> impl fmt::Display + 'a {
        DisplayAffine { e: self, vars, dims }
    }
}

struct DisplayAffine<'a> {
    e: &'a Affine,
    vars: &'a [&'a str],
    dims: &'a [&'a str],
}

impl fmt::Display for DisplayAffine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for &(t, c) in self.e.terms.iter() {
            let name = match t {
                Term::Var(v) => self.vars.get(v as usize).copied().unwrap_or("?"),
                Term::Dim(d) => self.dims.get(d as usize).copied().unwrap_or("?"),
            };
            let (sign, mag) = if c < 0 { ("-", -c) } else { ("+", c) };
            match (first, sign) {
                (true, "-") => write!(f, "-")?,
                (true, _) => {}
                (false, s) => write!(f, " {s} ")?,
            }
            if mag == 1 {
                write!(f, "{name}")?
            } else {
                write!(f, "{mag}*{name}")?
            }
            first = false;
        }
        match (first, self.e.constant) {
            (true, c) => write!(f, "{c}"),
            (false, 0) => Ok(()),
            (false, c) if c < 0 => write!(f, " - {}", -c),
            (false, c) => write!(f, " + {c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims() -> Vec<DimSpec> {
        vec![
            DimSpec { name: "R".into(), kind: DimKind::Symbolic { max: None } },
            DimSpec { name: "H".into(), kind: DimKind::Static(64) },
            DimSpec { name: "B".into(), kind: DimKind::Symbolic { max: Some(8) } },
        ]
    }

    #[test]
    fn normalises_and_evaluates() {
        let e = Affine::from_terms(3, [(Term::Var(0), 2), (Term::Dim(0), 1), (Term::Var(0), -2)]);
        assert_eq!(e.terms.len(), 1);
        assert_eq!(e.eval(&[5], &[7, 0, 0]), 10);
    }

    #[test]
    fn proves_tile_bounds_with_symbolic_dims() {
        // i * 32 + 32 <= R * 32 for i in 0..R
        let domain = [Affine::term(Term::Dim(0))];
        let end = Affine::from_terms(32, [(Term::Var(0), 32)]);
        let slack = Affine::from_terms(0, [(Term::Dim(0), 32)]).sub(&end.max_over(&domain));
        assert!(slack.prove_nonnegative(&dims()).is_ok());
        // i + 1 <= R - 1 fails at R = 1 ... and in general
        let bad = Affine::from_terms(-1, [(Term::Dim(0), 1)])
            .sub(&Affine::from_terms(1, [(Term::Var(0), 1)]).max_over(&domain));
        assert!(bad.prove_nonnegative(&dims()).is_err());
    }

    #[test]
    fn bounded_dims_use_their_max() {
        // 8 - B >= 0 holds for B <= 8, 7 - B does not
        let ok = Affine::from_terms(8, [(Term::Dim(2), -1)]);
        assert!(ok.prove_nonnegative(&dims()).is_ok());
        let bad = Affine::from_terms(7, [(Term::Dim(2), -1)]);
        assert_eq!(bad.prove_nonnegative(&dims()), Err(vec![(2, 8)]));
        // static dims are substituted
        let st = Affine::from_terms(-64, [(Term::Dim(1), 1)]);
        assert!(st.prove_nonnegative(&dims()).is_ok());
    }

    #[test]
    fn witness_is_the_smallest_failing_size() {
        // R - 1 - 1 >= 0 already fails at R = 1: not "a large R"
        let at_one = Affine::from_terms(-2, [(Term::Dim(0), 1)]);
        assert_eq!(at_one.prove_nonnegative(&dims()), Err(vec![(0, 1)]));
        // 10 - 3R >= 0 first fails at R = 4 (unbounded R)
        let at_four = Affine::from_terms(10, [(Term::Dim(0), -3)]);
        assert_eq!(at_four.prove_nonnegative(&dims()), Err(vec![(0, 4)]));
        // 4 - B >= 0 with B <= 8 first fails at B = 5
        let bounded = Affine::from_terms(4, [(Term::Dim(2), -1)]);
        assert_eq!(bounded.prove_nonnegative(&dims()), Err(vec![(2, 5)]));
    }

    #[test]
    fn a_bound_holds_where_the_domain_has_tasks() {
        let r = |c: i64, k: i64| Affine::from_terms(c, [(Term::Dim(0), k)]);
        // N - 2 >= 0 wherever [N - 1] has a task (N >= 2), though not at N = 1
        assert_eq!(r(-2, 1).prove_nonnegative(&dims()), Err(vec![(0, 1)]));
        assert!(r(-2, 1).prove_nonnegative_where(&dims(), &[r(-1, 1)]).is_ok());
        // a domain of [2N - 3] has tasks from N = 2 as well; a rank-2 domain's second extent
        assert!(r(-2, 1).prove_nonnegative_where(&dims(), &[r(-3, 2)]).is_ok());
        assert!(r(-2, 1).prove_nonnegative_where(&dims(), &[Affine::constant(4), r(-1, 1)]).is_ok());
        // 2N - 5 fails at N = 2, the smallest size with a task (not at N = 1)
        assert_eq!(r(-5, 2).prove_nonnegative_where(&dims(), &[r(-1, 1)]), Err(vec![(0, 2)]));
        // a domain that does not bound the dim proves nothing more
        assert_eq!(r(-2, 1).prove_nonnegative_where(&dims(), &[Affine::constant(3)]), Err(vec![(0, 1)]));
        assert!(r(-2, 1).prove_nonnegative_where(&dims(), &[r(0, -1).add(&Affine::constant(9))]).is_err());
    }

    #[test]
    fn checked_arithmetic_reports_overflow() {
        let big = Affine::from_terms(i64::MAX, [(Term::Var(0), i64::MAX)]);
        assert_eq!(big.checked_add(&Affine::constant(1)), None);
        assert_eq!(Affine::term(Term::Var(0)).checked_add(&big), None, "the merged coefficient overflows");
        assert_eq!(big.checked_scale(2), None);
        assert_eq!(Affine::constant(i64::MIN).checked_scale(-1), None);
        let small = Affine::from_terms(3, [(Term::Var(0), 2)]);
        assert_eq!(small.checked_scale(-2), Some(small.scale(-2)));
        assert_eq!(small.checked_add(&small), Some(small.add(&small)));
    }

    #[test]
    fn checked_eval_agrees_with_eval_and_reports_overflow() {
        let e = Affine::from_terms(3, [(Term::Var(0), -2), (Term::Dim(0), 1)]);
        assert_eq!(e.checked_eval(&[10], &[5]), Some(e.eval(&[10], &[5])));
        assert_eq!(e.checked_eval(&[i64::MAX], &[0]), None);
        assert_eq!(e.checked_eval(&[0], &[i64::MAX]), None);
    }

    #[test]
    fn magnitude_bounds_the_value_and_saturates() {
        // |3 - 2 i + R| <= 3 + 2 * 10 + 1 * 5
        let e = Affine::from_terms(3, [(Term::Var(0), -2), (Term::Dim(0), 1)]);
        assert_eq!(e.magnitude(|t| if t == Term::Var(0) { 10 } else { 5 }), 28);
        let huge = Affine::from_terms(i64::MIN, [(Term::Var(0), i64::MIN)]);
        assert_eq!(huge.magnitude(|_| i128::MAX), i128::MAX);
    }

    #[test]
    fn displays_readably() {
        let e = Affine::from_terms(-3, [(Term::Var(0), 8), (Term::Dim(0), -1)]);
        assert_eq!(e.display(&["k"], &["R"]).to_string(), "8*k - R - 3");
        assert_eq!(Affine::constant(4).display(&[], &[]).to_string(), "4");
    }
}
