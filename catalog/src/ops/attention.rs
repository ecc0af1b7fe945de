//! Attention: scaled dot-product attention, softmax(scale · q kᵀ + mask) v,
//! with an optional causal mask (its offset a KV cache's length) and grouped
//! key/value heads.

use super::{Check, Inferred};
use crate::{broadcast_shapes, Attrs, DType, Node, Op, TensorSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct Sdpa {
    pub scale: f64,
    /// Query `i` sees key `j` only where `j ≤ i + offset` (None: every key).
    pub causal_offset: Option<usize>,
    /// Query heads and key/value heads (axis `rank − 3`; both 1 at rank 2):
    /// query head `h` reads key/value head `h / (heads_q / heads_kv)`.
    pub heads: (usize, usize),
    /// A fourth input is added to the logits, broadcast to `[..., Lq, Lk]`.
    pub mask: bool,
}

impl Sdpa {
    /// The key/value batch index (the flattened leading axes) of query batch `b`.
    pub fn kv_batch(&self, b: usize) -> usize {
        let (hq, hkv) = self.heads;
        (b / hq) * hkv + (b % hq) / (hq / hkv)
    }

    /// Whether query row `i` attends to key `j`.
    pub fn sees(&self, i: usize, j: usize) -> bool {
        self.causal_offset.is_none_or(|off| j <= i + off)
    }
}

pub(super) fn sdpa(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let rank = q.shape.len();
    if rank < 2 || k.shape.len() != rank || v.shape.len() != rank {
        return c.fail(format!(
            "q, k, v must share a rank >= 2, got {:?}, {:?}, {:?}",
            q.shape, k.shape, v.shape
        ));
    }
    let b = rank - 2;
    let heads = if rank >= 3 {
        (q.shape[b - 1], k.shape[b - 1])
    } else {
        (1, 1)
    };
    let grouped = heads.1 > 0 && heads.0 % heads.1 == 0;
    let ok = q.shape[..b.saturating_sub(1)] == k.shape[..b.saturating_sub(1)]
        && k.shape[..b] == v.shape[..b]
        && grouped
        && q.shape[b + 1] == k.shape[b + 1]
        && k.shape[b] == v.shape[b]
        && k.shape[b] > 0;
    if !ok {
        return c.fail(format!(
            "expected q [..., Hq, Lq, D], k [..., Hkv, Lk, D], v [..., Hkv, Lk, Dv] with Lk > 0 and \
             Hkv dividing Hq (grouped key/value heads), got {:?}, {:?}, {:?}",
            q.shape, k.shape, v.shape
        ));
    }
    let (d, lk) = (q.shape[b + 1], k.shape[b]);
    let scale = attrs
        .float(c.kernel, "scale")?
        .unwrap_or(1.0 / (d.max(1) as f64).sqrt());
    if !scale.is_finite() {
        return c.attr("scale", format!("must be finite, got {scale}"));
    }
    let causal_offset = match attrs.int(c.kernel, "causal_offset")? {
        None => None,
        Some(o) if o >= 0 => Some(o as usize),
        Some(o) => {
            return c.attr(
                "causal_offset",
                format!("expected >= 0 (query 0 must see key 0), got {o}"),
            )
        }
    };
    let mut logits = q.shape.clone();
    logits[b + 1] = lk;
    if let Some(m) = inputs.get(3) {
        if m.shape.len() > rank || broadcast_shapes(&m.shape, &logits).as_deref() != Some(&logits) {
            return c.fail(format!(
                "the mask {:?} does not broadcast to the logits [..., Lq, Lk] = {logits:?}",
                m.shape
            ));
        }
    }
    let mut shape = q.shape.clone();
    shape[b + 1] = v.shape[b + 1];
    let node = Sdpa {
        scale,
        causal_offset,
        heads,
        mask: inputs.len() == 4,
    };
    Ok((Node::Sdpa(node), out(shape)))
}

/// Rotary position embedding of `x [..., L, D]` by tables `cos`, `sin`
/// `[L, R/2]` (the positions' angles, the KV cache's offset included): the
/// first `R` features turn in pairs, the rest pass through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotary {
    /// Pairs `(2i, 2i + 1)` (GPT-J) instead of `(i, i + R/2)` (GPT-NeoX, Llama).
    pub interleaved: bool,
    /// `R`, the features rotated.
    pub dims: usize,
}

impl Rotary {
    /// The two features of pair `i < R/2`.
    pub fn pair(&self, i: usize) -> (usize, usize) {
        if self.interleaved {
            (2 * i, 2 * i + 1)
        } else {
            (i, i + self.dims / 2)
        }
    }
}

