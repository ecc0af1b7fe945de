//! The cases of each kernel: layouts (transposed, padded with an offset,
//! stride-0 broadcast), odd and large sizes, and the values that break
//! naive kernels (docs/runner.md, "The kernel contract", lists them).

use super::values::{self, broadcast, padded, specials, tensor, transposed, Rng};
use super::{Case, Needed};
use vips_data::document::{GraphNode, Location};
use vips_data::HostTensor;
use vips_execution::execution::Layout;
use vsdk_catalog::{AttrValue, Attrs, DType, Op};

/// One input: its values in their dtype and how they lie in memory.
struct Input {
    t: HostTensor,
    layout: Option<Layout>,
}

/// `values` in `dtype`, made consistent with `layout` (a stride-0 axis
/// repeats its first slice).
fn input(shape: &[usize], values: Vec<f64>, dtype: DType, layout: Option<Layout>) -> Input {
    let values = match &layout {
        Some(l) => values::through(l, shape, values),
        None => values,
    };
    Input {
        t: tensor(shape, values, dtype),
        layout,
    }
}

struct Cases<'a> {
    op: Op,
    dtype: DType,
    needed: &'a Needed,
    rng: Rng,
    out: Vec<Case>,
}

impl Cases<'_> {
    fn add(&mut self, variant: &str, about: &str, attrs: Attrs, inputs: Vec<Input>) {
        let exact = self.op == Op::Cast || self.op.moves_data() || self.op.pil_filter().is_some();
        let used = self.needed.dtypes.contains(&self.dtype);
        let required = match attrs.get("dtype") {
            Some(AttrValue::Str(to)) if self.op == Op::Cast => {
                used && DType::from_name(to).is_some_and(|t| self.needed.cast_targets.contains(&t))
            }
            _ => used,
        };
        let node = GraphNode {
            op: self.op,
            attrs,
            inputs: (0..inputs.len()).map(|i| format!("in{i}")).collect(),
            output: "out".into(),
            at: Location::default(),
        };
        let (inputs, layouts) = inputs.into_iter().map(|i| (i.t, i.layout)).unzip();
        self.out.push(Case {
            name: format!(
                "{}@{} {} {variant}",
                self.op.name(),
                self.op.version(),
                self.dtype.name()
            ),
            node,
            inputs,
            layouts,
            exact,
            about: about.to_string(),
            required,
        });
    }

    /// The template's attributes among `names`.
    fn kept(&self, names: &[&str]) -> Attrs {
        Attrs(
            self.needed
                .template
                .attrs
                .0
                .iter()
                .filter(|(n, _)| names.contains(&n.as_str()))
                .cloned()
                .collect(),
        )
    }

    fn normals(&mut self, shape: &[usize], scale: f64) -> Vec<f64> {
        self.rng.normals(shape.iter().product(), scale)
    }

    /// Normals with a special value (of the case's dtype) in about one
    /// element of eight.
    fn with_specials(&mut self, shape: &[usize], scale: f64, allowed: &[f64]) -> Vec<f64> {
        let n = shape.iter().product();
        (0..n)
            .map(|_| {
                if self.rng.below(8) == 0 {
                    self.rng.pick(allowed)
                } else {
                    scale * self.rng.normal()
                }
            })
            .collect()
    }

    /// The three layouts every kernel meets, on one input of `shape`
    /// (`at` of `n` inputs, the others compact).
    fn layouts(&mut self, shape: &[usize]) -> [(&'static str, &'static str, Layout); 3] {
        let pad = 1 + self.rng.below(13) as u64;
        let offset = 1 + self.rng.below(7) as u64;
        let axis = (0..shape.len()).find(|&a| shape[a] > 1).unwrap_or(0);
        [
            (
                "transposed",
                "an input stored transposed (non-unit stride on its last axis)",
                transposed(shape),
            ),
            (
                "padded",
                "an input with padded rows and an element offset (the padding holds NaN)",
                padded(shape, pad, offset),
            ),
            (
                "broadcast",
                "an input broadcast with stride 0 along an axis",
                broadcast(shape, axis),
            ),
        ]
    }
}

/// The cases of `op` at `dtype`.
pub(super) fn of(op: Op, dtype: DType, needed: &Needed, seed: u64) -> Vec<Case> {
    let mut c = Cases {
        op,
        dtype,
        needed,
        rng: Rng::new(seed),
        out: Vec::new(),
    };
    match op {
        Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise(&mut c),
        Op::Gelu => gelu(&mut c),
        Op::GeluTanh | Op::Silu => activation(&mut c),
        Op::Sin | Op::Cos => trig(&mut c),
        Op::Softmax => softmax(&mut c),
        Op::LayerNorm => layer_norm(&mut c),
        Op::RmsNorm => rms_norm(&mut c),
        Op::Linear => linear(&mut c),
        Op::Sdpa => sdpa(&mut c),
        Op::Conv2d => conv2d(&mut c),
        Op::Cast => cast(&mut c),
        Op::ResizePilBicubic | Op::ResizePilLanczos => resize_pil(&mut c),
        Op::ResizeBicubic => resize(&mut c),
        Op::Crop | Op::Concat | Op::Reshape | Op::Permute => movement(&mut c),
        Op::SparseConv3d
        | Op::SparseDownsampleCoords
        | Op::SparseDownsampleIndex
        | Op::SegmentMean
        | Op::GatherRows
        | Op::RepeatRows
        | Op::SparseSubdivideCoords => sparse(&mut c),
        Op::Rasterize | Op::Interpolate => raster(&mut c),
    }
    c.out
}

