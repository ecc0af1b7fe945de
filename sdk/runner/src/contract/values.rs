//! Values and views for the contract's cases: seeded normals, the special
//! values of each float dtype, and the layouts engines hand kernels.

use vips_data::HostTensor;
use vips_execution::execution::{Layout, SplitMix};
use vsdk_catalog::DType;

pub struct Rng(SplitMix);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix(seed))
    }

    pub fn unit(&mut self) -> f64 {
        self.0.unit()
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(f64::MIN_POSITIVE);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }

    /// `n` normals times `scale`.
    pub fn normals(&mut self, n: usize, scale: f64) -> Vec<f64> {
        (0..n).map(|_| scale * self.normal()).collect()
    }
}

/// A float dtype's largest finite value, smallest normal and smallest
/// subnormal.
pub fn limits(d: DType) -> (f64, f64, f64) {
    match d {
        DType::F16 => (65504.0, 2f64.powi(-14), 2f64.powi(-24)),
        DType::BF16 => (3.389_531_389_251_535_5e38, 2f64.powi(-126), 2f64.powi(-133)),
        DType::F64 => (f64::MAX, f64::MIN_POSITIVE, 5e-324),
        _ => (f64::from(f32::MAX), 2f64.powi(-126), 2f64.powi(-149)),
    }
}

/// The values no model's data holds and every kernel meets: ±0, ±Inf, NaN,
/// subnormals, the smallest normal, large finite values.
pub fn specials(d: DType) -> Vec<f64> {
    let (max, tiny, sub) = limits(d);
    vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        sub,
        -3.0 * sub,
        tiny,
        -tiny,
        max / 4.0,
        -max / 4.0,
        1.0,
        -0.5,
    ]
}

/// `shape`'s tensor in `dtype` from float64 values (rounded to nearest even,
/// saturated for integers).
pub fn tensor(shape: &[usize], values: Vec<f64>, dtype: DType) -> HostTensor {
    HostTensor::from_vec(shape, values)
        .expect("as many values as the shape holds")
        .cast(dtype)
}

fn compact(shape: &[usize]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1] as u64;
    }
    strides
}

/// The last two axes stored the other way round (a transposed matrix, the
/// `[K, N]` weight an engine passes as `wᵀ`); rank 1: every other element.
pub fn transposed(shape: &[usize]) -> Layout {
    let r = shape.len();
    if r < 2 {
        return Layout {
            strides: vec![2; r],
            offset: 0,
        };
    }
    let mut stored = shape.to_vec();
    stored.swap(r - 2, r - 1);
    let mut strides = compact(&stored);
    strides.swap(r - 2, r - 1);
    Layout { strides, offset: 0 }
}

/// Rows padded by `pad` elements (a pitched image, a slice of a wider
/// matrix), starting `offset` elements into the buffer.
pub fn padded(shape: &[usize], pad: u64, offset: u64) -> Layout {
    let r = shape.len();
    let mut strides = vec![1u64; r];
    for i in (0..r.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1] as u64 + if i == r - 2 { pad } else { 0 };
    }
    if r == 1 {
        strides[0] = 1 + pad;
    }
    Layout { strides, offset }
}

/// Axis `axis` repeated with stride 0 (an expanded tensor, heads sharing
/// keys and values).
pub fn broadcast(shape: &[usize], axis: usize) -> Layout {
    let mut one = shape.to_vec();
    one[axis] = 1;
    let mut strides = compact(&one);
    strides[axis] = 0;
    Layout { strides, offset: 0 }
}

/// Makes `values` what the view shows: elements that share a position (a
/// stride-0 axis) take the first one's value.
pub fn through(layout: &Layout, shape: &[usize], values: Vec<f64>) -> Vec<f64> {
    let mut seen = std::collections::HashMap::new();
    layout
        .positions(shape)
        .into_iter()
        .zip(values)
        .map(|(p, v)| *seen.entry(p).or_insert(v))
        .collect()
}
