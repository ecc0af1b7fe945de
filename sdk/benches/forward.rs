//! A provider's DINOv2 forward through the provider ABI, and its operators
//! one call at a time on the model's shapes; prints JSON for
//! tools/bench_forward.py, which sets them beside PyTorch and ONNX Runtime.
//!
//!     cargo bench -p vips-sdk --bench forward -- [SUITE_DIR] [ROUNDS] [--dtype=D]
//!
//! The provider is the CPU one, or the one `VSDK_BENCH_PROVIDER` names (a
//! name on the search path or a library path, e.g. `cuda`).
//!
//! SUITE_DIR (default: the dinov2-vits14 suite) is absolute or relative to
//! `sdk/`, where cargo runs benches. D is float32 (the default), float16,
//! bfloat16 or float64, written `--dtype=D`.
//!
//! The forward runs every stage's graph node by node, chained, in that
//! dtype (as a conformance tier runs it), with the weights uploaded once (as
//! an engine would hold them); each kernel call goes through the loader as
//! in a conformance run (catalog check, `kernel_supports`, output
//! allocation, `execute`). The single operators run in that dtype too.

use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use vips_sdk::suite::Suite;
use vips_sdk::{AttrValue, Attrs, DType, Device, DeviceTensor, HostTensor, Op, Provider};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// One chained forward; returns the time per stage and per operator.
fn forward(
    suite: &Suite,
    device: &Device,
    float: Option<DType>,
    held: &HashMap<String, DeviceTensor>,
) -> (Vec<(String, Duration)>, BTreeMap<&'static str, Duration>) {
    let mut produced: HashMap<String, DeviceTensor> = HashMap::new();
    let mut stages = Vec::new();
    let mut ops: BTreeMap<&'static str, Duration> = BTreeMap::new();
    for stage in &suite.document.stages {
        let started = Instant::now();
        let mut local: HashMap<String, DeviceTensor> = HashMap::new();
        for node in &stage.graph {
            let inputs: Vec<&DeviceTensor> = node
                .inputs
                .iter()
                .map(|n| {
                    local
                        .get(n)
                        .or_else(|| produced.get(n))
                        .or_else(|| held.get(n))
                        .unwrap_or_else(|| panic!("{}: input {n} is missing", stage.name))
                })
                .collect();
            let attrs = node.attrs_at(float);
            let t = Instant::now();
            let mut out = device
                .execute(node.op.name(), node.op.version(), &attrs, &inputs)
                .unwrap_or_else(|e| panic!("{} {}: {e}", stage.name, node.op.name()));
            *ops.entry(node.op.name()).or_default() += t.elapsed();
            local.insert(node.output.clone(), out.remove(0));
        }
        for name in &stage.outputs {
            let t = local.remove(name).expect("the graph computes its outputs");
            produced.insert(name.clone(), t);
        }
        stages.push((stage.name.clone(), started.elapsed()));
    }
    (stages, ops)
}

/// Uniform in [-2, 2) as float32, or any byte for an image (uint8) operator.
fn random(rng: &mut impl Rng, shape: &[usize], image: bool) -> HostTensor {
    let n = shape.iter().product();
    if image {
        return HostTensor::from_vec(shape, (0..n).map(|_| rng.gen::<u8>()).collect()).unwrap();
    }
    HostTensor::from_vec(shape, (0..n).map(|_| rng.gen_range(-2.0f32..2.0)).collect()).unwrap()
}