/// One case per layout of the first input, the others compact.
fn layout_cases(c: &mut Cases, attrs: &Attrs, shapes: &[Vec<usize>], scale: f64) {
    let d = c.dtype;
    for (variant, about, layout) in c.layouts(&shapes[0]) {
        let mut inputs = Vec::new();
        for (i, shape) in shapes.iter().enumerate() {
            let v = c.normals(shape, scale);
            inputs.push(input(shape, v, d, (i == 0).then(|| layout.clone())));
        }
        c.add(variant, about, attrs.clone(), inputs);
    }
}

fn elementwise(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![5, 7, 9], vec![7, 9]], 2.0);
    // NumPy broadcasting by shape, and a scalar.
    let (a, b) = (c.normals(&[4, 1, 9], 2.0), c.normals(&[5, 9], 2.0));
    c.add(
        "numpy-broadcast",
        "shapes [4,1,9] and [5,9] broadcast to [4,5,9]",
        none.clone(),
        vec![input(&[4, 1, 9], a, d, None), input(&[5, 9], b, d, None)],
    );
    let n = (1 << 17) + 5;
    let (a, b) = (c.normals(&[n], 2.0), c.normals(&[], 2.0));
    c.add(
        "large",
        "131077 elements (past one block and one grid row) and a rank-0 scalar",
        none.clone(),
        vec![input(&[n], a, d, None), input(&[], b, d, None)],
    );
    // IEEE 754 specials, paired where the result stays finite or is a
    // defined special (no overflow of finite values, no subnormal divisor).
    let (max, tiny, _) = values::limits(d);
    let sp = specials(d);
    let n = 257;
    let mut a: Vec<f64> = (0..n).map(|_| c.rng.pick(&sp)).collect();
    let mut b: Vec<f64> = (0..n).map(|_| c.rng.pick(&sp)).collect();
    // Rounded to the dtype first: the pairs are judged as stored.
    let stored = |v: &[f64]| tensor(&[n], v.to_vec(), d).to_f64_vec();
    (a, b) = (stored(&a), stored(&b));
    let sub = |x: f64| x != 0.0 && x.abs() < tiny;
    for (x, y) in a.iter_mut().zip(b.iter_mut()) {
        let r = match c.op {
            Op::Add => *x + *y,
            Op::Sub => *x - *y,
            Op::Mul => *x * *y,
            _ => *x / *y,
        };
        let scaled = matches!(c.op, Op::Mul | Op::Div);
        if (r.is_finite() && r.abs() > max / 2.0)
            || (scaled && (sub(*x) || sub(*y)) && r.abs() >= tiny)
            || (c.op == Op::Div && sub(*y))
        {
            *y = 1.0;
        }
        if c.op == Op::Mul && (sub(*x) || sub(*y)) {
            *x = x.clamp(-1.0, 1.0);
        }
    }
    c.add(
        "specials",
        "±0, ±Inf, NaN, subnormals, the smallest normal and large values (IEEE 754: x/0 = ±Inf, 0/0 = NaN, NaN propagates)",
        none,
        vec![input(&[n], a, d, None), input(&[n], b, d, None)],
    );
}

fn gelu(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![3, 5, 37]], 2.0);
    let n = (1 << 17) + 3;
    let v = c.normals(&[n], 3.0);
    c.add(
        "large",
        "131075 elements (past one block and one grid row)",
        none.clone(),
        vec![input(&[n], v, d, None)],
    );
    let (max, tiny, sub) = values::limits(d);
    let extremes = [
        0.0,
        -0.0,
        f64::NAN,
        sub,
        -sub,
        tiny,
        -tiny,
        -40.0,
        40.0,
        -9.0,
        9.0,
        max / 4.0,
        -max / 4.0,
    ];
    let v = c.with_specials(&[9, 33], 3.0, &extremes);
    c.add(
        "extremes",
        "±0, NaN, subnormals, ±9, ±40 and ±max/4 (erf saturates; x·x overflows)",
        none,
        vec![input(&[9, 33], v, d, None)],
    );
}

/// SiLU and the tanh GELU: GELU's cases, and where `exp` overflows float32
/// (±89, ±100) or `x³` does (±max/4): forms that divide ∞ by ∞ give NaN.
fn activation(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![3, 5, 37]], 3.0);
    let n = (1 << 17) + 3;
    let v = c.normals(&[n], 4.0);
    c.add(
        "large",
        "131075 elements (past one block and one grid row)",
        none.clone(),
        vec![input(&[n], v, d, None)],
    );
    let (max, tiny, sub) = values::limits(d);
    let extremes = [
        0.0,
        -0.0,
        f64::NAN,
        sub,
        -sub,
        tiny,
        -tiny,
        -20.0,
        20.0,
        -89.0,
        89.0,
        -100.0,
        100.0,
        max / 4.0,
        -max / 4.0,
    ];
    let v = c.with_specials(&[9, 33], 4.0, &extremes);
    c.add(
        "extremes",
        "±0, NaN, subnormals, ±20, ±89, ±100 and ±max/4 (exp and x³ overflow float32)",
        none,
        vec![input(&[9, 33], v, d, None)],
    );
}