pub(super) fn rotary(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let (x, cos, sin) = (&inputs[0], &inputs[1], &inputs[2]);
    let rank = x.shape.len();
    if rank < 2 || cos.shape.len() != 2 || sin.shape != cos.shape {
        return c.fail(format!(
            "expected x [..., L, D] and cos, sin [L, R/2], got {:?}, {:?}, {:?}",
            x.shape, cos.shape, sin.shape
        ));
    }
    let (l, d) = (x.shape[rank - 2], x.shape[rank - 1]);
    let half = cos.shape[1];
    if cos.shape[0] != l || half == 0 || 2 * half > d {
        return c.fail(format!(
            "the tables {:?} must have x's {l} rows and at most D/2 = {} columns (at least 1)",
            cos.shape,
            d / 2
        ));
    }
    let interleaved = c.flag(attrs, "interleaved", false)?;
    let node = Rotary {
        interleaved,
        dims: 2 * half,
    };
    Ok((
        Node::Rotary(node),
        vec![TensorSpec {
            dtype,
            shape: x.shape.clone(),
        }],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    fn infer(attrs: &Attrs, shapes: &[&[usize]]) -> Result<Sdpa, crate::CatalogError> {
        let specs: Vec<TensorSpec> = shapes.iter().map(|s| f32s(s)).collect();
        match Node::infer(Op::Sdpa, attrs, &specs)? {
            (Node::Sdpa(s), _) => Ok(s),
            (n, _) => panic!("{n:?}"),
        }
    }

    #[test]
    fn grouped_heads_map_query_heads_to_their_group() {
        // Llama-3-8B: 32 query heads over 8 key/value heads, groups of 4.
        let s = infer(
            &Attrs::new(),
            &[&[2, 32, 5, 128], &[2, 8, 9, 128], &[2, 8, 9, 128]],
        )
        .unwrap();
        assert_eq!(s.heads, (32, 8));
        assert_eq!(
            (0..8).map(|h| s.kv_batch(h)).collect::<Vec<_>>(),
            [0, 0, 0, 0, 1, 1, 1, 1]
        );
        assert_eq!(s.kv_batch(32 + 31), 8 + 7);
        assert!(infer(
            &Attrs::new(),
            &[&[1, 6, 5, 8], &[1, 4, 5, 8], &[1, 4, 5, 8]]
        )
        .is_err());
        // Batches still match exactly.
        assert!(infer(
            &Attrs::new(),
            &[&[2, 4, 5, 8], &[1, 2, 5, 8], &[1, 2, 5, 8]]
        )
        .is_err());
    }

    #[test]
    fn the_causal_offset_is_the_keys_already_cached() {
        let a = Attrs::new().with("causal_offset", AttrValue::Int(3));
        let s = infer(&a, &[&[4, 8], &[7, 8], &[7, 8]]).unwrap();
        // Query 0 (position 3 of 7) sees keys 0..=3; the last sees all 7.
        assert!(s.sees(0, 3) && !s.sees(0, 4) && s.sees(3, 6));
        let none = infer(&Attrs::new(), &[&[4, 8], &[7, 8], &[7, 8]]).unwrap();
        assert!(none.sees(0, 6));
        let bad = Attrs::new().with("causal_offset", AttrValue::Int(-1));
        assert!(infer(&bad, &[&[4, 8], &[7, 8], &[7, 8]]).is_err());
    }

    #[test]
    fn rotary_pairs_follow_the_layout_and_may_leave_features_unturned() {
        let x = f32s(&[1, 4, 6, 16]);
        let t = f32s(&[6, 4]);
        let (n, out) = Node::infer(
            Op::Rotary,
            &Attrs::new(),
            &[x.clone(), t.clone(), t.clone()],
        )
        .unwrap();
        assert_eq!(out[0], x);
        let Node::Rotary(r) = n else { panic!() };
        assert_eq!((r.dims, r.pair(0), r.pair(3)), (8, (0, 4), (3, 7)));
        let a = Attrs::new().with("interleaved", AttrValue::Int(1));
        let Node::Rotary(r) = Node::infer(Op::Rotary, &a, &[x.clone(), t.clone(), t.clone()])
            .unwrap()
            .0
        else {
            panic!()
        };
        assert_eq!((r.pair(0), r.pair(3)), ((0, 1), (6, 7)));
        for bad in [
            f32s(&[5, 4]),
            f32s(&[6, 9]),
            f32s(&[6, 0]),
            f32s(&[1, 6, 4]),
        ] {
            assert!(
                Node::infer(
                    Op::Rotary,
                    &Attrs::new(),
                    &[x.clone(), bad.clone(), bad.clone()]
                )
                .is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_mask_broadcasts_to_the_logits() {
        let q: &[usize] = &[2, 4, 5, 8];
        let kv: &[usize] = &[2, 4, 9, 8];
        for m in [&[5, 9][..], &[2, 1, 5, 9], &[1, 1, 1, 9], &[9]] {
            let s = infer(&Attrs::new(), &[q, kv, kv, m]).unwrap_or_else(|e| panic!("{m:?}: {e}"));
            assert!(s.mask);
        }
        for m in [&[5, 8][..], &[3, 1, 5, 9], &[1, 2, 4, 5, 9]] {
            assert!(infer(&Attrs::new(), &[q, kv, kv, m]).is_err(), "{m:?}");
        }
    }
}
