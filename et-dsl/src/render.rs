//! Rendering the generated CUDA expression (`::core::concat!` of string literals and
//! `line!()`/`file!()` invocations spanned at the user's statements) to the text the
//! compiler would produce, outside the compiler.

use proc_macro2::TokenStream;
use syn::punctuated::Punctuated;
use syn::{Expr, Lit, Macro, Token};

/// The text of `tokens`, with `file!()` as `file` and `line!()` as the line of its span
/// (real lines need proc-macro2's `span-locations`, which this crate enables).
pub fn text(tokens: TokenStream, file: &str) -> syn::Result<String> {
    let mut out = String::new();
    piece(&syn::parse2(tokens)?, file, &mut out)?;
    Ok(out)
}

fn piece(e: &Expr, file: &str, out: &mut String) -> syn::Result<()> {
    match e {
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => out.push_str(&s.value()),
            Lit::Int(i) => out.push_str(i.base10_digits()),
            other => return Err(syn::Error::new(other.span(), "unexpected literal in generated CUDA")),
        },
        Expr::Macro(m) => macro_piece(&m.mac, file, out)?,
        other => return Err(syn::Error::new_spanned(other, "unexpected piece of generated CUDA")),
    }
    Ok(())
}

fn macro_piece(mac: &Macro, file: &str, out: &mut String) -> syn::Result<()> {
    let Some(last) = mac.path.segments.last() else {
        return Err(syn::Error::new_spanned(mac, "unexpected macro in generated CUDA"));
    };
    match last.ident.to_string().as_str() {
        "concat" => {
            for e in mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated)? {
                piece(&e, file, out)?;
            }
        }
        "line" => out.push_str(&last.ident.span().start().line.to_string()),
        "file" => out.push_str(file),
        _ => return Err(syn::Error::new_spanned(mac, "unexpected macro in generated CUDA")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_literals_lines_and_files() {
        let src = "fn f() {\n    stmt();\n}";
        let f: syn::ItemFn = syn::parse_str(src).unwrap();
        let span = syn::spanned::Spanned::span(&f.block.stmts[0]);
        let line = quote::quote_spanned!(span=> ::core::line!());
        let tokens = quote::quote!(::core::concat!("#line ", #line, " \"", ::core::file!(), "\"\n", 7));
        assert_eq!(text(tokens, "k.rs").unwrap(), "#line 2 \"k.rs\"\n7");
    }

    #[test]
    fn rejects_what_it_cannot_render() {
        let err = text(quote::quote!(::core::concat!("a", env!("X"))), "k.rs").unwrap_err();
        assert!(err.to_string().contains("unexpected macro"), "{err}");
    }
}