/// sin and cos: small arguments, arguments up to ±1000 (TRELLIS's
/// embeddings) and far beyond, where only an accurate argument reduction
/// keeps the result (docs/operators.md).
fn trig(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![3, 5, 37]], 3.0);
    let n = (1 << 17) + 3;
    let v: Vec<f64> = (0..n).map(|_| 2000.0 * c.rng.unit() - 1000.0).collect();
    c.add(
        "large-arguments",
        "131075 arguments uniform in [−1000, 1000] (a one-word float32 2π or __sinf fails here)",
        none.clone(),
        vec![input(&[n], v, d, None)],
    );
    let (max, tiny, sub) = values::limits(d);
    let extremes = [
        0.0,
        -0.0,
        f64::NAN,
        sub,
        -sub,
        tiny,
        -tiny,
        std::f64::consts::PI,
        -std::f64::consts::FRAC_PI_2,
        1e4,
        -3.0e4,
        max / 4.0,
        -max / 4.0,
    ];
    let v = c.with_specials(&[9, 33], 300.0, &extremes);
    c.add(
        "extremes",
        "±0, NaN, subnormals, π, −π/2, 1e4, −3e4 and ±max/4 (argument reduction over the whole range)",
        none,
        vec![input(&[9, 33], v, d, None)],
    );
}

fn softmax(c: &mut Cases) {
    let d = c.dtype;
    let axis = Attrs::new().with("axis", AttrValue::Int(-1));
    layout_cases(c, &axis, &[vec![4, 6, 33]], 3.0);
    let v = c.normals(&[2, 8209], 3.0);
    c.add(
        "long-rows",
        "rows of 8209 elements (past any one block's width)",
        axis.clone(),
        vec![input(&[2, 8209], v, d, None)],
    );
    let (rows, cols) = (8, 67);
    let mut v = Vec::new();
    for _ in 0..rows {
        let mut row: Vec<f64> = (0..cols).map(|_| 300.0 * c.rng.unit() - 150.0).collect();
        row[c.rng.below(cols)] = 100.0 + 50.0 * c.rng.unit();
        row[c.rng.below(cols)] = f64::NEG_INFINITY;
        v.extend(row);
    }
    c.add(
        "large-logits",
        "logits from -150 to 150, every row's maximum at least 100, and -Inf entries (exp overflows unless the maximum is subtracted)",
        axis,
        vec![input(&[rows, cols], v, d, None)],
    );
}

/// A row's mean this many times its spread: one-pass `E[x²] − μ²` cancels
/// catastrophically (kept representable in 16-bit dtypes).
fn large_mean(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (3000.0, 4.0),
        DType::BF16 => (8192.0, 256.0),
        _ => (1e4, 1.0),
    }
}

fn layer_norm(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["eps"]).with("axis", AttrValue::Int(-1));
    for (variant, about, layout) in c.layouts(&[6, 40]) {
        let x = c.normals(&[6, 40], 2.0);
        let w: Vec<f64> = (0..40).map(|_| 1.0 + 0.3 * c.rng.normal()).collect();
        let b = c.normals(&[40], 0.5);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&[6, 40], x, d, Some(layout)),
                input(&[40], w, d, None),
                input(&[40], b, d, None),
            ],
        );
    }
    for (variant, about, shape, (mean, spread)) in [
        (
            "large-mean",
            "rows whose mean is thousands of times their spread (E[x²] ≫ σ²: one-pass variance cancels)",
            [8usize, 384],
            large_mean(d),
        ),
        ("long-rows", "rows of 4099 elements", [2, 4099], (0.0, 2.0)),
    ] {
        let x: Vec<f64> = (0..shape[0] * shape[1])
            .map(|_| mean + spread * c.rng.normal())
            .collect();
        let w: Vec<f64> = (0..shape[1]).map(|_| 1.0 + 0.3 * c.rng.normal()).collect();
        let b = c.normals(&[shape[1]], 0.5);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&shape, x, d, None),
                input(&[shape[1]], w, d, None),
                input(&[shape[1]], b, d, None),
            ],
        );
    }
}

/// γ near 1 (as trained from ones), of `shape`.
fn gains(c: &mut Cases, shape: &[usize]) -> Vec<f64> {
    let n = shape.iter().product();
    (0..n).map(|_| 1.0 + 0.3 * c.rng.normal()).collect()
}

fn rms_norm(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["eps"]);
    let eps = match attrs.get("eps") {
        Some(AttrValue::Float(e)) => *e,
        _ => 1e-12,
    };
    // TRELLIS's q and k: [B, L, heads, D] with γ [heads, D].
    let (shape, g_shape) = ([3usize, 4, 40], [4usize, 40]);
    for (variant, about, layout) in c.layouts(&shape) {
        let x = c.normals(&shape, 2.0);
        let g = gains(c, &g_shape);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&shape, x, d, Some(layout)),
                input(&g_shape, g, d, None),
            ],
        );
    }
    // Rows of every scale: the squares of a huge row stay inside float32
    // (the accumulation), a tiny row's norm stays above eps, another's
    // falls below it (divided by eps), and an all-zero row gives 0.
    let (huge, small): (f64, f64) = match d {
        DType::F16 => (3e4, 2e-3),
        DType::F64 => (1e100, 1e-100),
        _ => (1e17, 1e-9),
    };
    let (rows, len) = (10usize, 48usize);
    let below = 0.1 * eps / (len as f64).sqrt();
    let mut x = Vec::with_capacity(rows * len);
    for r in 0..rows {
        let scale = match r % 5 {
            0 => 1.0,
            1 => huge,
            2 => small.max(1e3 * eps),
            3 => below,
            _ => 0.0,
        };
        x.extend((0..len).map(|_| scale * c.rng.normal()));
    }
    let g = gains(c, &[len]);
    c.add(
        "row-scales",
        "rows of every scale against a γ of the last axis only: huge (squares near float32's range), tiny, below eps (divided by eps) and all zero (0)",
        attrs.clone(),
        vec![input(&[rows, len], x, d, None), input(&[len], g, d, None)],
    );
    let shape = [2usize, 4099];
    let x = c.normals(&shape, 2.0);
    let g = gains(c, &shape);
    c.add(
        "long-rows",
        "rows of 4099 elements, γ the input's whole shape",
        attrs,
        vec![input(&shape, x, d, None), input(&shape, g, d, None)],
    );
}

