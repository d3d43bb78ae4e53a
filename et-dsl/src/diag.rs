//! Collecting errors: every rule reports into one [`Errors`]; they are emitted together.

use proc_macro2::Span;

/// Errors collected across parsing, lowering and checking.
#[derive(Default)]
pub struct Errors {
    all: Option<syn::Error>,
    count: usize,
}

impl Errors {
    pub fn push(&mut self, e: syn::Error) {
        self.count += 1;
        match &mut self.all {
            Some(all) => all.combine(e),
            None => self.all = Some(e),
        }
    }

    pub fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.push(syn::Error::new(span, msg));
    }

    /// How many errors have been pushed.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_none()
    }

    /// All errors as one; called once checking failed, so at least one was pushed
    /// (an analysis that gives up without one is a bug, reported as such rather than
    /// compiling a stub silently).
    pub fn into_error(self) -> syn::Error {
        self.all.unwrap_or_else(|| {
            syn::Error::new(Span::call_site(), "internal error in #[megakernel]: checking failed without an error")
        })
    }
}

/// The candidate closest to `name` by edit distance, if close enough to be a likely typo.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|&(d, c)| d <= (name.len().max(c.len()) / 3).max(1))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Optimal-string-alignment distance: edits and adjacent transpositions cost 1.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// "cannot find X" with a suggestion.
pub fn unknown(span: Span, what: &str, name: &str, candidates: &[&str]) -> syn::Error {
    let mut msg = format!("cannot find {what} `{name}` in this megakernel");
    if let Some(s) = did_you_mean(name, candidates.iter().copied()) {
        msg.push_str(&format!("\nhelp: did you mean `{s}`?"));
    }
    syn::Error::new(span, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(did_you_mean("dynamc", ["static", "dynamic"]), Some("dynamic"));
        assert_eq!(did_you_mean("done", ["dome", "part"]), Some("dome"));
        assert_eq!(did_you_mean("xyz", ["static", "dynamic"]), None);
        assert_eq!(did_you_mean("rwo", ["row", "i"]), Some("row"));
    }
}
