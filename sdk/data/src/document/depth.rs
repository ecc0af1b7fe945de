//! A cheap pre-scan of a document's raw text that bounds its nesting before
//! the YAML parser sees it: the parser recurses once per level, and a 50 KB
//! line of `- - - …` or `[[[…` overflows its stack.
//!
//! The scan is conservative: it follows quoting, comments, block scalars and
//! flow collections as YAML does, and counts a block level for every
//! sequence entry (`- `, `? `) and every mapping key (`key:`) further right
//! than the enclosing level, plus one per open `[` or `{`. Where it cannot
//! tell (a continuation line of a plain scalar that looks like an entry) it
//! counts a level, so it may overestimate the depth, never underestimate it.

use super::Location;

/// Whether the scanner is inside a quoted scalar, and which quote.
#[derive(Clone, Copy, PartialEq)]
enum Quote {
    None,
    Double,
    Single,
}

struct Scan {
    limit: usize,
    /// Columns (0-based) of the open block collections, increasing.
    indents: Vec<usize>,
    /// Open flow collections.
    flow: usize,
    quote: Quote,
    /// Lines more indented than this are block scalar content (`|`, `>`);
    /// `Some(None)`: every line is (a block scalar at the top level).
    block_scalar: Option<Option<usize>>,
}

type Failure = (Location, String);

impl Scan {
    fn depth(&self) -> usize {
        self.indents.len() + self.flow
    }

    fn check(&self, line: usize, text: &str, at: usize) -> Result<(), Failure> {
        if self.depth() <= self.limit {
            return Ok(());
        }
        Err((
            Location {
                line,
                column: text[..at].chars().count() + 1,
            },
            format!(
                "the YAML nests deeper than {} levels here (the limit for a document; \
                 docs/vips-format.md, \"Input limits\")",
                self.limit
            ),
        ))
    }

    /// A block collection starting at `column`, if it is further right than
    /// the enclosing one.
    fn push_block(&mut self, column: usize) {
        if self.indents.last().is_none_or(|&top| column > top) {
            self.indents.push(column);
        }
    }

    fn line(&mut self, number: usize, text: &str) -> Result<(), Failure> {
        let b = text.as_bytes();
        let indent = b.iter().take_while(|&&c| c == b' ').count();
        let blank = b[indent..]
            .iter()
            .all(|c| matches!(c, b' ' | b'\t' | b'\r'));
        let marker = (text.starts_with("---") || text.starts_with("..."))
            && b.get(3)
                .is_none_or(|&c| c == b' ' || c == b'\t' || c == b'\r');
        if let Some(parent) = self.block_scalar {
            if blank || (!marker && parent.is_none_or(|p| indent > p)) {
                return Ok(());
            }
            self.block_scalar = None;
        }
        let mut i = 0;
        let mut at_start = true;
        if self.quote == Quote::None && self.flow == 0 {
            if blank || b[indent] == b'#' {
                return Ok(());
            }
            if marker {
                self.indents.clear();
                i = 3;
            } else {
                while self.indents.last().is_some_and(|&top| top > indent) {
                    self.indents.pop();
                }
                i = indent;
            }
        }
        // Column where the current scalar (a possible mapping key) started.
        let mut key_col = i;
        while i < b.len() {
            let c = b[i];
            let next_blank = b
                .get(i + 1)
                .is_none_or(|&n| matches!(n, b' ' | b'\t' | b'\r'));
            let after_blank = i == 0 || matches!(b[i - 1], b' ' | b'\t');
            match self.quote {
                Quote::Double => {
                    if c == b'\\' {
                        i += 1;
                    } else if c == b'"' {
                        self.quote = Quote::None;
                    }
                    i += 1;
                    continue;
                }
                Quote::Single => {
                    if c == b'\'' {
                        if b.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            self.quote = Quote::None;
                        }
                    }
                    i += 1;
                    continue;
                }
                Quote::None => {}
            }
            match c {
                b' ' | b'\t' | b'\r' => {}
                b'#' if after_blank => return Ok(()),
                b'[' | b'{' if at_start || self.flow > 0 => {
                    self.flow += 1;
                    self.check(number, text, i)?;
                    at_start = true;
                }
                b']' | b'}' if self.flow > 0 => {
                    self.flow -= 1;
                    at_start = false;
                }
                b',' if self.flow > 0 => at_start = true,
                b'"' | b'\'' if at_start => {
                    self.quote = if c == b'"' {
                        Quote::Double
                    } else {
                        Quote::Single
                    };
                    key_col = i;
                    at_start = false;
                }
                b'-' | b'?' if at_start && self.flow == 0 && next_blank => {
                    self.push_block(i);
                    self.check(number, text, i)?;
                }
                b':' if next_blank || self.flow > 0 => {
                    if self.flow == 0 && !at_start {
                        self.push_block(key_col);
                        self.check(number, text, key_col)?;
                    }
                    at_start = true;
                }
                b'|' | b'>' if at_start && self.flow == 0 => {
                    self.block_scalar = Some(self.indents.last().copied());
                    return Ok(());
                }
                // Anchors and tags precede the node they decorate.
                b'&' | b'!' if at_start => {
                    while i + 1 < b.len() && !matches!(b[i + 1], b' ' | b'\t') {
                        i += 1;
                    }
                }
                _ => {
                    if at_start {
                        key_col = i;
                    }
                    at_start = false;
                }
            }
            i += 1;
        }
        Ok(())
    }
}