fn linear(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    let (k, n) = (37, 19);
    let scale = 1.0 / (k as f64).sqrt();
    for (variant, about, layout) in c.layouts(&[3, 5, k]) {
        let x = c.normals(&[3, 5, k], 1.0);
        let w = c.normals(&[n, k], scale);
        let b = c.normals(&[n], 0.1);
        c.add(
            variant,
            about,
            none.clone(),
            vec![
                input(&[3, 5, k], x, d, Some(layout)),
                input(&[n, k], w, d, None),
                input(&[n], b, d, None),
            ],
        );
    }
    let x = c.normals(&[7, k], 1.0);
    let w = c.normals(&[n, k], scale);
    c.add(
        "transposed-weight",
        "the weight passed as a transposed view of a [K, N] matrix, no bias",
        none.clone(),
        vec![
            input(&[7, k], x, d, None),
            input(&[n, k], w, d, Some(transposed(&[n, k]))),
        ],
    );
    let long = 4099;
    let x = c.normals(&[4, long], 1.0);
    let w = c.normals(&[33, long], 1.0 / (long as f64).sqrt());
    let b = c.normals(&[33], 0.1);
    c.add(
        "long-k",
        "a reduction of 4099 terms (odd, past any tile)",
        none.clone(),
        vec![
            input(&[4, long], x, d, None),
            input(&[33, long], w, d, None),
            input(&[33], b, d, None),
        ],
    );
    let (_, tiny, sub) = values::limits(d);
    let x = c.with_specials(&[6, k], 1.0, &[0.0, -0.0, sub, -sub, tiny, f64::NAN]);
    let w = c.normals(&[n, k], scale);
    let b = c.normals(&[n], 0.1);
    c.add(
        "specials",
        "±0, subnormal and NaN inputs (a NaN makes its row NaN)",
        none,
        vec![
            input(&[6, k], x, d, None),
            input(&[n, k], w, d, None),
            input(&[n], b, d, None),
        ],
    );
}

fn sdpa(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["scale"]);
    let (head, dv) = (24usize, 40usize);
    let scale = match attrs.get("scale") {
        Some(AttrValue::Float(s)) => *s,
        _ => 1.0 / (head as f64).sqrt(),
    };
    // Logits of a few units: q and k with entries of size scale^-1/2.
    let qk = (1.0 / (scale * (head as f64).sqrt())).sqrt();
    let shapes = |lq: usize, lk: usize| {
        [
            vec![1, 2, lq, head],
            vec![1, 2, lk, head],
            vec![1, 2, lk, dv],
        ]
    };
    let [q, k, v] = shapes(17, 33);
    for (variant, about, layout) in c.layouts(&k) {
        let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
        // Keys and values laid out alike (a KV cache's view of both).
        let vl = match variant {
            "transposed" => transposed(&v),
            "padded" => padded(&v, 3, 1),
            _ => broadcast(&v, 1),
        };
        c.add(
            &format!("{variant}-kv"),
            &about.replace("an input", "keys and values"),
            attrs.clone(),
            vec![
                input(&q, qv, d, None),
                input(&k, kv, d, Some(layout)),
                input(&v, vv, d, Some(vl)),
            ],
        );
    }
    let [q, k, v] = shapes(5, 1031);
    let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
    c.add(
        "long-keys",
        "1031 keys (odd, past any tile)",
        attrs.clone(),
        vec![
            input(&q, qv, d, None),
            input(&k, kv, d, None),
            input(&v, vv, d, None),
        ],
    );
    // Every query aligned with one key so that scale·q·k reaches 100-150.
    let [q, k, v] = shapes(9, 33);
    let kv = c.normals(&k, 1.0);
    let mut qv = Vec::new();
    for h in 0..2 {
        for _ in 0..9 {
            let j = c.rng.below(33);
            let key = &kv[(h * 33 + j) * head..(h * 33 + j + 1) * head];
            let norm2: f64 = key.iter().map(|x| x * x).sum();
            let target = 100.0 + 50.0 * c.rng.unit();
            qv.extend(key.iter().map(|x| x * target / (scale * norm2)));
        }
    }
    let vv = c.normals(&v, 1.0);
    c.add(
        "large-logits",
        "attention logits of 100 to 150 (exp overflows unless the maximum is subtracted)",
        attrs,
        vec![
            input(&q, qv, d, None),
            input(&k, kv, d, None),
            input(&v, vv, d, None),
        ],
    );
}