/// Median time of one call of `op` on fresh random inputs of these shapes.
fn one_op(
    device: &Device,
    float: Option<DType>,
    (op, attrs, shapes): (Op, &Attrs, &[&[usize]]),
    rounds: usize,
) -> f64 {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(rand::random());
    let inputs: Vec<DeviceTensor> = shapes
        .iter()
        .map(|s| {
            device
                .upload(
                    &match (random(&mut rng, s, op == Op::ResizePilBicubic), float) {
                        (t, Some(d)) if t.spec.dtype.is_float() => t.cast(d),
                        (t, _) => t,
                    },
                )
                .unwrap()
        })
        .collect();
    let refs: Vec<&DeviceTensor> = inputs.iter().collect();
    let mut times = Vec::new();
    for _ in 0..rounds + 3 {
        let t = Instant::now();
        device
            .execute(op.name(), op.version(), attrs, &refs)
            .unwrap_or_else(|e| panic!("{}: {e}", op.name()));
        times.push(t.elapsed());
    }
    median(times.split_off(3))
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let float = std::env::args()
        .find_map(|a| a.strip_prefix("--dtype=").map(str::to_string))
        .map(|d| {
            DType::from_name(&d)
                .filter(|d| d.is_float())
                .expect("--dtype=float16|bfloat16|float32|float64")
        });
    let dir = args.first().map_or_else(
        || {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../conformance/suites/dinov2-vits14"
            )
            .to_string()
        },
        String::clone,
    );
    let rounds: usize = args
        .get(1)
        .map_or(20, |r| r.parse().expect("ROUNDS"))
        .max(1);
    let suite = Suite::open(std::path::Path::new(&dir)).expect("suite opens");
    let name = std::env::var("VSDK_BENCH_PROVIDER").unwrap_or_else(|_| "cpu".into());
    let provider = if name.contains('/') {
        Provider::open(std::path::Path::new(&name))
    } else {
        Provider::open_by_name(&name)
    }
    .unwrap_or_else(|e| panic!("provider {name}: {e}"));
    let device = provider.device(0).unwrap();

    // Everything a stage reads that no stage computes: weights, image, constants.
    let computed: Vec<&String> = suite
        .document
        .stages
        .iter()
        .flat_map(|s| &s.outputs)
        .collect();
    // Regenerating them (seeded) or reading them (golden) is timed: it is
    // what a conformance run pays before its first kernel.
    let mut held = HashMap::new();
    let mut materialise = Duration::ZERO;
    for stage in &suite.document.stages {
        for name in &stage.inputs {
            if !computed.contains(&name) && !held.contains_key(name) {
                let t = Instant::now();
                let host = suite.tensor(name).expect("declared tensor");
                materialise += t.elapsed();
                let host = match float {
                    Some(d) if host.spec.dtype.is_float() => host.cast(d),
                    _ => (*host).clone(),
                };
                held.insert(name.clone(), device.upload(&host).unwrap());
            }
        }
    }

    // The seeded generator alone (no hashing, no upload), all tensors.
    let regenerate = Instant::now();
    for t in &suite.golden.tensors {
        if let vips_sdk::golden::Source::Seeded(s) = &t.source {
            std::hint::black_box(s.generate(t.spec.dtype, &t.spec.shape).unwrap());
        }
    }
    let regenerate = regenerate.elapsed();

    for _ in 0..3 {
        forward(&suite, &device, float, &held);
    }
    let mut per_stage: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let mut per_op: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    let mut totals = Vec::new();
    let mut models = Vec::new();
    let first = suite.document.stages[0].name.clone();
    for _ in 0..rounds {
        let (stages, ops) = forward(&suite, &device, float, &held);
        totals.push(stages.iter().map(|(_, t)| *t).sum());
        models.push(
            stages
                .iter()
                .filter(|(s, _)| *s != first)
                .map(|(_, t)| *t)
                .sum(),
        );
        for (s, t) in stages {
            per_stage.entry(s).or_default().push(t);
        }
        for (o, t) in ops {
            per_op.entry(o).or_default().push(t);
        }
    }

    // The operators one call at a time, on DINOv2 ViT-S/14's shapes at 224 × 224.
    let none = Attrs::new();
    let attrs = |pairs: &[(&str, AttrValue)]| {
        pairs
            .iter()
            .fold(Attrs::new(), |a, (k, v)| a.with(k, v.clone()))
    };
    let single = [
        (
            "linear qkv 257x384 * 1152x384",
            Op::Linear,
            none.clone(),
            vec![&[1, 257, 384][..], &[1152, 384], &[1152]],
        ),
        (
            "linear proj 257x384 * 384x384",
            Op::Linear,
            none.clone(),
            vec![&[1, 257, 384][..], &[384, 384], &[384]],
        ),
        (
            "linear fc1 257x384 * 1536x384",
            Op::Linear,
            none.clone(),
            vec![&[1, 257, 384][..], &[1536, 384], &[1536]],
        ),
        (
            "linear fc2 257x1536 * 384x1536",
            Op::Linear,
            none.clone(),
            vec![&[1, 257, 1536][..], &[384, 1536], &[384]],
        ),
        (
            "gelu 257x1536",
            Op::Gelu,
            none.clone(),
            vec![&[257, 1536][..]],
        ),
        (
            "layer_norm 257x384",
            Op::LayerNorm,
            attrs(&[("eps", AttrValue::Float(1e-6))]),
            vec![&[1, 257, 384][..], &[384], &[384]],
        ),
        (
            "softmax 6x257x257",
            Op::Softmax,
            attrs(&[("axis", AttrValue::Int(-1))]),
            vec![&[6, 257, 257][..]],
        ),
        (
            "sdpa 6x257x64",
            Op::Sdpa,
            attrs(&[("scale", AttrValue::Float(0.125))]),
            vec![&[1, 6, 257, 64][..], &[1, 6, 257, 64], &[1, 6, 257, 64]],
        ),
        (
            "permute qkv [2,0,3,1,4]",
            Op::Permute,
            attrs(&[("perm", AttrValue::Ints(vec![2, 0, 3, 1, 4]))]),
            vec![&[1, 257, 3, 6, 64][..]],
        ),
        (
            "crop q of qkv",
            Op::Crop,
            attrs(&[
                ("offsets", AttrValue::Ints(vec![0; 5])),
                ("sizes", AttrValue::Ints(vec![1, 1, 6, 257, 64])),
            ]),
            vec![&[3, 1, 6, 257, 64][..]],
        ),
        (
            "reshape 257x1152",
            Op::Reshape,
            attrs(&[("shape", AttrValue::Ints(vec![1, 257, 3, 6, 64]))]),
            vec![&[1, 257, 1152][..]],
        ),
        (
            "add 257x384",
            Op::Add,
            none.clone(),
            vec![&[1, 257, 384][..], &[1, 257, 384]],
        ),
        (
            "resize_pil_bicubic 300x400x3 to 256x341",
            Op::ResizePilBicubic,
            attrs(&[("size", AttrValue::Ints(vec![256, 341]))]),
            vec![&[300, 400, 3][..]],
        ),
        (
            "add of one element (the cost of a call)",
            Op::Add,
            none.clone(),
            vec![&[1][..], &[1]],
        ),
    ];
    let single_ms: serde_json::Map<String, serde_json::Value> = single
        .iter()
        .map(|(label, op, a, shapes)| {
            let ms = one_op(&device, float, (*op, a, shapes), rounds.max(200));
            (label.to_string(), ms.into())
        })
        .collect();
    let medians = |m: BTreeMap<String, Vec<Duration>>| -> serde_json::Map<_, _> {
        m.into_iter().map(|(k, v)| (k, median(v).into())).collect()
    };
    let report = serde_json::json!({
        "rounds": rounds,
        "dtype": float.map_or("float32", DType::name),
        "materialise_ms": materialise.as_secs_f64() * 1e3,
        "regenerate_ms": regenerate.as_secs_f64() * 1e3,
        "forward_ms": median(totals),
        "model_ms": median(models),
        "first_stage": first,
        "stages_ms": medians(per_stage),
        "ops_per_forward_ms": medians(per_op.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        "single_op_ms": single_ms,
    });
    println!("{report}");
}
