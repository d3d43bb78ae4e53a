//! The attribute arguments: `#[megakernel(schedule = "..", dims(..), threads = N,
//! crate = "path", debug)]`. `dims(..)` has its own grammar (`H = 2048`, `B <= 256`);
//! the rest is parsed by darling.

use darling::FromMeta;
use darling::ast::NestedMeta;
use darling::util::{Flag, SpannedValue};
use proc_macro2::{TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::{Ident, LitInt, Token};

use crate::diag::{Errors, did_you_mean};

/// Parsed attribute arguments.
pub struct Args {
    pub schedule: Schedule,
    pub dims: Vec<DimArg>,
    pub threads: u32,
    pub krate: syn::Path,
    pub debug: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    Static,
    Dynamic,
}

/// `H = 2048` (static value) or `B <= 256` (bound of a symbolic dim).
pub struct DimArg {
    pub name: Ident,
    pub value: DimValue,
}

pub enum DimValue {
    Static(i64),
    Max(i64),
}

#[derive(FromMeta)]
struct DarlingArgs {
    #[darling(default)]
    schedule: Option<SpannedValue<String>>,
    #[darling(default)]
    threads: Option<SpannedValue<u32>>,
    #[darling(rename = "crate", default)]
    krate: Option<syn::Path>,
    #[darling(default)]
    debug: Flag,
}

/// Parses the attribute; errors are collected and defaults used in their place.
pub fn parse(attr: TokenStream, errors: &mut Errors) -> Args {
    let (dims_tokens, rest) = split_dims(attr);
    let mut dims = Vec::new();
    for t in dims_tokens {
        match syn::parse2::<DimList>(t) {
            Ok(list) => dims.extend(list.0),
            Err(e) => errors.push(e),
        }
    }
    // the default CTA size is et_core::DEFAULT_THREADS (why: there): 512 threads keep
    // enough 16-byte loads in flight per SM for bandwidth-bound ops
    let mut args =
        Args { schedule: Schedule::Static, dims, threads: 512, krate: syn::parse_quote!(::et_core), debug: false };
    let parsed =
        NestedMeta::parse_meta_list(rest).map_err(darling::Error::from).and_then(|m| DarlingArgs::from_list(&m));
    match parsed {
        Ok(d) => {
            if let Some(s) = d.schedule {
                match s.as_str() {
                    "static" => args.schedule = Schedule::Static,
                    "dynamic" => args.schedule = Schedule::Dynamic,
                    other => {
                        let mut msg = format!("unknown schedule `{other}`: expected \"static\" or \"dynamic\"");
                        if let Some(m) = did_you_mean(other, ["static", "dynamic"]) {
                            msg.push_str(&format!("\nhelp: did you mean \"{m}\"?"));
                        }
                        errors.error(s.span(), msg);
                    }
                }
            }
            if let Some(t) = d.threads {
                if *t < 32 || *t > 1024 || *t % 32 != 0 {
                    errors.error(
                        t.span(),
                        format!("`threads = {}`: a CTA size must be a multiple of 32 between 32 and 1024", *t),
                    );
                } else {
                    args.threads = *t;
                }
            }
            if let Some(k) = d.krate {
                args.krate = k;
            }
            args.debug = d.debug.is_present();
        }
        Err(e) => errors.push(e.into()),
    }
    args
}

/// Takes the top-level `dims(..)` groups out of the attribute tokens.
fn split_dims(attr: TokenStream) -> (Vec<TokenStream>, TokenStream) {
    let tokens: Vec<TokenTree> = attr.into_iter().collect();
    let mut dims = Vec::new();
    let mut rest: Vec<TokenTree> = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        if let (TokenTree::Ident(i), Some(TokenTree::Group(g))) = (&tokens[k], tokens.get(k + 1))
            && i == "dims"
            && g.delimiter() == proc_macro2::Delimiter::Parenthesis
        {
            dims.push(g.stream());
            k += 2;
            // drop the comma after it
            if matches!(tokens.get(k), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
                k += 1;
            }
            continue;
        }
        rest.push(tokens[k].clone());
        k += 1;
    }
    (dims, rest.into_iter().collect())
}

struct DimList(Vec<DimArg>);

impl Parse for DimList {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        // every entry is checked, the bad ones' errors reported together: a value out of
        // range or an entry without one; a syntax error stops the list there
        let mut out = Vec::new();
        let mut bad: Option<syn::Error> = None;
        let mut report = |e: syn::Error| match &mut bad {
            Some(b) => b.combine(e),
            None => bad = Some(e),
        };
        let end = (|| {
            while !input.is_empty() {
                let name: Ident = input.parse()?;
                let value = if input.peek(Token![<=]) {
                    input.parse::<Token![<=]>()?;
                    positive(input.parse()?).map(DimValue::Max)
                } else if input.peek(Token![=]) {
                    input.parse::<Token![=]>()?;
                    positive(input.parse()?).map(DimValue::Static)
                } else {
                    Err(syn::Error::new(
                        name.span(),
                        format!(
                            "expected `{name} = value` (a static dim) or `{name} <= bound` (a bounded symbolic dim)"
                        ),
                    ))
                };
                match value {
                    Ok(value) => out.push(DimArg { name, value }),
                    Err(e) => report(e),
                }
                if input.is_empty() {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            Ok(())
        })();
        if let Err(e) = end {
            report(e);
        }
        match bad {
            Some(e) => Err(e),
            None => Ok(DimList(out)),
        }
    }
}

fn positive(l: LitInt) -> syn::Result<i64> {
    let v: i64 = l.base10_parse()?;
    if v < 1 {
        return Err(syn::Error::new(l.span(), "a dim is at least 1"));
    }
    Ok(v)
}