fn conv2d(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["strides", "pads", "dilations", "groups"]);
    let ints = |name: &str, default: [i64; 2]| match attrs.get(name) {
        Some(AttrValue::Ints(v)) if v.len() >= 2 => [v[0], v[1]],
        _ => default,
    };
    let (s, dil) = (ints("strides", [1, 1]), ints("dilations", [1, 1]));
    let groups = match attrs.get("groups") {
        Some(AttrValue::Int(g)) => (*g).max(1) as usize,
        _ => 1,
    };
    let w_spec = c.needed.template_specs.get(1).map(|s| s.shape.clone());
    let (cg, kh, kw) = match w_spec.as_deref() {
        Some([_, cg, kh, kw]) => (*cg, *kh, *kw),
        _ => (3, 3, 3),
    };
    let (ch, out) = (cg * groups, 4 * groups);
    let h = (dil[0] as usize) * (kh - 1) + 1 + 2 * s[0] as usize + 1;
    let w = (dil[1] as usize) * (kw - 1) + 1 + 3 * s[1] as usize + 2;
    let x_shape = [2, ch, h, w];
    let w_shape = [out, cg, kh, kw];
    let scale = 1.0 / ((cg * kh * kw) as f64).sqrt();
    for (variant, about, layout) in c.layouts(&x_shape) {
        let x = c.normals(&x_shape, 1.0);
        let wv = c.normals(&w_shape, scale);
        let b = c.normals(&[out], 0.1);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&x_shape, x, d, Some(layout)),
                input(&w_shape, wv, d, None),
                input(&[out], b, d, None),
            ],
        );
    }
}

fn cast(c: &mut Cases) {
    let from = c.dtype;
    let n = 96;
    for to in DType::ALL {
        let about = match (from.is_float(), to.is_float()) {
            (true, false) => "float to integer: ties to even (2.5 → 2), saturation (−3 → 0, 300 → 255 for uint8), NaN → 0, ±Inf saturate",
            (true, true) => "float to float: ties to even (values on midpoints of the target), overflow to ±Inf, subnormals, NaN",
            (false, _) => "integer conversion: saturation at the target's range",
        };
        let values = if from.is_float() {
            float_cast_values(&mut c.rng, to, n)
        } else {
            int_cast_values(&mut c.rng, from, n)
        };
        let attrs = Attrs::new().with("dtype", AttrValue::Str(to.name().into()));
        let x = match values {
            CastValues::F64(v) => input(&[n], v, from, None),
            // Through int64: every value of `from` exactly.
            CastValues::I64(v) => Input {
                t: HostTensor::from_vec(&[n], v).expect("n values").cast(from),
                layout: None,
            },
        };
        c.add(&format!("to-{}", to.name()), about, attrs, vec![x]);
    }
    // One strided case: casts read views like any kernel.
    let v = float_cast_values(&mut c.rng, DType::I32, n);
    let x = match v {
        CastValues::F64(v) if from.is_float() => v,
        _ => (0..n).map(|_| (c.rng.below(512) as f64) - 256.0).collect(),
    };
    let attrs = Attrs::new().with("dtype", AttrValue::Str(DType::I32.name().into()));
    c.add(
        "to-int32 padded",
        "a strided input (every other element)",
        attrs,
        vec![input(
            &[n / 2],
            x[..n / 2].to_vec(),
            from,
            Some(padded(&[n / 2], 1, 3)),
        )],
    );
}

