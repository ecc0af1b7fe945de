//! The `.npy` header, parsed and bounded here before the bytes reach `npyz`
//! (whose Python-literal parser takes exponential time in unclosed brackets,
//! and which allocates whatever header length the file declares).
//!
//! Format (NumPy's `numpy.lib.format`): the magic `\x93NUMPY`, a version
//! byte pair (1.0: a 2-byte header length; 2.0 and 3.0: 4 bytes), the
//! header length (little-endian), then the header: a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded
//! with spaces and a newline.

use crate::limits::{MAX_NPY_HEADER_BYTES, MAX_NPY_HEADER_NESTING, MAX_TENSOR_BYTES};
use std::io::Read;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A validated header.
#[derive(Debug)]
pub struct NpyHeader {
    /// Every byte from the magic to the end of the header, as read.
    pub raw: Vec<u8>,
    /// Bytes of data the header declares: product(shape) × element size.
    pub data_bytes: u64,
}

/// Reads and checks the header from `r`, which holds `available` bytes in
/// all (the file, or the archive member). Reads at most the header.
pub fn read(r: &mut impl Read, available: u64) -> Result<NpyHeader, String> {
    let mut raw = vec![0u8; 8];
    if available < 8 {
        return Err(format!(
            "not a .npy file: {available} bytes, too short for the magic and version"
        ));
    }
    r.read_exact(&mut raw)
        .map_err(|e| format!("not a .npy file: {e}"))?;
    if &raw[..6] != MAGIC {
        return Err("not a .npy file: it does not start with the magic \\x93NUMPY".into());
    }
    let len_bytes = match (raw[6], raw[7]) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        (major, minor) => {
            return Err(format!(
                "not a .npy file: format version {major}.{minor} (1.0, 2.0 and 3.0 exist)"
            ))
        }
    };
    let mut len = [0u8; 4];
    r.read_exact(&mut len[..len_bytes])
        .map_err(|e| format!("not a .npy file: header length: {e}"))?;
    raw.extend_from_slice(&len[..len_bytes]);
    let header_len = u64::from(u32::from_le_bytes(len));
    let header_start = 8 + len_bytes as u64;
    if header_len > MAX_NPY_HEADER_BYTES {
        return Err(format!(
            "not a .npy file: the header declares {header_len} bytes, above the \
             {MAX_NPY_HEADER_BYTES}-byte limit for a .npy header"
        ));
    }
    if header_start + header_len > available {
        return Err(format!(
            "not a .npy file: the header declares {header_len} bytes from byte {header_start}, \
             past the end ({available} bytes)"
        ));
    }
    let mut text = vec![0u8; header_len as usize];
    r.read_exact(&mut text)
        .map_err(|e| format!("not a .npy file: header: {e}"))?;
    raw.extend_from_slice(&text);
    let text = std::str::from_utf8(&text)
        .map_err(|e| format!("not a .npy file: the header is not text ({e})"))?;
    let (descr, fortran, shape) = parse_dict(text).map_err(|e| format!("bad .npy header: {e}"))?;
    if fortran {
        return Err("Fortran-order arrays are not supported: save np.ascontiguousarray(a)".into());
    }
    let size = element_size(&descr)?;
    let numel = if shape.contains(&0) {
        Some(0)
    } else {
        shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    };
    let data_bytes = numel
        .and_then(|n| n.checked_mul(size))
        .filter(|&b| b <= MAX_TENSOR_BYTES)
        .ok_or_else(|| {
            format!(
                "shape {shape:?} of `{descr}` is larger than the {MAX_TENSOR_BYTES}-byte tensor limit"
            )
        })?;
    let after = available - header_start - header_len;
    if data_bytes > after {
        return Err(format!(
            "truncated: shape {shape:?} of `{descr}` needs {data_bytes} bytes of data, \
             {after} follow the header"
        ));
    }
    Ok(NpyHeader { raw, data_bytes })
}

/// The element size of a plain type string the catalog has a dtype for.
fn element_size(descr: &str) -> Result<u64, String> {
    let t = descr.trim_start_matches(['<', '>', '|', '=']);
    match t {
        "f2" => Ok(2),
        "f4" => Ok(4),
        "f8" => Ok(8),
        "u1" => Ok(1),
        "i4" => Ok(4),
        "i8" => Ok(8),
        _ => Err(format!("dtype `{descr}` is not in catalog v1")),
    }
}

/// A Python literal, as far as a header needs.
#[derive(Debug)]
enum Value {
    Str(String),
    Int(Option<u64>),
    Bool(bool),
    None,
    Seq(Vec<Value>),
    Dict(Vec<(Value, Value)>),
}

