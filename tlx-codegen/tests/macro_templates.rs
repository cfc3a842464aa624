//! A small `macro_rules!` expander for the kernel finder of `examples_ptx`:
//! kernels a template macro instantiates (one per element type, as the GEMM
//! bench and `tlx::ops` write them) are found by expanding each invocation.
//! It takes one-rule macros whose matcher is literal tokens, groups,
//! `$x:ident`, `$x:tt` and `$($x:tt)*` (the rest of its group), which is
//! how the workspace writes them; other macros are not expanded (and their
//! kernels not found).

use proc_macro2::{Delimiter, Group, TokenStream, TokenTree};

/// A one-rule `macro_rules!`: its matcher and its body.
pub struct Template {
    matcher: Vec<TokenTree>,
    body: TokenStream,
}

/// What a matcher variable took from an invocation.
enum Binding {
    One(TokenTree),
    Rest(Vec<TokenTree>),
}

impl Template {
    /// The template `macro_rules! name { (matcher) => { body }; }` declares,
    /// or `None` for any other form (several rules, say).
    pub fn parse(tokens: TokenStream) -> Option<Template> {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let [TokenTree::Group(matcher), TokenTree::Punct(eq), TokenTree::Punct(gt), TokenTree::Group(body), rest @ ..] =
            trees.as_slice()
        else {
            return None;
        };
        let only_semicolons = rest
            .iter()
            .all(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ';'));
        (eq.as_char() == '=' && gt.as_char() == '>' && only_semicolons).then(|| Template {
            matcher: matcher.stream().into_iter().collect(),
            body: body.stream(),
        })
    }

    /// The body with the invocation's tokens in place of the variables, or
    /// `None` where the invocation does not match.
    pub fn expand(&self, input: TokenStream) -> Option<TokenStream> {
        let input: Vec<TokenTree> = input.into_iter().collect();
        let mut bindings = Vec::new();
        match_trees(&self.matcher, &input, &mut bindings)?;
        Some(substitute(self.body.clone(), &bindings))
    }
}

fn match_trees(
    matcher: &[TokenTree],
    input: &[TokenTree],
    bindings: &mut Vec<(String, Binding)>,
) -> Option<()> {
    let (mut m, mut i) = (0, 0);
    while m < matcher.len() {
        match (&matcher[m], matcher.get(m + 1)) {
            (TokenTree::Punct(dollar), Some(TokenTree::Ident(name))) if dollar.as_char() == '$' => {
                let kind = match (matcher.get(m + 2), matcher.get(m + 3)) {
                    (Some(TokenTree::Punct(colon)), Some(TokenTree::Ident(kind)))
                        if colon.as_char() == ':' =>
                    {
                        kind.to_string()
                    }
                    _ => return None,
                };
                let tree = input.get(i)?;
                match kind.as_str() {
                    "ident" if matches!(tree, TokenTree::Ident(_)) => {}
                    "tt" => {}
                    _ => return None,
                }
                bindings.push((name.to_string(), Binding::One(tree.clone())));
                (m, i) = (m + 4, i + 1);
            }
            (TokenTree::Punct(dollar), Some(TokenTree::Group(repeated)))
                if dollar.as_char() == '$' =>
            {
                // `$($x:tt)*`, last in its group: the rest of the input.
                let inner: Vec<TokenTree> = repeated.stream().into_iter().collect();
                let star = matcher.get(m + 2);
                let (
                    [TokenTree::Punct(d), TokenTree::Ident(name), TokenTree::Punct(colon), TokenTree::Ident(kind)],
                    Some(TokenTree::Punct(star)),
                ) = (inner.as_slice(), star)
                else {
                    return None;
                };
                let well_formed = d.as_char() == '$'
                    && colon.as_char() == ':'
                    && kind == "tt"
                    && star.as_char() == '*'
                    && m + 3 == matcher.len();
                if !well_formed {
                    return None;
                }
                bindings.push((name.to_string(), Binding::Rest(input[i..].to_vec())));
                return Some(());
            }
            (TokenTree::Group(group), _) => {
                let TokenTree::Group(given) = input.get(i)? else {
                    return None;
                };
                if group.delimiter() != given.delimiter() {
                    return None;
                }
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                let given: Vec<TokenTree> = given.stream().into_iter().collect();
                match_trees(&inner, &given, bindings)?;
                (m, i) = (m + 1, i + 1);
            }
            (literal, _) => {
                if input.get(i)?.to_string() != literal.to_string() {
                    return None;
                }
                (m, i) = (m + 1, i + 1);
            }
        }
    }
    (i == input.len()).then_some(())
}