enum CastValues {
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// Ties, saturation and NaN for an integer target; midpoints, overflow and
/// subnormals of a 16-bit target.
fn float_cast_values(rng: &mut Rng, to: DType, n: usize) -> CastValues {
    use vsdk_catalog::rounding::{bf16_from_f64, f16_from_f64};
    let mut v = vec![
        0.5,
        1.5,
        2.5,
        3.5,
        -0.5,
        -1.5,
        -2.5,
        254.5,
        255.5,
        256.0,
        300.0,
        -3.0,
        -0.0,
        1e10,
        -1e10,
        3e9,
        -3e9,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        65504.0,
        65519.0,
        65520.0,
        1e5,
        -1e5,
        2f64.powi(-25),
        3.0 * 2f64.powi(-25),
        1e-6,
        2f64.powi(-140),
    ];
    while v.len() < n {
        let x = match rng.below(3) {
            // Midpoint between a 16-bit value and the next.
            0 if to == DType::BF16 => {
                let a = bf16_from_f64(rng.normal() * 100.0);
                let b = half::bf16::from_bits(a.to_bits() + 1);
                (a.to_f64() + b.to_f64()) / 2.0
            }
            0 => {
                let a = f16_from_f64(rng.normal() * 100.0);
                let b = half::f16::from_bits(a.to_bits() + 1);
                (a.to_f64() + b.to_f64()) / 2.0
            }
            1 => (rng.below(600) as f64) / 2.0 - 150.0,
            _ => rng.normal() * 1000.0,
        };
        v.push(x);
    }
    v.truncate(n);
    CastValues::F64(v)
}

fn int_cast_values(rng: &mut Rng, from: DType, n: usize) -> CastValues {
    let (lo, hi): (i64, i64) = match from {
        DType::U8 => (0, 255),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    };
    let mut v = vec![
        lo,
        hi,
        0,
        -1,
        1,
        255,
        256,
        -129,
        65504,
        65505,
        (1 << 53) + 1,
        -(1 << 24) - 1,
    ];
    while v.len() < n {
        v.push(match rng.below(2) {
            0 => rng.below(600) as i64 - 300,
            _ => (rng.normal() * 1e6) as i64,
        });
    }
    v.truncate(n);
    CastValues::I64(v.into_iter().map(|x| x.clamp(lo, hi)).collect())
}

fn resize_pil(c: &mut Cases) {
    let attrs_of = |c: &Cases, size: [i64; 2]| {
        c.kept(&["vertical_first", "alpha"])
            .with("size", AttrValue::Ints(size.to_vec()))
    };
    // The component's images have an alpha channel (RGBA): so do the cases,
    // its values often 0 or 255 (kept as they are) and otherwise any.
    let alpha = matches!(attrs_of(c, [1, 1]).get("alpha"), Some(AttrValue::Int(1)));
    let channels = if alpha { 4 } else { 3 };
    let pixels = |c: &mut Cases, n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| {
                // Hard 0/255 edges (the filter overshoots: clamped) and noise.
                if (i / 7) % 3 == 0 {
                    255.0 * ((i / 3) % 2) as f64
                } else {
                    c.rng.below(256) as f64
                }
            })
            .collect()
    };
    for (variant, about, shape, size, layout) in [
        (
            "down",
            "odd sizes, downsampling (the filter widens)",
            [37usize, 41, channels],
            [19, 23],
            None,
        ),
        (
            "up",
            "odd sizes, upsampling",
            [13, 11, channels],
            [29, 31],
            None,
        ),
        (
            "padded",
            "an image with padded rows and an offset",
            [33, 35, channels],
            [17, 21],
            Some(padded(&[33, 35, channels], 5, 2)),
        ),
    ] {
        let attrs = attrs_of(c, size);
        let v = pixels(c, shape.iter().product());
        c.add(
            variant,
            about,
            attrs,
            vec![input(&shape, v, DType::U8, layout)],
        );
    }
}

fn resize(c: &mut Cases) {
    let mut attrs = c.kept(&["scale_factor", "antialias"]);
    if attrs.get("scale_factor").is_none() {
        attrs = attrs.with("size", AttrValue::Ints(vec![23, 13]));
    }
    layout_cases(c, &attrs, &[vec![2, 3, 17, 19]], 1.0);
}

fn movement(c: &mut Cases) {
    let d = c.dtype;
    let shape = [4usize, 6, 5];
    let attrs = match c.op {
        Op::Crop => Attrs::new()
            .with("offsets", AttrValue::Ints(vec![1, 2, 1]))
            .with("sizes", AttrValue::Ints(vec![3, 3, 4])),
        Op::Concat => Attrs::new().with("axis", AttrValue::Int(1)),
        Op::Reshape => Attrs::new().with("shape", AttrValue::Ints(vec![6, -1])),
        _ => Attrs::new().with("perm", AttrValue::Ints(vec![2, 0, 1])),
    };
    let pool: Vec<f64> = if d.is_float() {
        specials(d)
    } else {
        vec![0.0, 1.0, 127.0, 255.0, -1.0, 2147483647.0, -2147483648.0]
    };
    let shapes: Vec<Vec<usize>> = match c.op {
        Op::Concat => vec![shape.to_vec(), vec![4, 2, 5]],
        _ => vec![shape.to_vec()],
    };
    let layouts = c.layouts(&shape);
    // Integer dtypes: the padded view alone (the layouts are the same code).
    let take = if d.is_float() { 3 } else { 1 };
    for (variant, about, layout) in layouts
        .into_iter()
        .skip(if d.is_float() { 0 } else { 1 })
        .take(take)
    {
        let inputs = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let v = c.with_specials(s, 100.0, &pool);
                let l = (i == 0).then(|| layout.clone());
                input(s, v, d, l)
            })
            .collect();
        c.add(variant, about, attrs.clone(), inputs);
    }
}

/// Voxels of a random occupancy in an `extent`³ grid, two batch entries, in
/// shuffled order: a ball's shell, and every voxel of the grid's low faces
/// within its reach (neighbours at `x − 1 < 0` must be absent, not clamped).
fn voxels(c: &mut Cases, extent: i32) -> Vec<[i32; 4]> {
    let mut v = Vec::new();
    for b in 0..2 {
        let centre = extent as f64 / 2.0 + c.rng.normal();
        let radius = extent as f64 / 3.0;
        for x in 0..extent {
            for y in 0..extent {
                for z in 0..extent {
                    let d = [x, y, z].map(|t| f64::from(t) - centre);
                    let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                    let face = (x == 0 || y == 0 || z == 0) && r < radius * 1.6;
                    if (r - radius).abs() < 0.9 || face {
                        v.push([b, x, y, z]);
                    }
                }
            }
        }
    }
    for i in (1..v.len()).rev() {
        let j = c.rng.below(i + 1);
        v.swap(i, j);
    }
    v
}

fn coords_input(v: &[[i32; 4]], layout: Option<Layout>) -> Input {
    let values = v.iter().flatten().map(|&x| f64::from(x)).collect();
    input(&[v.len(), 4], values, DType::I32, layout)
}

