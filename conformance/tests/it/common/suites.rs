//! A committed suite run on the reference providers built beside the test
//! program: what the component tests (trellis_flow.rs, trellis_slat.rs)
//! share.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::document::GraphNode;
use vips_sdk::error_model;
use vips_sdk::reference_cache::ReferenceCache;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{DType, Device, HostTensor, Provider};

pub const ALL_TIERS: [Tier; 3] = [Tier::Fp32, Tier::Fp16, Tier::Bf16];

/// The runner's defaults, with the reference cache this test program's
/// build keeps in `target/tmp` (golden-fed references computed once for
/// every provider, mode and test that judges the same files at a tier),
/// bounded at 512 MiB: most suites of the tests are drawn afresh and never
/// read back.
pub fn options() -> RunOptions {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reference-cache");
    RunOptions {
        reference_cache: ReferenceCache::for_this_build(&dir, 512 << 20),
        ..RunOptions::default()
    }
}

pub fn suite(name: &str) -> Suite {
    Suite::open(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(name),
    )
    .unwrap()
}

pub fn device(path: &str) -> Device {
    Provider::open(Path::new(path)).unwrap().device(0).unwrap()
}

/// A provider built beside this test program (a dev-dependency).
pub fn built(name: &str) -> Device {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    Provider::open(dir.join(vips_sdk::library_file_name(name)))
        .unwrap()
        .device(0)
        .unwrap()
}

/// `suite` on `provider`, judged against the CPU reference.
pub fn run(
    suite: &Suite,
    provider: &Device,
    mode: Mode,
    tiers: &[Tier],
    differential: bool,
) -> runner::RunReport {
    let options = RunOptions {
        mode,
        tiers: tiers.to_vec(),
        differential,
        ..options()
    };
    runner::run(suite, provider, &built("cpu"), &options).unwrap()
}

/// Every stage (and differential record, and end-to-end output) passed, and
/// every tier judged `stages` stages.
pub fn assert_passes(r: &runner::RunReport, what: &str, stages: usize) {
    let bad: Vec<String> = r
        .tiers
        .iter()
        .flat_map(|t| {
            t.stages
                .iter()
                .chain(&t.differential)
                .filter(|s| s.status != Status::Pass)
                .map(move |s| {
                    format!(
                        "{} {} {:?}: {:?}",
                        t.tier.name(),
                        s.stage,
                        s.round,
                        s.reason
                    )
                })
        })
        .chain(r.tiers.iter().flat_map(|t| {
            t.end_to_end
                .iter()
                .filter(|e| !e.passed)
                .map(move |e| format!("{} end to end {}", t.tier.name(), e.tensor))
        }))
        .collect();
    assert!(r.passed && bad.is_empty(), "{what}: {bad:#?}");
    for t in &r.tiers {
        assert_eq!(t.stages.len(), stages, "{what} {}", t.tier.name());
    }
}

/// The committed `suite.golden` of `name` is what `generate` computes.
pub fn assert_golden_is_generated(name: &str) {
    let s = suite(name);
    let fresh = vips_sdk::generate::generate(&s.document, &built("cpu"), &[]).unwrap();
    let committed = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(name)
            .join("suite.golden"),
    )
    .unwrap();
    assert!(
        fresh == committed,
        "suite.golden differs from `vips-conformance generate {name}`"
    );
}

