//! Sparse voxel tensors: submanifold convolution, down- and upsampling of
//! coordinates, and the row gathers and reductions between levels.

use super::{Check, Inferred};
use crate::CatalogError;
use crate::{Attrs, DType, Node, Op, TensorSpec};

/// Offsets of `vsdk.sparse_conv3d`'s 3x3x3 neighbourhood, in weight order:
/// `k = 9·(dx+1) + 3·(dy+1) + (dz+1)`.
pub const SPARSE_OFFSETS: [[i32; 3]; 27] = {
    let mut o = [[0; 3]; 27];
    let mut k = 0;
    while k < 27 {
        o[k] = [
            (k / 9) as i32 - 1,
            (k / 3 % 3) as i32 - 1,
            (k % 3) as i32 - 1,
        ];
        k += 1;
    }
    o
};

/// Coordinates of sparse voxels lie in `[0, 2^30)` (docs/operators.md):
/// `2c + 1` and `c ± 1` stay inside int32.
pub const MAX_SPARSE_COORD: i32 = 1 << 30;

pub(super) fn sparse_conv3d(
    _op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let n = sparse_voxels(c, x, &inputs[1])?;
    let w = &inputs[2];
    let cin = x.shape[1];
    if w.shape.len() != 3 || w.shape[0] != 27 || w.shape[1] != cin {
        return c.fail(format!(
            "w must be [27, Cin = {cin}, Cout], got {:?}",
            w.shape
        ));
    }
    let cout = w.shape[2];
    if let Some(b) = inputs.get(3) {
        if b.shape != [cout] {
            return c.fail(format!("b must be [Cout = {cout}], got {:?}", b.shape));
        }
    }
    Ok((Node::SparseConv3d, out(vec![n, cout])))
}

pub(super) fn sparse_downsample(
    op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let n = sparse_coords(c, x)?;
    let Some(m) = attrs.int(c.kernel, "voxels")? else {
        return c.attr("voxels", "is required (the number of distinct parents)");
    };
    if m < 0 || m as usize > n || (n > 0 && m == 0) {
        return c.attr("voxels", format!("{m} parents cannot come from {n} voxels"));
    }
    let voxels = m as usize;
    Ok(if op == Op::SparseDownsampleCoords {
        (
            Node::SparseDownsampleCoords { voxels },
            out(vec![voxels, 4]),
        )
    } else {
        (Node::SparseDownsampleIndex { voxels }, out(vec![n]))
    })
}

pub(super) fn segment_mean(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let index = &inputs[1];
    rows_and_index(c, x, index)?;
    let Some(m) = attrs.int(c.kernel, "segments")? else {
        return c.attr("segments", "is required (the number of output rows)");
    };
    let Ok(segments) = usize::try_from(m) else {
        return c.attr("segments", format!("must be >= 0, got {m}"));
    };
    if index.shape[0] != x.shape[0] {
        return c.fail(format!(
            "index must give one segment per row of x ({}), got {:?}",
            x.shape[0], index.shape
        ));
    }
    if segments == 0 && x.shape[0] > 0 {
        return c.attr("segments", "0 segments cannot hold any row");
    }
    Ok((
        Node::SegmentMean { segments },
        out(vec![segments, x.shape[1]]),
    ))
}

pub(super) fn gather_rows(
    _op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let index = &inputs[1];
    rows_and_index(c, x, index)?;
    if x.shape[0] == 0 && index.shape[0] > 0 {
        return c.fail("an index into an empty x");
    }
    Ok((Node::GatherRows, out(vec![index.shape[0], x.shape[1]])))
}

pub(super) fn repeat_rows(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    c.rank("x [N, C]", x, 2)?;
    let Some(t) = attrs.int(c.kernel, "times")? else {
        return c.attr("times", "is required");
    };
    let times = match usize::try_from(t) {
        Ok(t) if t >= 1 => t,
        _ => return c.attr("times", format!("must be >= 1, got {t}")),
    };
    let Some(rows) = x.shape[0].checked_mul(times) else {
        return c.fail(format!("{} rows x {times} overflows", x.shape[0]));
    };
    Ok((Node::RepeatRows { times }, out(vec![rows, x.shape[1]])))
}

pub(super) fn sparse_subdivide_coords(
    _op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let n = sparse_coords(c, x)?;
    let Some(children) = n.checked_mul(8) else {
        return c.fail(format!("{n} voxels have too many children"));
    };
    Ok((Node::SparseSubdivideCoords, out(vec![children, 4])))
}

