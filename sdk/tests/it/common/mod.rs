//! Shared by the provider tests: fresh random inputs, a way to run one kernel
//! through the loader, and straightforward f64 reference computations written
//! from docs/operators.md (not from any provider's code).
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vips_sdk::{Attrs, DType, Device, HostTensor, Provider, TensorSpec};

/// A fresh seed per run (printed so a failure reproduces), or `VSDK_TEST_SEED`.
pub fn rng(test: &str) -> (ChaCha8Rng, u64) {
    let seed = std::env::var("VSDK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: VSDK_TEST_SEED={seed}");
    (ChaCha8Rng::seed_from_u64(seed), seed)
}

pub fn cpu() -> Device {
    Provider::open_by_name("cpu")
        .expect("CPU provider builds with the workspace")
        .device(0)
        .unwrap()
}

/// The GPU kernel source under the SIMT emulation (vendors/simt).
pub fn simt() -> Device {
    Provider::open_by_name("simt")
        .expect("the SIMT provider builds with the workspace")
        .device(0)
        .unwrap()
}

pub fn template_c() -> Device {
    Provider::open(vsdk_template_c::LIBRARY_PATH)
        .expect("template-c builds")
        .device(0)
        .unwrap()
}

/// Row-major f64 tensor used by the references.
#[derive(Debug, Clone)]
pub struct T {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl T {
    pub fn new(shape: &[usize], data: Vec<f64>) -> T {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        T {
            shape: shape.to_vec(),
            data,
        }
    }
    pub fn random(rng: &mut impl Rng, shape: &[usize], lo: f64, hi: f64) -> T {
        let n = shape.iter().product();
        T::new(shape, (0..n).map(|_| rng.gen_range(lo..hi)).collect())
    }
    pub fn at(&self, idx: &[usize]) -> f64 {
        self.data[ravel(idx, &self.shape)]
    }
    /// The host tensor of this data in `dtype` (values rounded to it first).
    pub fn host(&self, dtype: DType) -> HostTensor {
        let d = &self.data;
        match dtype {
            DType::F64 => HostTensor::from_vec(&self.shape, d.clone()),
            DType::F32 => HostTensor::from_vec(&self.shape, d.iter().map(|&v| v as f32).collect()),
            DType::F16 => HostTensor::from_vec(
                &self.shape,
                d.iter()
                    .map(|&v| vsdk_catalog::rounding::f16_from_f64(v))
                    .collect(),
            ),
            DType::BF16 => HostTensor::from_vec(
                &self.shape,
                d.iter()
                    .map(|&v| vsdk_catalog::rounding::bf16_from_f64(v))
                    .collect(),
            ),
            DType::U8 => HostTensor::from_vec(&self.shape, d.iter().map(|&v| v as u8).collect()),
            DType::I32 => HostTensor::from_vec(&self.shape, d.iter().map(|&v| v as i32).collect()),
            DType::I64 => HostTensor::from_vec(&self.shape, d.iter().map(|&v| v as i64).collect()),
        }
        .unwrap()
    }
    /// This data as `dtype` would hold it (what the provider actually sees).
    pub fn rounded(&self, dtype: DType) -> T {
        T::new(&self.shape, self.host(dtype).to_f64_vec())
    }
}

pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| {
        assert!(i < n);
        acc * n + i
    })
}

pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

/// Uploads `inputs`, runs `kernel`@1, downloads the single output.
pub fn run(dev: &Device, kernel: &str, attrs: &Attrs, inputs: &[HostTensor]) -> HostTensor {
    try_run(dev, kernel, attrs, inputs).unwrap_or_else(|e| panic!("{kernel}: {e}"))
}

pub fn try_run(
    dev: &Device,
    kernel: &str,
    attrs: &Attrs,
    inputs: &[HostTensor],
) -> Result<HostTensor, vips_sdk::Error> {
    let up = inputs
        .iter()
        .map(|h| dev.upload(h))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<_> = up.iter().collect();
    let out = dev.execute(kernel, 1, attrs, &refs)?;
    assert_eq!(out.len(), 1);
    dev.download(&out[0])
}

/// `|a - e| <= atol + rtol |e|` everywhere, with the worst element in the message.
pub fn assert_close(what: &str, actual: &[f64], expected: &[f64], rtol: f64, atol: f64) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let excess = (a - e).abs() - (atol + rtol * e.abs());
        let bad = excess > 0.0 || a.is_nan() != e.is_nan();
        // A NaN excess (one side NaN) counts as the worst.
        if bad && worst.is_none_or(|(_, w)| excess.is_nan() || excess > w) {
            worst = Some((i, excess));
        }
    }
    if let Some((i, _)) = worst {
        panic!(
            "{what}: element {i} is {} but expected {} (rtol {rtol}, atol {atol}; {} of {} differ)",
            actual[i],
            expected[i],
            actual
                .iter()
                .zip(expected)
                .filter(|(a, e)| (*a - *e).abs() > atol + rtol * e.abs())
                .count(),
            actual.len()
        );
    }
}

pub fn spec(dtype: DType, shape: &[usize]) -> TensorSpec {
    TensorSpec::new(dtype, shape)
}