fn parents(v: &[[i32; 4]]) -> usize {
    let mut p: Vec<[i32; 4]> = v
        .iter()
        .map(|q| [q[0], q[1] / 2, q[2] / 2, q[3] / 2])
        .collect();
    p.sort_unstable();
    p.dedup();
    p.len()
}

/// The sparse kernels: every data input in each layout (the coordinates
/// too), shuffled voxels, the grid's faces, and a larger grid.
fn sparse(c: &mut Cases) {
    let d = c.dtype;
    let small = voxels(c, 7);
    let n = small.len();
    let layouts = c.layouts(&[n, 4]);
    match c.op {
        Op::SparseConv3d | Op::SegmentMean | Op::GatherRows | Op::RepeatRows => {
            let cols = 5;
            for (variant, about, layout) in c.layouts(&[n, cols]) {
                let x = c.normals(&[n, cols], 2.0);
                let x = input(&[n, cols], x, d, Some(layout));
                let (attrs, rest) = sparse_rest(c, &small, None);
                c.add(
                    variant,
                    about,
                    attrs,
                    std::iter::once(x).chain(rest).collect(),
                );
            }
            if c.op == Op::SparseConv3d {
                // The coordinates as a view, and a larger grid.
                let (variant, about, layout) = layouts[1].clone();
                let x = c.normals(&[n, cols], 2.0);
                let x = input(&[n, cols], x, d, None);
                let (attrs, rest) = sparse_rest(c, &small, Some(layout));
                c.add(
                    &format!("coords-{variant}"),
                    about,
                    attrs,
                    std::iter::once(x).chain(rest).collect(),
                );
                let big = voxels(c, 24);
                let x = c.normals(&[big.len(), 16], 1.0);
                let x = input(&[big.len(), 16], x, d, None);
                let (attrs, rest) = sparse_rest(c, &big, None);
                c.add(
                    "large",
                    "two shells in a 24³ grid (a few thousand voxels), 16 channels",
                    attrs,
                    std::iter::once(x).chain(rest).collect(),
                );
            }
        }
        _ => {
            // Not broadcast: repeated rows would be the same voxel twice.
            for (variant, about, layout) in layouts.into_iter().take(2) {
                let (attrs, _) = sparse_rest(c, &small, None);
                c.add(
                    variant,
                    about,
                    attrs,
                    vec![coords_input(&small, Some(layout))],
                );
            }
        }
    }
}

/// The attributes and the inputs after the first of a sparse case on `v`.
fn sparse_rest(c: &mut Cases, v: &[[i32; 4]], coords: Option<Layout>) -> (Attrs, Vec<Input>) {
    let n = v.len();
    let d = c.dtype;
    let index = |rows: usize, c: &mut Cases| {
        let values = (0..n).map(|_| c.rng.below(rows) as f64).collect();
        input(&[n], values, DType::I32, None)
    };
    match c.op {
        Op::SparseConv3d => {
            let (cin, cout) = if n > 1000 { (16, 8) } else { (5, 6) };
            let w = c.normals(&[27, cin, cout], 0.2);
            let b = c.normals(&[cout], 0.1);
            (
                Attrs::new(),
                vec![
                    coords_input(v, coords),
                    input(&[27, cin, cout], w, d, None),
                    input(&[cout], b, d, None),
                ],
            )
        }
        Op::SegmentMean => {
            let m = (n / 3).max(1);
            let segments = Attrs::new().with("segments", AttrValue::Int(m as i64));
            (segments, vec![index(m, c)])
        }
        Op::GatherRows => (Attrs::new(), vec![index(n, c)]),
        Op::RepeatRows => (Attrs::new().with("times", AttrValue::Int(8)), vec![]),
        Op::SparseDownsampleCoords | Op::SparseDownsampleIndex => (
            Attrs::new().with("voxels", AttrValue::Int(parents(v) as i64)),
            vec![],
        ),
        _ => (Attrs::new(), vec![]),
    }
}

/// A scene for `vsdk.rasterize`: a jittered grid of quads split into
/// triangles (shared edges, both windings, perspective w), plus `loose`
/// triangles anywhere at random depths (overlaps, the depth test), in clip
/// space `[1, V, 4]`.
fn scene(c: &mut Cases, grid: usize, loose: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut pos, mut tri) = (Vec::new(), Vec::new());
    let mut vertex = |c: &mut Cases, ndc: [f64; 3]| {
        let w = 0.5 + 1.5 * c.rng.unit();
        pos.extend([ndc[0] * w, ndc[1] * w, ndc[2] * w, w]);
        pos.len() / 4 - 1
    };
    let side = grid + 1;
    let mut ids = Vec::new();
    for i in 0..side * side {
        let (gx, gy) = ((i % side) as f64, (i / side) as f64);
        // Inner grid points jittered by up to 15 % of a cell; the outline straight.
        let coord = |c: &mut Cases, g: f64| {
            let inner = g > 0.0 && g < grid as f64;
            let jitter = if inner {
                0.3 * (c.rng.unit() - 0.5)
            } else {
                0.0
            };
            -0.8 + 1.6 * (g + jitter) / grid as f64
        };
        let x = coord(c, gx);
        let y = coord(c, gy);
        let z = 0.2 * c.rng.unit() - 0.1;
        ids.push(vertex(c, [x, y, z]));
    }
    for gy in 0..grid {
        for gx in 0..grid {
            let q = [
                gy * side + gx,
                gy * side + gx + 1,
                (gy + 1) * side + gx + 1,
                (gy + 1) * side + gx,
            ];
            // Both windings, and both diagonals.
            let (a, b) = if c.rng.below(2) == 0 {
                ([q[0], q[1], q[2]], [q[0], q[2], q[3]])
            } else {
                ([q[1], q[0], q[3]], [q[1], q[3], q[2]])
            };
            for t in [a, b] {
                tri.extend(t.iter().map(|&k| ids[k] as f64));
            }
        }
    }
    for _ in 0..loose {
        let z = 1.8 * c.rng.unit() - 0.9;
        let (cx, cy) = (1.6 * c.rng.unit() - 0.8, 1.6 * c.rng.unit() - 0.8);
        for _ in 0..3 {
            let ndc = [
                cx + 0.4 * c.rng.normal(),
                cy + 0.4 * c.rng.normal(),
                z + 0.05 * c.rng.normal(),
            ];
            let v = vertex(c, ndc);
            tri.push(v as f64);
        }
    }
    (pos, tri)
}