/// A sparse tensor's two halves agree: feats [N, C] and coords [N, 4] int32.
fn sparse_voxels(
    c: &Check,
    feats: &TensorSpec,
    coords: &TensorSpec,
) -> Result<usize, CatalogError> {
    if feats.shape.len() != 2
        || coords.dtype != DType::I32
        || coords.shape.len() != 2
        || coords.shape[1] != 4
        || coords.shape[0] != feats.shape[0]
    {
        return c.fail(format!(
            "expected feats [N, C] and coords [N, 4] int32 (b, x, y, z), got {:?} and {} {:?}",
            feats.shape, coords.dtype, coords.shape
        ));
    }
    Ok(feats.shape[0])
}

/// Sparse coordinates alone: [N, 4] (the dtype, int32, is the kernel's).
fn sparse_coords(c: &Check, coords: &TensorSpec) -> Result<usize, CatalogError> {
    if coords.shape.len() != 2 || coords.shape[1] != 4 {
        return c.fail(format!(
            "expected coords [N, 4] int32 (b, x, y, z), got {:?}",
            coords.shape
        ));
    }
    Ok(coords.shape[0])
}

/// Rows to gather or reduce, and an int32 index of rank 1.
fn rows_and_index(c: &Check, x: &TensorSpec, index: &TensorSpec) -> Result<(), CatalogError> {
    if x.shape.len() != 2 || index.dtype != DType::I32 || index.shape.len() != 1 {
        return c.fail(format!(
            "expected x [rows, C] and index [N] int32, got {:?} and {} {:?}",
            x.shape, index.dtype, index.shape
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn spec(dtype: DType, shape: &[usize]) -> TensorSpec {
        TensorSpec::new(dtype, shape)
    }

    #[test]
    fn sparse_offsets_run_x_slowest_and_z_fastest() {
        assert_eq!(SPARSE_OFFSETS[0], [-1, -1, -1]);
        assert_eq!(SPARSE_OFFSETS[1], [-1, -1, 0]);
        assert_eq!(SPARSE_OFFSETS[3], [-1, 0, -1]);
        assert_eq!(SPARSE_OFFSETS[9], [0, -1, -1]);
        assert_eq!(SPARSE_OFFSETS[13], [0, 0, 0]);
        assert_eq!(SPARSE_OFFSETS[26], [1, 1, 1]);
    }

    #[test]
    fn sparse_conv3d_takes_feats_coords_and_a_27_offset_weight() {
        let (feats, coords) = (spec(DType::BF16, &[7, 8]), spec(DType::I32, &[7, 4]));
        let w = spec(DType::BF16, &[27, 8, 16]);
        let b = spec(DType::BF16, &[16]);
        let a = Attrs::new();
        let (node, out) = Node::infer(
            Op::SparseConv3d,
            &a,
            &[feats.clone(), coords.clone(), w.clone(), b],
        )
        .unwrap();
        assert_eq!(
            (node, out),
            (Node::SparseConv3d, vec![spec(DType::BF16, &[7, 16])])
        );
        let bad = [
            (
                vec![feats.clone(), spec(DType::I64, &[7, 4]), w.clone()],
                "coords [N, 4] int32",
            ),
            (
                vec![feats.clone(), spec(DType::I32, &[6, 4]), w.clone()],
                "coords [N, 4] int32",
            ),
            (
                vec![feats.clone(), spec(DType::I32, &[7, 3]), w.clone()],
                "coords [N, 4] int32",
            ),
            (
                vec![
                    feats.clone(),
                    coords.clone(),
                    spec(DType::BF16, &[8, 27, 16]),
                ],
                "w must be [27, Cin = 8, Cout]",
            ),
            (
                vec![
                    feats.clone(),
                    coords.clone(),
                    spec(DType::F32, &[27, 8, 16]),
                ],
                "inputs share one dtype",
            ),
            (
                vec![
                    feats.clone(),
                    coords.clone(),
                    w.clone(),
                    spec(DType::BF16, &[8]),
                ],
                "b must be [Cout = 16]",
            ),
            (
                vec![
                    spec(DType::I32, &[7, 8]),
                    coords.clone(),
                    spec(DType::I32, &[27, 8, 16]),
                ],
                "not defined for int32",
            ),
        ];
        for (inputs, want) in bad {
            let err = Node::infer(Op::SparseConv3d, &a, &inputs)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn sparse_downsample_kernels_need_their_parent_count() {
        let coords = [spec(DType::I32, &[10, 4])];
        let voxels = |m: i64| Attrs::new().with("voxels", AttrValue::Int(m));
        let (node, out) = Node::infer(Op::SparseDownsampleCoords, &voxels(4), &coords).unwrap();
        assert_eq!(
            (node, out),
            (
                Node::SparseDownsampleCoords { voxels: 4 },
                vec![spec(DType::I32, &[4, 4])]
            )
        );
        let (node, out) = Node::infer(Op::SparseDownsampleIndex, &voxels(4), &coords).unwrap();
        assert_eq!(
            (node, out),
            (
                Node::SparseDownsampleIndex { voxels: 4 },
                vec![spec(DType::I32, &[10])]
            )
        );
        for op in [Op::SparseDownsampleCoords, Op::SparseDownsampleIndex] {
            for (attrs, want) in [
                (Attrs::new(), "is required"),
                (voxels(11), "11 parents cannot come from 10 voxels"),
                (voxels(0), "0 parents"),
                (voxels(-1), "-1 parents"),
            ] {
                let err = Node::infer(op, &attrs, &coords).unwrap_err().to_string();
                assert!(err.contains(want), "{err}");
            }
            let err = Node::infer(op, &voxels(1), &[spec(DType::F32, &[10, 4])]).unwrap_err();
            assert!(err.to_string().contains("not defined for float32"), "{err}");
            let err = Node::infer(op, &voxels(1), &[spec(DType::I32, &[10, 3])]).unwrap_err();
            assert!(err.to_string().contains("coords [N, 4]"), "{err}");
            assert!(Node::infer(op, &voxels(0), &[spec(DType::I32, &[0, 4])]).is_ok());
        }
        let (_, out) = Node::infer(Op::SparseSubdivideCoords, &Attrs::new(), &coords).unwrap();
        assert_eq!(out, vec![spec(DType::I32, &[80, 4])]);
    }

    #[test]
    fn segment_mean_gather_and_repeat_take_rows() {
        let a = Attrs::new();
        let segments = |m: i64| Attrs::new().with("segments", AttrValue::Int(m));
        let (node, out) = Node::infer(
            Op::SegmentMean,
            &segments(3),
            &[spec(DType::BF16, &[9, 5]), spec(DType::I32, &[9])],
        )
        .unwrap();
        assert_eq!(
            (node, out),
            (
                Node::SegmentMean { segments: 3 },
                vec![spec(DType::BF16, &[3, 5])]
            )
        );
        for (attrs, ins, want) in [
            (
                segments(3),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[8])],
                "one segment per row",
            ),
            (
                segments(0),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[9])],
                "0 segments",
            ),
            (
                segments(-2),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[9])],
                "must be >= 0",
            ),
            (
                a.clone(),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[9])],
                "is required",
            ),
            (
                segments(3),
                [spec(DType::I32, &[9, 5]), spec(DType::I32, &[9])],
                "not defined for int32",
            ),
            (
                segments(3),
                [spec(DType::F32, &[9, 5]), spec(DType::I64, &[9])],
                "index [N] int32",
            ),
        ] {
            let err = Node::infer(Op::SegmentMean, &attrs, &ins)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
        let times = |t: i64| Attrs::new().with("times", AttrValue::Int(t));
        for dtype in DType::ALL {
            let (_, out) = Node::infer(
                Op::GatherRows,
                &a,
                &[spec(dtype, &[5, 3]), spec(DType::I32, &[9])],
            )
            .unwrap();
            assert_eq!(out, vec![spec(dtype, &[9, 3])]);
            let (node, out) =
                Node::infer(Op::RepeatRows, &times(8), &[spec(dtype, &[5, 3])]).unwrap();
            assert_eq!(
                (node, out),
                (Node::RepeatRows { times: 8 }, vec![spec(dtype, &[40, 3])])
            );
        }
        assert!(Op::GatherRows.moves_data() && Op::RepeatRows.moves_data());
        for t in [0, -1] {
            let err =
                Node::infer(Op::RepeatRows, &times(t), &[spec(DType::F32, &[5, 3])]).unwrap_err();
            assert!(err.to_string().contains("must be >= 1"), "{err}");
        }
        let err = Node::infer(
            Op::GatherRows,
            &a,
            &[spec(DType::F32, &[0, 3]), spec(DType::I32, &[2])],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("empty"), "{err}");
    }
}
