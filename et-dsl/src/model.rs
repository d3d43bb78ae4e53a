//! The typed model of a `#[megakernel]` function, as written (syntax with spans).

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{Attribute, Expr, Ident, Path, Visibility};

/// The whole annotated function.
pub struct Megakernel {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub params: Vec<Param>,
    pub events: Vec<EventDecl>,
    pub groups: Vec<TileGroup>,
}

/// `name: &Tensor<dtype, { [shape] }>` or `name: &mut Tensor<..>`.
pub struct Param {
    pub name: Ident,
    pub mutable: bool,
    pub dtype: Ident,
    pub shape: Vec<Expr>,
    /// The whole type, for errors about the parameter.
    pub ty_span: Span,
}

/// `let name = event!([shape], count = ..);`
pub struct EventDecl {
    pub name: Ident,
    pub shape: Vec<Expr>,
    pub count: Option<CountDecl>,
    pub span: Span,
}

/// The `count = ..` of an event.
pub enum CountDecl {
    /// `count = 4`, `count = K * 2`.
    Fixed(Expr),
    /// `count = dyn(tensor)`.
    Dynamic { tensor: Ident, tokens: TokenStream },
}

impl CountDecl {
    pub fn tokens(&self) -> TokenStream {
        match self {
            CountDecl::Fixed(e) => e.to_token_stream(),
            CountDecl::Dynamic { tokens, .. } => tokens.clone(),
        }
    }
}

/// `tile!(name[i, j] in [D0, D1], cost = N if cond { .. })` (or `if cond, cost = N`).
pub struct TileGroup {
    pub name: Ident,
    pub vars: Vec<Ident>,
    pub domain: Vec<Expr>,
    pub cost: Option<syn::LitInt>,
    pub condition: Option<ConditionExpr>,
    pub stmts: Vec<TileStmt>,
}

/// `if m * 16 < counts[e]`: two operands around a comparison.
pub struct ConditionExpr {
    pub lhs: Operand,
    pub cmp: et_graph::Cmp,
    pub rhs: Operand,
    /// The whole condition, for errors.
    pub tokens: TokenStream,
}

/// One side of a condition.
pub enum Operand {
    /// An integer expression of tile indices and dims.
    Expr(Expr),
    /// `tensor[at..]`.
    Data { tensor: Ident, at: Vec<Expr> },
}

/// One statement of a tile body.
pub enum TileStmt {
    Wait(AccessExpr),
    Signal(AccessExpr),
    Op(OpCall),
}

/// `e[i, k * 8 .. k * 8 + 8, .., topk[t, k]]` inside `wait!`/`signal!`.
pub struct AccessExpr {
    pub event: Ident,
    pub indices: Vec<IndexExpr>,
    /// The macro invocation (`wait!(..)`), for `#line`.
    pub span: Span,
    /// The macro invocation's tokens, for whole-access errors.
    pub tokens: TokenStream,
}

/// One coordinate of an access.
pub enum IndexExpr {
    At(Expr),
    Range { start: Option<Box<Expr>>, end: Option<Box<Expr>>, span: Span, tokens: TokenStream },
    Data { tensor: Ident, at: Vec<Expr>, tokens: TokenStream },
}

impl IndexExpr {
    pub fn tokens(&self) -> TokenStream {
        match self {
            IndexExpr::At(e) => e.to_token_stream(),
            IndexExpr::Range { tokens, .. } | IndexExpr::Data { tokens, .. } => tokens.clone(),
        }
    }
}

/// A call of a tile op: `path(args..)`.
pub struct OpCall {
    pub func: Path,
    pub args: Vec<OpArg>,
    pub span: Span,
}

/// An argument of a tile-op call.
pub enum OpArg {
    /// `t.tile([index..], [size..])`.
    Tile(TileArg),
    /// Any other expression (a scalar: literal, tile index or dim).
    Scalar(Expr),
}

/// `tensor.tile([index..], [size..])`.
pub struct TileArg {
    pub tensor: Ident,
    pub index: Vec<Expr>,
    pub size: Vec<Expr>,
    pub span: Span,
    pub tokens: TokenStream,
}