struct Parser<'a> {
    b: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.b.get(self.at).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        if self.b.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {} of the header", self.at))
    }

    /// Items up to `close`, separated by commas (a trailing comma allowed).
    fn items(&mut self, close: u8, depth: usize, pairs: bool) -> Result<Value, String> {
        let (mut seq, mut dict) = (Vec::new(), Vec::new());
        loop {
            if self.eat(close) {
                break;
            }
            let v = self.value(depth + 1)?;
            if pairs {
                if !self.eat(b':') {
                    return self.fail("expected `:`");
                }
                dict.push((v, self.value(depth + 1)?));
            } else {
                seq.push(v);
            }
            if !self.eat(b',') {
                if self.eat(close) {
                    break;
                }
                return self.fail("expected `,` or a closing bracket");
            }
        }
        Ok(if pairs {
            Value::Dict(dict)
        } else {
            Value::Seq(seq)
        })
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_NPY_HEADER_NESTING {
            return self.fail(&format!(
                "brackets nest deeper than {MAX_NPY_HEADER_NESTING} levels (the limit for a .npy header)"
            ));
        }
        self.skip_space();
        let Some(&c) = self.b.get(self.at) else {
            return self.fail("unexpected end");
        };
        match c {
            b'{' => {
                self.at += 1;
                self.items(b'}', depth, true)
            }
            b'(' => {
                self.at += 1;
                self.items(b')', depth, false)
            }
            b'[' => {
                self.at += 1;
                self.items(b']', depth, false)
            }
            b'\'' | b'"' => {
                let start = self.at + 1;
                let Some(len) = self.b[start..].iter().position(|&x| x == c) else {
                    return self.fail("unterminated string");
                };
                self.at = start + len + 1;
                let s = &self.b[start..start + len];
                if s.contains(&b'\\') {
                    return self.fail("escapes in strings are not supported");
                }
                Ok(Value::Str(String::from_utf8_lossy(s).into_owned()))
            }
            b'0'..=b'9' => {
                let start = self.at;
                while self.b.get(self.at).is_some_and(u8::is_ascii_digit) {
                    self.at += 1;
                }
                let digits = std::str::from_utf8(&self.b[start..self.at]).unwrap_or_default();
                // Python 2 wrote long integers with an `L`.
                if self.b.get(self.at) == Some(&b'L') {
                    self.at += 1;
                }
                Ok(Value::Int(digits.parse().ok()))
            }
            b'-' => self.fail("negative number"),
            _ => {
                for (word, v) in [
                    ("True", Value::Bool(true)),
                    ("False", Value::Bool(false)),
                    ("None", Value::None),
                ] {
                    if self.b[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(v);
                    }
                }
                self.fail("unexpected character")
            }
        }
    }
}

/// (descr, fortran_order, shape) of the header dict.
fn parse_dict(text: &str) -> Result<(String, bool, Vec<u64>), String> {
    let mut p = Parser {
        b: text.as_bytes(),
        at: 0,
    };
    let Value::Dict(entries) = p.value(1)? else {
        return Err("the header is not a dict".into());
    };
    p.skip_space();
    if p.at != p.b.len() {
        return p.fail("unexpected text after the dict");
    }
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    for (k, v) in entries {
        let Value::Str(k) = k else {
            return Err("a key of the header dict is not a string".into());
        };
        match (k.as_str(), v) {
            ("descr", Value::Str(s)) => descr = Some(s),
            ("descr", other) => {
                return Err(format!(
                "dtype {other:?} is not a plain numeric type (structured arrays are not supported)"
            ))
            }
            ("fortran_order", Value::Bool(b)) => fortran = Some(b),
            ("shape", Value::Seq(dims)) => {
                let dims = dims
                    .into_iter()
                    .map(|d| match d {
                        Value::Int(Some(n)) => Ok(n),
                        Value::Int(None) => Err("a dimension of `shape` exceeds 2^64".to_string()),
                        other => Err(format!("a dimension of `shape` is {other:?}")),
                    })
                    .collect::<Result<Vec<u64>, String>>()?;
                shape = Some(dims);
            }
            (key, v) => return Err(format!("unexpected entry `{key}`: {v:?}")),
        }
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => Err("the header lacks `descr`, `fortran_order` or `shape`".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: usize) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b.resize(b.len() + data, 0);
        b
    }

    fn parse(bytes: &[u8]) -> Result<NpyHeader, String> {
        read(&mut &bytes[..], bytes.len() as u64)
    }

    #[test]
    fn reads_what_numpy_writes() {
        let h = parse(&npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n",
            24,
        ))
        .unwrap();
        assert_eq!(h.data_bytes, 24);
        assert_eq!(h.raw.len(), 10 + 70);
        let scalar = parse(&npy(
            "{'descr': '|u1', 'fortran_order': False, 'shape': (), }\n",
            1,
        ))
        .unwrap();
        assert_eq!(scalar.data_bytes, 1);
        let one = parse(&npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }\n",
            40,
        ))
        .unwrap();
        assert_eq!(one.data_bytes, 40);
    }

    #[test]
    fn refuses_hostile_headers() {
        let deep = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': {}",
            "[".repeat(22)
        );
        assert!(parse(&npy(&deep, 0)).unwrap_err().contains("nest deeper"));
        let mut long = npy("{}", 0);
        long[6] = 2;
        long.truncate(8);
        long.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse(&long)
            .unwrap_err()
            .contains("above the 65536-byte limit"));
        let past = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            0,
        );
        let e = read(&mut &past[..], 20).unwrap_err();
        assert!(e.contains("past the end"), "{e}");
        let huge = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            0,
        );
        assert!(parse(&huge).unwrap_err().contains("tensor limit"));
        let wraps = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (36893488147419103232,), }",
            0,
        );
        assert!(parse(&wraps).unwrap_err().contains("exceeds 2^64"));
        let short = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
            11,
        );
        assert!(parse(&short).unwrap_err().contains("truncated"));
    }
}
