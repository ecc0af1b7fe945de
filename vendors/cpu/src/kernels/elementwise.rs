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

pub use vsdk_catalog::SQRT_2_OVER_PI;

/// [`unary`] of a float64 slice, the reference's definitions.
pub fn unary_f64(f: Unary, x: &[f64], out: &mut [f64]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f.value(v);
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