/// `body` with `$x` replaced by what `x` took and `$($x)*` by all of it.
fn substitute(body: TokenStream, bindings: &[(String, Binding)]) -> TokenStream {
    let lookup =
        |name: &proc_macro2::Ident| bindings.iter().find(|(n, _)| name == n).map(|(_, b)| b);
    let trees: Vec<TokenTree> = body.into_iter().collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < trees.len() {
        match (&trees[k], trees.get(k + 1)) {
            (TokenTree::Punct(dollar), Some(TokenTree::Ident(name))) if dollar.as_char() == '$' => {
                if let Some(Binding::One(tree)) = lookup(name) {
                    out.push(tree.clone());
                    k += 2;
                    continue;
                }
            }
            (TokenTree::Punct(dollar), Some(TokenTree::Group(repeated)))
                if dollar.as_char() == '$' && repeated.delimiter() == Delimiter::Parenthesis =>
            {
                let inner: Vec<TokenTree> = repeated.stream().into_iter().collect();
                if let [TokenTree::Punct(d), TokenTree::Ident(name)] = inner.as_slice() {
                    if let (true, Some(Binding::Rest(all))) = (d.as_char() == '$', lookup(name)) {
                        out.extend(all.iter().cloned());
                        k += 3; // `$`, the group, `*`
                        continue;
                    }
                }
            }
            (TokenTree::Group(group), _) => {
                let mut copy = Group::new(group.delimiter(), substitute(group.stream(), bindings));
                copy.set_span(group.span());
                out.push(TokenTree::Group(copy));
                k += 1;
                continue;
            }
            _ => {}
        }
        out.push(trees[k].clone());
        k += 1;
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::Template;
    use proc_macro2::TokenStream;

    fn template(source: &str) -> Template {
        let tokens: TokenStream = source.parse().expect("tokens");
        Template::parse(tokens).expect("a one-rule template")
    }

    #[test]
    fn identifiers_groups_and_the_rest_of_a_group() {
        let t = template(
            "(fn $name:ident<$t:ident>, at = $at:tt, params = ($($extra:tt)*),) => \
             { fn $name(x: Ptr<$t>, $($extra)*) { f($at); } };",
        );
        let out = t
            .expand(
                "fn k<bf16>, at = [g * n, k0], params = (s: Ptr<f32>, y: i32,),"
                    .parse()
                    .expect("input"),
            )
            .expect("matches");
        let spaceless: String = out.to_string().split_whitespace().collect();
        assert_eq!(
            spaceless,
            "fnk(x:Ptr<bf16>,s:Ptr<f32>,y:i32,){f([g*n,k0]);}"
        );
    }

    #[test]
    fn a_mismatch_expands_nothing() {
        let t = template("($a:ident, $b:ident) => { $a $b };");
        assert!(t.expand("x, y".parse().expect("input")).is_some());
        assert!(t.expand("x; y".parse().expect("input")).is_none());
        assert!(t.expand("x, [y]".parse().expect("input")).is_none());
        assert!(template("($($x:tt)* ; $y:ident) => {};")
            .expand("a ; b".parse().expect("input"))
            .is_none());
    }
}