/// A run of a wrong provider fails exactly `stages` (of its first tier), every
/// other stage passes, and each failing stage's drill-down names one of `ops`
/// (when any are given).
pub fn assert_fails_exactly(r: &runner::RunReport, what: &str, stages: &[&str], ops: &[&str]) {
    assert!(!r.passed, "{what} passed");
    let t = &r.tiers[0];
    let failed: BTreeSet<&str> = t
        .stages
        .iter()
        .filter(|s| s.status == Status::Fail)
        .map(|s| s.stage.as_str())
        .collect();
    assert_eq!(
        failed,
        stages.iter().copied().collect::<BTreeSet<_>>(),
        "{what}"
    );
    for s in t
        .stages
        .iter()
        .filter(|s| !stages.contains(&s.stage.as_str()))
    {
        assert_eq!(s.status, Status::Pass, "{what} {}: {:?}", s.stage, s.reason);
    }
    // No ops: an engine that computes the stage another way captures no
    // intermediates for the drill-down to judge.
    for s in t
        .stages
        .iter()
        .filter(|s| s.status == Status::Fail && !ops.is_empty())
    {
        let named = s.drill_down.as_ref().map(|d| d.op.as_str());
        assert!(
            named.is_some_and(|n| ops.contains(&n)),
            "{what} {}: drill-down names {named:?}, not one of {ops:?}",
            s.stage
        );
    }
}

/// How a TRELLIS port gets the model's graph wrong (the variant pitfalls
/// the document's notes name): each rewrites a stage's graph.
pub type GraphMistake = fn(graph: &mut Vec<GraphNode>);

/// An engine judged through `check` (isolated, fp32): each stage's graph,
/// after `mistake`, computed by the float64 reference from the golden inputs
/// and stored as float32, its outputs captured by name and every
/// intermediate the document also names as `NODE@STAGE` (an engine's own
/// tensors under the document's names, as PyTorch forward hooks give them).
pub fn engine_check(s: &Suite, mistake: GraphMistake) -> runner::RunReport {
    let cpu = built("cpu");
    let mut captured: HashMap<String, HostTensor> = HashMap::new();
    for stage in &s.document.stages {
        let float = Some(DType::F32);
        let params = &stage.tolerances[&Tier::Fp32];
        let mut values: HashMap<String, HostTensor> = stage
            .inputs
            .iter()
            .map(|n| (n.clone(), as_f32(s.tensor(n).unwrap().as_ref())))
            .collect();
        let mut graph = stage.graph.clone();
        mistake(&mut graph);
        for node in &graph {
            let ins: Vec<&HostTensor> = node.inputs.iter().map(|n| &values[n]).collect();
            let r =
                error_model::node_reference(node, float, &ins, DType::F32, &cpu, params).unwrap();
            values.insert(node.output.clone(), as_f32(&r.value));
        }
        for node in &stage.graph {
            if let Some(v) = values.get(&node.output) {
                let name = if stage.outputs.contains(&node.output) {
                    node.output.clone()
                } else {
                    format!("{}@{}", node.output, stage.name)
                };
                captured.insert(name, v.clone());
            }
        }
    }
    let options = RunOptions {
        mode: Mode::Isolated,
        tiers: vec![Tier::Fp32],
        ..options()
    };
    runner::check(s, &captured, "engine", &cpu, &options).unwrap()
}

/// Floats stored as float32, as an engine's float32 outputs are; integers
/// (coordinates, indices) as they are.
fn as_f32(t: &HostTensor) -> HostTensor {
    if t.spec.dtype.is_float() {
        t.cast(DType::F32)
    } else {
        t.clone()
    }
}

/// `vips-conformance run SUITE --json --no-differential EXTRA` (the
/// verdicts on the suite's own data are the point) through the mutant
/// provider (testing/mutant-provider) over provider `target`, with one
/// injected `mutation`: the exit code and the JSON report.
pub fn mutant_run(
    target: &str,
    mutation: &str,
    suite: &str,
    extra: &[&str],
) -> (Option<i32>, serde_json::Value) {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args(["run", suite, "--json", "--no-differential"])
        .args(extra)
        .arg("--provider")
        .arg(dir.join("libvsdk_mutant_provider.so"))
        .env("VSDK_PROVIDER_PATH", &dir)
        .env(
            "VSDK_MUTANT_TARGET",
            dir.join(vips_sdk::library_file_name(target)),
        )
        .env("VSDK_MUTATION", mutation)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{mutation}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), report)
}
