//! What makes a sparse tensor's coordinates valid (docs/operators.md, "Sparse
//! voxel tensors"): every entry in `[0, 2^30)`, no voxel twice. One check for
//! every Rust provider, so their messages name the same row.

use crate::MAX_SPARSE_COORD;
use std::collections::HashMap;

/// One row of a coordinates tensor: (b, x, y, z).
pub type Voxel = [i32; 4];

/// Each voxel's row. The error names the first row out of range, else the
/// first row that repeats an earlier one.
pub fn index(voxels: &[Voxel]) -> Result<HashMap<Voxel, u32>, String> {
    if let Some((i, v)) = voxels
        .iter()
        .enumerate()
        .find(|(_, v)| v.iter().any(|&x| !(0..MAX_SPARSE_COORD).contains(&x)))
    {
        return Err(format!(
            "coords row {i} is {v:?}: every entry lies in [0, 2^30)"
        ));
    }
    let mut rows = HashMap::with_capacity(voxels.len());
    for (i, v) in voxels.iter().enumerate() {
        if let Some(first) = rows.insert(*v, i as u32) {
            return Err(format!(
                "coords rows {first} and {i} are the same voxel {v:?}"
            ));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_first_bad_row() {
        let ok = [[0, 1, 2, 3], [1, 1, 2, 3], [0, 1, 2, 4]];
        assert_eq!(index(&ok).unwrap()[&[1, 1, 2, 3]], 1);
        let mut twice = ok.to_vec();
        twice.push([0, 1, 2, 3]);
        twice.push([1, 1, 2, 3]);
        let e = index(&twice).unwrap_err();
        assert!(e.contains("rows 0 and 3"), "{e}");
        twice.push([0, MAX_SPARSE_COORD, 0, 0]);
        let e = index(&twice).unwrap_err();
        assert!(e.contains("coords row 5 "), "{e}");
    }
}