/// The rasterizer and the interpolation: positions and attributes in each
/// layout, a watertight grid among overlapping triangles, a large raster,
/// and extremes (vertices far outside, tiny and large w, degenerate
/// triangles, depths past the clip range).
fn raster(c: &mut Cases) {
    let d = c.dtype;
    let size = |h: usize, w: usize| {
        Attrs::new()
            .with("height", AttrValue::Int(h as i64))
            .with("width", AttrValue::Int(w as i64))
    };
    let tri_input = |t: &[f64]| input(&[t.len() / 3, 3], t.to_vec(), DType::I32, None);
    match c.op {
        Op::Rasterize => {
            let (pos, tri) = scene(c, 6, 12);
            let v = pos.len() / 4;
            for (variant, about, layout) in c.layouts(&[1, v, 4]) {
                let p = input(&[1, v, 4], pos.clone(), d, Some(layout));
                c.add(variant, about, size(37, 53), vec![p, tri_input(&tri)]);
            }
            let (pos, tri) = scene(c, 24, 200);
            let v = pos.len() / 4;
            c.add(
                "large",
                "a 384 x 512 raster of about 1350 triangles (a 24 x 24 grid and 200 overlapping)",
                size(384, 512),
                vec![input(&[1, v, 4], pos, d, None), tri_input(&tri)],
            );
            let (mut pos, mut tri) = scene(c, 4, 8);
            // Far outside the viewport, tiny and large w, a degenerate
            // triangle (collinear), depths past [-1, 1].
            let extra = [
                [-1e4, -3.0, 0.0, 1.0],
                [1e4, -2.0, 0.0, 1.0],
                [0.0, 1e4, 0.5, 1.0],
                [0.001, 0.001, 0.0, 1e-3],
                [1.5e3, -0.5e3, 0.0, 2e3],
                [0.0, 0.9e3, 0.2, 1e3],
                [-0.5, -0.5, 0.0, 1.0],
                [0.0, 0.0, 0.0, 1.0],
                [0.5, 0.5, 0.0, 1.0],
                [-0.9, 0.9, -2.0, 1.0],
                [0.9, 0.9, 2.0, 1.0],
                [0.0, -0.9, 0.0, 1.0],
            ];
            let first = pos.len() / 4;
            pos.extend(extra.iter().flatten());
            tri.extend((first..first + 12).map(|k| k as f64));
            let v = pos.len() / 4;
            c.add(
                "extremes",
                "vertices 10^4 outside the viewport, w from 10^-3 to 2000, a degenerate triangle, depths past [-1, 1]",
                size(45, 31),
                vec![input(&[1, v, 4], pos, d, None), tri_input(&tri)],
            );
        }
        _ => {
            // A rasterizer's output as the kernel reads it: ids + 1 (0
            // empty), (u, v) with u + v <= 1.
            let (v, f, (h, w), a) = (40, 60, (19, 23), 5);
            let tri: Vec<f64> = (0..3 * f).map(|_| c.rng.below(v) as f64).collect();
            let mut rast = Vec::with_capacity(h * w * 4);
            for _ in 0..h * w {
                let (u, t) = (c.rng.unit(), c.rng.unit());
                let (u, t) = if u + t > 1.0 {
                    (1.0 - u, 1.0 - t)
                } else {
                    (u, t)
                };
                let id = c.rng.below(f + 1) as f64;
                rast.extend(if id == 0.0 { [0.0; 4] } else { [u, t, 0.0, id] });
            }
            let rast_input = |rast: &[f64]| input(&[1, h, w, 4], rast.to_vec(), DType::F32, None);
            for (variant, about, layout) in c.layouts(&[1, v, a]) {
                let attr = c.normals(&[1, v, a], 2.0);
                let attr = input(&[1, v, a], attr, d, Some(layout));
                c.add(
                    variant,
                    about,
                    Attrs::new(),
                    vec![attr, rast_input(&rast), tri_input(&tri)],
                );
            }
            let (layout_name, about, layout) = c.layouts(&[1, h, w, 4])[0].clone();
            let attr = c.normals(&[1, v, a], 2.0);
            c.add(
                &format!("rast-{layout_name}"),
                about,
                Attrs::new(),
                vec![
                    input(&[1, v, a], attr, d, None),
                    input(&[1, h, w, 4], rast, DType::F32, Some(layout)),
                    tri_input(&tri),
                ],
            );
        }
    }
}
