//! Lowering index and shape expressions to affine forms over tile indices and dims.

use et_graph::{Affine, Term};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Lit, UnOp};

use crate::diag::unknown;

/// The names an expression may use.
pub struct Scope<'a> {
    /// Tile indices of the enclosing group (empty outside a tile body).
    pub vars: &'a [String],
    /// Dims of the megakernel.
    pub dims: &'a [String],
    /// Values of the static dims (aligned with `dims`); a static dim lowers to its value.
    pub statics: &'a [Option<i64>],
    /// What the expression is, for messages ("an event index", "a tile extent").
    pub what: &'a str,
}

impl Scope<'_> {
    fn lookup(&self, name: &str) -> Option<Term> {
        if let Some(v) = self.vars.iter().position(|v| v == name) {
            return Some(Term::Var(v as u16));
        }
        self.dims.iter().position(|d| d == name).map(|d| Term::Dim(d as u16))
    }

    fn candidates(&self) -> Vec<&str> {
        self.vars.iter().chain(self.dims.iter()).map(String::as_str).collect()
    }
}

/// How deeply an index or extent expression may nest (parentheses, operators): far
/// beyond any affine form a person writes, and shallow enough that lowering, which
/// recurses once per level, cannot exhaust the compiler's stack.
pub const MAX_DEPTH: usize = 128;

/// Lowers `e` to an affine expression, or explains why it is not one.
pub fn affine(e: &Expr, scope: &Scope<'_>) -> syn::Result<Affine> {
    affine_at(e, scope, 0)
}

/// [`affine`] of a subexpression `depth` levels down. Arithmetic is checked: a constant or
/// coefficient past `i64` is an error at the operation, never a wrapped value that the
/// bounds proofs would then trust.
fn affine_at(e: &Expr, scope: &Scope<'_>, depth: usize) -> syn::Result<Affine> {
    if depth > MAX_DEPTH {
        return Err(syn::Error::new_spanned(
            e,
            format!("{} nests more than {MAX_DEPTH} levels deep; write it in a simpler form", scope.what),
        ));
    }
    // spanned over the whole operation, not only its first token
    let overflow = |at: &dyn ToTokens| {
        syn::Error::new_spanned(at, format!("{} overflows 64-bit integer arithmetic here", scope.what))
    };
    let lower = |e: &Expr, scope: &Scope<'_>| affine_at(e, scope, depth + 1);
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Int(i) => Ok(Affine::constant(i.base10_parse()?)),
            other => Err(syn::Error::new(other.span(), format!("{} must be an integer expression", scope.what))),
        },
        Expr::Path(p) => {
            let ident = p.path.get_ident().ok_or_else(|| {
                syn::Error::new(p.span(), format!("{} can only use tile indices, dims and integers", scope.what))
            })?;
            let name = ident.to_string();
            scope
                .lookup(&name)
                .map(|t| match t {
                    Term::Dim(d) => {
                        scope.statics.get(d as usize).copied().flatten().map_or(Affine::term(t), Affine::constant)
                    }
                    Term::Var(_) => Affine::term(t),
                })
                .ok_or_else(|| unknown(ident.span(), "tile index or dim", &name, &scope.candidates()))
        }
        Expr::Paren(p) => lower(&p.expr, scope),
        Expr::Group(g) => lower(&g.expr, scope),
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => {
            lower(&u.expr, scope)?.checked_scale(-1).ok_or_else(|| overflow(u))
        }
        Expr::Binary(b) => {
            let l = lower(&b.left, scope)?;
            let r = lower(&b.right, scope)?;
            let checked = |a: Option<Affine>| a.ok_or_else(|| overflow(b));
            match b.op {
                BinOp::Add(_) => checked(l.checked_add(&r)),
                BinOp::Sub(_) => checked(r.checked_scale(-1).and_then(|r| l.checked_add(&r))),
                BinOp::Mul(_) => match (l.as_constant(), r.as_constant()) {
                    (Some(c), _) => checked(r.checked_scale(c)),
                    (_, Some(c)) => checked(l.checked_scale(c)),
                    _ => Err(syn::Error::new(
                        b.span(),
                        format!(
                            "{} must be affine: one side of `*` must be a constant (a literal or a static dim)",
                            scope.what
                        ),
                    )),
                },
                _ => Err(syn::Error::new(
                    b.op.span(),
                    format!("{} may only use `+`, `-` and `*` by a constant", scope.what),
                )),
            }
        }
        other => Err(syn::Error::new(
            other.span(),
            format!("{} must be an affine expression of tile indices and dims", scope.what),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope<'a>(vars: &'a [String], dims: &'a [String]) -> Scope<'a> {
        Scope { vars, dims, statics: &[], what: "an index" }
    }

    #[test]
    fn lowers_affine_forms() {
        let vars = vec!["i".to_string(), "k".to_string()];
        let dims = vec!["R".to_string()];
        let e: Expr = syn::parse_quote!(k * 8 + (R - 1) - 2 * i);
        let a = affine(&e, &scope(&vars, &dims)).unwrap();
        assert_eq!(a.display(&["i", "k"], &["R"]).to_string(), "-2*i + 8*k + R - 1");
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        let vars = vec!["i".to_string()];
        for e in [
            syn::parse_quote!(i * 9223372036854775807 * 3),
            syn::parse_quote!(4611686018427387904 + 4611686018427387904),
            syn::parse_quote!(-(-9223372036854775807 - 1)),
            syn::parse_quote!(i * 9223372036854775807 + i),
        ] {
            let err = affine(&e, &scope(&vars, &[])).unwrap_err().to_string();
            assert!(err.contains("overflows 64-bit integer arithmetic"), "{err}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let vars = vec!["i".to_string()];
        let deep: Expr = syn::parse_str(&format!("i{}", " - i + i".repeat(MAX_DEPTH))).unwrap();
        let err = affine(&deep, &scope(&vars, &[])).unwrap_err().to_string();
        assert!(err.contains("nests more than"), "{err}");
        let fine: Expr = syn::parse_str(&format!("i{}", " - i + i".repeat(MAX_DEPTH / 4))).unwrap();
        assert_eq!(affine(&fine, &scope(&vars, &[])).unwrap().display(&["i"], &[]).to_string(), "i");
    }

    #[test]
    fn rejects_products_of_names_and_unknown_names() {
        let vars = vec!["i".to_string()];
        let dims = vec!["R".to_string()];
        let e: Expr = syn::parse_quote!(i * R);
        let err = affine(&e, &scope(&vars, &dims)).unwrap_err().to_string();
        assert!(err.contains("must be affine"), "{err}");
        let e: Expr = syn::parse_quote!(j + 1);
        let err = affine(&e, &scope(&vars, &dims)).unwrap_err().to_string();
        assert!(err.contains("cannot find tile index or dim `j`"), "{err}");
        assert!(err.contains("did you mean `i`"), "{err}");
    }
}
