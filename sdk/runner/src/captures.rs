//! Tensors an engine captured (`.npy`, `.npz`, `.safetensors` files), found
//! for a document's declarations: by name or checkpoint key, shape checked,
//! converted to the declared dtype. What `pack` and `generate --supply` read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use vips_data::capture::{self, CaptureError};
use vips_data::document::{TensorDecl, TensorSource};
use vips_data::golden::Seeded;
use vips_data::HostTensor;
use vsdk_catalog::DType;

/// Captured tensors by name (or checkpoint key), with the file each came from.
pub type Captures = BTreeMap<String, (HostTensor, PathBuf)>;

/// Reads the tensors `wanted` selects from every capture file; also returns
/// the names of the others, whose data is not read.
pub fn read_captures(
    paths: &[PathBuf],
    wanted: &dyn Fn(&str) -> bool,
) -> Result<(Captures, Vec<String>), CaptureError> {
    let mut found = Captures::new();
    let mut skipped = Vec::new();
    for path in paths {
        let c = capture::read_selected(path, wanted)?;
        for (name, t) in c.tensors {
            found.insert(name, (t, path.clone()));
        }
        skipped.extend(c.skipped);
    }
    Ok((found, skipped))
}

/// The captured value of `decl`: found under its name, or under its
/// checkpoint key for `weights` tensors; checked against the declared shape
/// and converted to the declared float type (float64 goldens are stored as
/// float32). Removes it from `found`.
pub fn supplied(
    decl: &TensorDecl,
    found: &mut Captures,
    paths: &[PathBuf],
) -> Result<HostTensor, String> {
    let (t, from) = captured(decl, found, paths)?;
    convert(decl, t, &from, Widening::Allowed)
}

/// The name a capture of `decl` goes by: its checkpoint key for `weights`
/// tensors, else its name.
pub fn capture_key(decl: &TensorDecl) -> &str {
    match &decl.source {
        TensorSource::Weights(key) => key.as_str(),
        _ => decl.name.as_str(),
    }
}

/// The capture of `decl` as found, with its file; its shape checked against
/// the declared one. Removes it from `found`.
pub fn captured(
    decl: &TensorDecl,
    found: &mut Captures,
    paths: &[PathBuf],
) -> Result<(HostTensor, PathBuf), String> {
    let key = capture_key(decl);
    let Some((t, from)) = found.remove(key) else {
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(format!(
            "`{key}` is not in the captures ({})",
            files.join(", ")
        ));
    };
    if let Some(shape) = &decl.shape {
        if *shape != t.spec.shape {
            return Err(format!(
                "`{key}` in {} has shape {:?}, the document declares {shape:?}",
                from.display(),
                t.spec.shape
            ));
        }
    }
    Ok((t, from))
}

/// Whether a float capture narrower than the declared type may be widened.
#[derive(Clone, Copy, PartialEq)]
pub enum Widening {
    /// `generate`'s inputs: widening is exact, and the reference computes
    /// from exactly those values.
    Allowed,
    /// `pack`: the values must have been computed at the declared precision.
    Refused,
}

/// Significand bits (with the implicit one) of a float dtype: what decides
/// whether a capture is narrower than the declared type.
pub fn significand_bits(d: DType) -> u32 {
    match d {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        DType::F64 => 53,
        _ => 0,
    }
}

/// `t`, captured for `decl` (from `from`), in the declared dtype: the same
/// dtype as is, a wider float rounded to nearest even; a narrower float
/// only where `widening` allows; anything else is an error.
pub fn convert(
    decl: &TensorDecl,
    t: HostTensor,
    from: &Path,
    widening: Widening,
) -> Result<HostTensor, String> {
    let key = capture_key(decl);
    match (t.spec.dtype, decl.dtype) {
        (a, b) if a == b => Ok(t),
        (a, b)
            if a.is_float()
                && b.is_float()
                && widening == Widening::Refused
                && significand_bits(a) < significand_bits(b) =>
        {
            Err(format!(
                "`{key}` in {} is {a}, narrower than the declared {b}: its values carry {a} rounding \
                 that {b} does not have; capture the reference's values in {b} or wider (float64 is \
                 rounded to {b})",
                from.display()
            ))
        }
        (a, b) if a.is_float() && b.is_float() => Ok(t.cast(b)),
        (a, b) => Err(format!(
            "`{key}` in {} is {a}, the document declares {b}",
            from.display()
        )),
    }
}

/// A captured copy of a seeded tensor must be the regenerated tensor: the
/// captured outputs were computed from it. Both are in the declared dtype.
pub fn check_seeded_copy(
    decl: &TensorDecl,
    s: &Seeded,
    captured: &HostTensor,
    from: &Path,
    regenerated: &HostTensor,
) -> Result<(), String> {
    let (a, b) = (captured.to_f64_vec(), regenerated.to_f64_vec());
    let mut worst: Option<(usize, f64)> = None;
    let mut differ = 0usize;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        if x == y || (x.is_nan() && y.is_nan()) {
            continue;
        }
        differ += 1;
        let d = (x - y).abs();
        let d = if d.is_nan() { f64::INFINITY } else { d };
        if worst.is_none_or(|(_, w)| d > w) {
            worst = Some((i, d));
        }
    }
    let Some((i, d)) = worst else {
        return Ok(());
    };
    Err(format!(
        "`{}` in {} differs from the document's seeded recipe (seed {}, {:?}): largest difference \
         {d:e} at flat index {i} (captured {}, regenerated {}), {differ} of {} elements differ. The \
         captured outputs were computed from other values than the document's: feed the reference \
         the regenerated tensor (docs/golden-format.md, tools/seeded_reference.py), or declare \
         `{}` with `source: golden`",
        decl.name,
        from.display(),
        s.seed,
        s.distribution,
        a[i],
        b[i],
        a.len(),
        decl.name
    ))
}