// ---- references, in f64, written from docs/operators.md -------------------

pub fn broadcast(a: &T, b: &T, f: impl Fn(f64, f64) -> f64) -> T {
    let r = a.shape.len().max(b.shape.len());
    let pad = |s: &[usize]| [vec![1; r - s.len()], s.to_vec()].concat();
    let (sa, sb) = (pad(&a.shape), pad(&b.shape));
    let shape: Vec<usize> = (0..r).map(|d| sa[d].max(sb[d])).collect();
    let n = shape.iter().product();
    let data = (0..n)
        .map(|flat| {
            let idx = unravel(flat, &shape);
            let ia: Vec<usize> = idx
                .iter()
                .zip(&sa)
                .map(|(&i, &n)| if n == 1 { 0 } else { i })
                .collect();
            let ib: Vec<usize> = idx
                .iter()
                .zip(&sb)
                .map(|(&i, &n)| if n == 1 { 0 } else { i })
                .collect();
            f(a.data[ravel(&ia, &sa)], b.data[ravel(&ib, &sb)])
        })
        .collect();
    T::new(&shape, data)
}

pub fn gelu(x: &T) -> T {
    T::new(
        &x.shape,
        x.data
            .iter()
            .map(|&v| 0.5 * v * (1.0 + libm::erf(v / 2f64.sqrt())))
            .collect(),
    )
}

/// `f` of every element.
pub fn map(x: &T, f: impl Fn(f64) -> f64) -> T {
    T::new(&x.shape, x.data.iter().map(|&v| f(v)).collect())
}

/// PyTorch's `gelu(approximate="tanh")`, literally (accurate in float64 on
/// the test ranges: `1 + tanh` cancels far below float32's resolution).
pub fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
}

/// `x·σ(x)`, literally.
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

pub fn linear(x: &T, w: &T, b: Option<&T>) -> T {
    let k = *x.shape.last().unwrap();
    let n = w.shape[0];
    let m = x.data.len() / k;
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k)
                .map(|kk| x.data[i * k + kk] * w.data[j * k + kk])
                .sum();
            out[i * n + j] = dot + b.map_or(0.0, |b| b.data[j]);
        }
    }
    let mut shape = x.shape.clone();
    *shape.last_mut().unwrap() = n;
    T::new(&shape, out)
}

#[allow(clippy::too_many_arguments)]
pub fn conv2d(
    x: &T,
    w: &T,
    b: Option<&T>,
    strides: [usize; 2],
    pads: [usize; 4],
    dil: [usize; 2],
    groups: usize,
) -> T {
    let (n, c, h, wd) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (o, kh, kw) = (w.shape[0], w.shape[2], w.shape[3]);
    let (cg, og) = (c / groups, o / groups);
    let oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) / strides[0] + 1;
    let ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) / strides[1] + 1;
    let mut out = T::new(&[n, o, oh, ow], vec![0.0; n * o * oh * ow]);
    for bn in 0..n {
        for oc in 0..o {
            let g = oc / og;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b.map_or(0.0, |b| b.data[oc]);
                    for ci in 0..cg {
                        for i in 0..kh {
                            for j in 0..kw {
                                let y = (oy * strides[0] + i * dil[0]) as isize - pads[0] as isize;
                                let xx = (ox * strides[1] + j * dil[1]) as isize - pads[1] as isize;
                                if y >= 0 && xx >= 0 && (y as usize) < h && (xx as usize) < wd {
                                    acc += x.at(&[bn, g * cg + ci, y as usize, xx as usize])
                                        * w.at(&[oc, ci, i, j]);
                                }
                            }
                        }
                    }
                    let at = ravel(&[bn, oc, oy, ox], &out.shape);
                    out.data[at] = acc;
                }
            }
        }
    }
    out
}

/// Applies `f` to every 1-d lane along `axis`.
pub fn along_axis(x: &T, axis: usize, f: impl Fn(&[f64]) -> Vec<f64>) -> T {
    let mut out = x.clone();
    let len = x.shape[axis];
    let outer_shape: Vec<usize> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| if d == axis { 1 } else { n })
        .collect();
    for flat in 0..outer_shape.iter().product() {
        let mut idx = unravel(flat, &outer_shape);
        let lane: Vec<f64> = (0..len)
            .map(|i| {
                idx[axis] = i;
                x.at(&idx)
            })
            .collect();
        for (i, v) in f(&lane).into_iter().enumerate() {
            idx[axis] = i;
            let at = ravel(&idx, &x.shape);
            out.data[at] = v;
        }
    }
    out
}

pub fn softmax(x: &T, axis: usize) -> T {
    along_axis(x, axis, |lane| {
        let m = lane.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = lane.iter().map(|v| (v - m).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    })
}

pub fn layer_norm(x: &T, w: &T, b: &T, axis: usize, eps: f64) -> T {
    let d: usize = x.shape[axis..].iter().product();
    let data = x
        .data
        .chunks(d)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
            row.iter()
                .enumerate()
                .map(|(i, v)| (v - mean) / (var + eps).sqrt() * w.data[i] + b.data[i])
                .collect::<Vec<_>>()
        })
        .collect();
    T::new(&x.shape, data)
}