/// Fails with the place where `text` first nests deeper than `limit`.
pub fn check(text: &str, limit: usize) -> Result<(), (Location, String)> {
    let mut scan = Scan {
        limit,
        indents: Vec::new(),
        flow: 0,
        quote: Quote::None,
        block_scalar: None,
    };
    for (n, line) in text.split('\n').enumerate() {
        scan.line(n + 1, line)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, limit: usize) -> bool {
        check(text, limit).is_ok()
    }

    #[test]
    fn counts_block_and_flow_levels() {
        assert!(depth_ok("a:\n  b:\n    c: [1, {d: 2}]\n", 5));
        assert!(!depth_ok("a:\n  b:\n    c: [1, {d: [3]}]\n", 5));
        assert!(!depth_ok(&"- ".repeat(10), 9));
        assert!(depth_ok(&"- ".repeat(10), 10));
        let staircase: String = (0..10)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert!(!depth_ok(&staircase, 9));
        assert!(depth_ok(&staircase, 10));
        let (loc, msg) = check("x: 1\ny: [[[[1]]]]\n", 3).unwrap_err();
        assert_eq!((loc.line, loc.column), (2, 6));
        assert!(msg.contains("deeper than 3 levels"), "{msg}");
    }

    #[test]
    fn text_is_not_structure() {
        // Brackets and dashes inside quotes, comments, block scalars and
        // plain scalars do not nest.
        let unbalanced = "- \"[[[[[[\"\n- '{{{{'' [[['\n- a [ b { c\n# [[[[[[[\n- x # [[[[[\n";
        assert!(depth_ok(&unbalanced.repeat(50), 2));
        let block = format!("notes: |\n  {}\n  [[[[[[\nnext: 1\n", "- ".repeat(100));
        assert!(depth_ok(&block, 2));
        let multi = "a: \"[[[\n  [[[ \\\" [[[\"\nb: 'x\n  ''[[['\n";
        assert!(depth_ok(multi, 1));
        // Flow collections spanning lines close where they close.
        assert!(depth_ok(&"a: [1,\n  2,\n  3]\n".repeat(100), 2));
    }

    #[test]
    fn anchors_and_tags_do_not_hide_nesting() {
        assert!(!depth_ok("a: &x [[[[1]]]]\n", 4));
        assert!(!depth_ok("a: !!seq [[[[1]]]]\n", 4));
    }
}
