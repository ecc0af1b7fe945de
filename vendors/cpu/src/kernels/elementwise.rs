use super::Real;
use ndarray::{ArrayViewD, ArrayViewMutD, Zip};
use rayon::prelude::*;

/// `out = f(a, b)` with NumPy broadcasting (the catalog checked the shapes).
pub fn binary<T: Real>(
    a: &ArrayViewD<T>,
    b: &ArrayViewD<T>,
    mut out: ArrayViewMutD<T>,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    if let (Some(x), Some(y)) = (repeated(a, out.shape()), repeated(b, out.shape())) {
        if let Some(o) = out.as_slice_mut() {
            // Both repeat whole; the smaller one's period divides the larger's.
            let (q, p) = (x.len().min(y.len()), x.len().max(y.len()));
            if q >= MIN_ROW && p % q == 0 && o.len() % p == 0 {
                // Tasks of about CHUNK elements; within a task, pieces that
                // stay inside one period of the shorter operand, where both
                // operands are contiguous.
                let task = if q >= CHUNK { CHUNK } else { CHUNK / q * q };
                o.par_chunks_mut(task).enumerate().for_each(|(t, o)| {
                    let mut done = 0;
                    while done < o.len() {
                        let i = t * task + done;
                        let len = (q - i % q).min(o.len() - done);
                        let (xs, ys) = (i % x.len(), i % y.len());
                        let pieces = o[done..done + len]
                            .iter_mut()
                            .zip(&x[xs..xs + len])
                            .zip(&y[ys..ys + len]);
                        for ((o, &x), &y) in pieces {
                            *o = f(x, y);
                        }
                        done += len;
                    }
                });
                return;
            }
        }
    }
    Zip::from(&mut out)
        .and_broadcast(a)
        .and_broadcast(b)
        .par_for_each(|o, &x, &y| *o = f(x, y));
}

/// Rows shorter than this take the general path.
const MIN_ROW: usize = 64;

/// `t`'s values when broadcasting to `out` repeats them whole: `t` is in
/// standard layout and its shape, without leading 1s, ends `out`'s.
pub(super) fn repeated<'a, T>(t: &'a ArrayViewD<T>, out: &[usize]) -> Option<&'a [T]> {
    let shape = t.shape();
    let lead = shape.iter().take_while(|&&d| d == 1).count();
    out.ends_with(&shape[lead..])
        .then(|| t.as_slice())
        .flatten()
}

/// Exact GELU: x/2 * (1 + erf(x / sqrt 2)), in parallel chunks.
pub fn gelu<T: Real>(x: &ArrayViewD<T>, mut out: ArrayViewMutD<T>) {
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let out = out.as_slice_mut().expect("outputs are compact");
    out.par_chunks_mut(CHUNK)
        .zip(xs.par_chunks(CHUNK))
        .for_each(|(o, x)| T::gelu(x, o));
}

/// The element-wise functions of one input besides GELU (docs/operators.md,
/// "Element-wise functions of one input").
pub use vsdk_catalog::Unary;

/// `f` of every element, in parallel chunks.
pub fn unary<T: Real>(f: Unary, x: &ArrayViewD<T>, mut out: ArrayViewMutD<T>) {
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let out = out.as_slice_mut().expect("outputs are compact");
    out.par_chunks_mut(CHUNK)
        .zip(xs.par_chunks(CHUNK))
        .for_each(|(o, x)| T::unary(f, x, o));
}

/// √(2/π), the tanh approximation's scale.
pub const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// `x / (1 + exp(−y))`, computed so that `exp` never overflows: for `y < 0`
/// it is `x·e / (1 + e)` with `e = exp(y)`. SiLU is `y = x`, the tanh GELU
/// `y = 2a` (`x/2·(1 + tanh(a)) = x·σ(2a)`, without `1 + tanh`'s cancellation).
pub fn times_sigmoid_f64(x: f64, y: f64) -> f64 {
    if y >= 0.0 {
        x / (1.0 + (-y).exp())
    } else {
        let e = y.exp();
        x * e / (1.0 + e)
    }
}

/// `f(x)` in float64, the reference's definitions (docs/operators.md).
pub fn unary_scalar_f64(f: Unary, x: f64) -> f64 {
    let relu6 = |y: f64| y.clamp(0.0, 6.0);
    match f {
        Unary::Silu => times_sigmoid_f64(x, x),
        Unary::GeluTanh => times_sigmoid_f64(x, 2.0 * SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)),
        Unary::Sin => x.sin(),
        Unary::Cos => x.cos(),
        // NaN passes through; −0 and +0 both give +0.
        Unary::Relu if x > 0.0 || x.is_nan() => x,
        Unary::Relu => 0.0,
        Unary::Clamp { min, max } => x.clamp(min, max),
        Unary::Sigmoid => times_sigmoid_f64(1.0, x),
        Unary::Tanh => x.tanh(),
        Unary::Exp => x.exp(),
        Unary::Sqrt => x.sqrt(),
        Unary::Rsqrt => 1.0 / x.sqrt(),
        // PyTorch's forms: x·relu6(x + 3)/6 and relu6(x + 3)/6.
        Unary::HardSwish => x * relu6(x + 3.0) / 6.0,
        Unary::HardSigmoid => relu6(x + 3.0) / 6.0,
    }
}

/// [`unary`] of a float64 slice, the reference's definitions.
pub fn unary_f64(f: Unary, x: &[f64], out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = unary_scalar_f64(f, v);
    }
}

/// Elements per parallel task: large enough to amortise the task.
const CHUNK: usize = 1 << 14;

/// [`gelu`] of a float64 slice, the reference's plain definition.
pub fn gelu_f64(x: &[f64], out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = 0.5 * v * (1.0 + libm::erf(v * std::f64::consts::FRAC_1_SQRT_2));
    }
}