/// `F.normalize(x, dim=-1) · γ · √d`, γ of a trailing shape of x's.
pub fn rms_norm(x: &T, g: &T, eps: f64) -> T {
    let d = *x.shape.last().expect("rank >= 1");
    let data = x
        .data
        .chunks(d)
        .enumerate()
        .flat_map(|(r, row)| {
            let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt();
            let at = (r * d) % g.data.len();
            row.iter()
                .enumerate()
                .map(|(i, v)| v / norm.max(eps) * g.data[at + i] * (d as f64).sqrt())
                .collect::<Vec<_>>()
        })
        .collect();
    T::new(&x.shape, data)
}

/// `t` with its row `row` (over the last axis) set to 0.
pub fn zero_row(mut t: T, row: usize) -> T {
    let d = *t.shape.last().expect("rank >= 1");
    t.data[row * d..(row + 1) * d].fill(0.0);
    t
}

pub fn sdpa(q: &T, k: &T, v: &T, scale: f64) -> T {
    let r = q.shape.len();
    let (lq, d, lk, dv) = (
        q.shape[r - 2],
        q.shape[r - 1],
        k.shape[r - 2],
        v.shape[r - 1],
    );
    let batch: usize = q.shape[..r - 2].iter().product();
    let mut out = Vec::with_capacity(batch * lq * dv);
    for b in 0..batch {
        for i in 0..lq {
            let s: Vec<f64> = (0..lk)
                .map(|j| {
                    scale
                        * (0..d)
                            .map(|e| q.data[(b * lq + i) * d + e] * k.data[(b * lk + j) * d + e])
                            .sum::<f64>()
                })
                .collect();
            let p = softmax(&T::new(&[lk], s), 0).data;
            for e in 0..dv {
                out.push((0..lk).map(|j| p[j] * v.data[(b * lk + j) * dv + e]).sum());
            }
        }
    }
    let mut shape = q.shape.clone();
    shape[r - 1] = dv;
    T::new(&shape, out)
}

/// PyTorch bicubic, written directly as the 2-d weighted sum of docs/operators.md.
pub fn resize_bicubic(x: &T, out_hw: [usize; 2], scale: [f64; 2], antialias: bool) -> T {
    fn cubic(x: f64, a: f64) -> f64 {
        let x = x.abs();
        if x <= 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    }
    // Per axis: the (index, weight) pairs of output position i.
    let taps = |n_in: usize, i: usize, s: f64| -> Vec<(usize, f64)> {
        if antialias {
            let fs = s.max(1.0);
            let center = s * (i as f64 + 0.5);
            let lo = ((center - 2.0 * fs + 0.5).trunc().max(0.0)) as usize;
            let hi = ((center + 2.0 * fs + 0.5).trunc() as usize).min(n_in);
            let w: Vec<(usize, f64)> = (lo..hi)
                .map(|j| (j, cubic((j as f64 + 0.5 - center) / fs, -0.5)))
                .collect();
            let total: f64 = w.iter().map(|p| p.1).sum();
            w.into_iter().map(|(j, v)| (j, v / total)).collect()
        } else {
            let src = s * (i as f64 + 0.5) - 0.5;
            let f = src.floor();
            (-1..=2)
                .map(|o| {
                    let j = (f as i64 + o).clamp(0, n_in as i64 - 1) as usize;
                    (j, cubic(src - (f + o as f64), -0.75))
                })
                .collect()
        }
    };
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let [oh, ow] = out_hw;
    let mut data = Vec::with_capacity(n * c * oh * ow);
    for b in 0..n {
        for ch in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0.0;
                    for &(y, wy) in &taps(h, oy, scale[0]) {
                        for &(xx, wx) in &taps(w, ox, scale[1]) {
                            acc += wy * wx * x.at(&[b, ch, y, xx]);
                        }
                    }
                    data.push(acc);
                }
            }
        }
    }
    T::new(&[n, c, oh, ow], data)
}

pub mod cases;
pub mod sparse;
pub mod suites;

/// A model document built on demo-mlp (pinned by its document's SHA-256 and
/// path) with one stage of its own.
pub fn model_doc(demo_sha256: &str, demo_path: &str) -> String {
    format!(
        r#"vips: 1
component: {{ id: demo-model, version: 1.0.0, title: "A model built on demo-mlp" }}
uses:
  - {{ component: demo-mlp, version: 0.1.0, sha256: "{demo_sha256}", path: "{demo_path}" }}
tensors:
  a: {{ dtype: float32, shape: [2, 3], source: {{ seeded: {{ seed: 1, uniform: [-1, 1] }} }} }}
  y: {{ dtype: float32, shape: [2, 3], source: golden }}
stages:
  - stage: act
    algorithm: "y = GELU(a)"
    impl: "torch.nn.GELU()"
    inputs: [a]
    outputs: [y]
    graph:
      - {{ op: vsdk.gelu, inputs: [a], outputs: [y] }}
"#
    )
}
