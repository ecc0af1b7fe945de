//! The formulas of the normative pages are well formed: in every inline code
//! span, brackets balance. A half-open interval `[a, b)` counts as a pair.

/// The inline code spans of `text` (outside fenced blocks; a span may wrap
/// onto the next line) whose brackets do not balance, as `line: span`.
fn unbalanced(text: &str) -> Vec<String> {
    // Fenced blocks are blanked, keeping their lines for the numbering.
    let mut fenced = false;
    let prose: Vec<&str> = text
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                ""
            } else if fenced {
                ""
            } else {
                line
            }
        })
        .collect();
    let prose = prose.join("\n");
    let mut bad = Vec::new();
    let mut at = 0;
    for (k, piece) in prose.split('`').enumerate() {
        let line = prose[..at].matches('\n').count() + 1;
        at += piece.len() + 1;
        // Odd-numbered pieces between backticks are code spans.
        if k % 2 == 0 {
            continue;
        }
        let mut open = Vec::new();
        let mut ok = true;
        for ch in piece.chars() {
            match ch {
                '(' | '[' => open.push(ch),
                ')' => ok &= matches!(open.pop(), Some('(' | '[')),
                ']' => ok &= open.pop() == Some('['),
                _ => {}
            }
        }
        if !ok || !open.is_empty() {
            bad.push(format!("{line}: `{}`", piece.replace('\n', " ")));
        }
    }
    bad
}

#[test]
fn formulas_in_the_normative_pages_have_balanced_brackets() {
    let mut bad = Vec::new();
    for page in ["operators.md", "golden-format.md"] {
        let path = format!("{}/../docs/{page}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        bad.extend(
            unbalanced(&text)
                .into_iter()
                .map(|b| format!("docs/{page}:{b}")),
        );
    }
    assert!(bad.is_empty(), "unbalanced brackets:\n{}", bad.join("\n"));
}

#[test]
fn the_check_catches_a_missing_parenthesis() {
    // The cubic kernel as docs/operators.md once wrote it, one `(` short.
    let text = "`K(t) = ((|t| − 5)|t| + 8)|t| − 4)·a` for `1 ≤ |t| < 2`, `i ∈ [0, in)`";
    assert_eq!(
        unbalanced(text),
        ["1: `K(t) = ((|t| − 5)|t| + 8)|t| − 4)·a`"]
    );
    let fixed = "`K(t) = (((|t| − 5)|t| + 8)|t| − 4)·a` for `1 ≤ |t| < 2`, `i ∈ [0, in)`";
    assert!(unbalanced(fixed).is_empty());
}
