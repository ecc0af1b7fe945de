//! TRELLIS's sparse-structure flow transformer, quick variant
//! (`trellis-ss-flow-quick`, written by tools/make_trellis_flow_suite.py;
//! the official trellis-3d-python modules pass it: docs/validation.md): its
//! committed golden file is what `generate` computes; the CPU provider passes
//! it at every float tier in both modes (with the differential round), the
//! GPU kernel source under SIMT emulation at every tier and the C template at
//! fp32; a template computing one of its new operators wrongly fails exactly
//! the stages that use it, and drill-down names the operator; an engine
//! judged through `check` with one of a port's graph mistakes (`1 + scale`
//! as `scale`, a gated cross-attention, ...) fails at exactly the stages it
//! touches, and its captured intermediates name the operator.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::document::GraphNode;
use vips_sdk::error_model;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{AttrValue, Attrs, DType, Device, HostTensor, Op, Provider};

const SUITE: &str = "trellis-ss-flow-quick";
const ALL_TIERS: [Tier; 3] = [Tier::Fp32, Tier::Fp16, Tier::Bf16];

fn suite() -> Suite {
    Suite::open(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(SUITE),
    )
    .unwrap()
}

fn device(path: &str) -> Device {
    Provider::open(Path::new(path)).unwrap().device(0).unwrap()
}

/// A provider built beside this test program (a dev-dependency).
fn built(name: &str) -> Device {
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

fn run(provider: &Device, mode: Mode, tiers: &[Tier], differential: bool) -> runner::RunReport {
    let cpu = built("cpu");
    let options = RunOptions {
        mode,
        tiers: tiers.to_vec(),
        differential,
        ..RunOptions::default()
    };
    runner::run(&suite(), provider, &cpu, &options).unwrap()
}

/// Every stage (and differential record, and end-to-end output) passed.
fn assert_passes(r: &runner::RunReport, what: &str) {
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
        // 3 embedding stages + 2 blocks + the output layer + the sampler step.
        assert_eq!(t.stages.len(), 7, "{what} {}", t.tier.name());
    }
}

#[test]
fn the_committed_golden_file_is_what_generate_computes() {
    let s = suite();
    let fresh = vips_sdk::generate::generate(&s.document, &built("cpu"), &[]).unwrap();
    let committed = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(SUITE)
            .join("suite.golden"),
    )
    .unwrap();
    assert!(
        fresh == committed,
        "suite.golden differs from `vips-conformance generate {SUITE}`"
    );
}

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let cpu = built("cpu");
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = run(&cpu, mode, &ALL_TIERS, mode == Mode::Isolated);
        assert_passes(&r, &format!("cpu {mode:?}"));
        if mode == Mode::Chained {
            for t in &r.tiers {
                let outputs: Vec<&str> = t.end_to_end.iter().map(|e| e.tensor.as_str()).collect();
                assert_eq!(outputs, ["x_prev"], "the sampler's next latent");
            }
        }
    }
}

/// Without the differential round (the CPU test runs it): the emulated
/// kernels are slow, and the round is about replays, not arithmetic.
#[test]
fn the_gpu_kernels_under_simt_emulation_pass_at_every_tier_in_both_modes() {
    let simt = built("simt");
    for mode in [Mode::Isolated, Mode::Chained] {
        assert_passes(
            &run(&simt, mode, &ALL_TIERS, false),
            &format!("simt {mode:?}"),
        );
    }
}

#[test]
fn the_c_template_passes_at_fp32_in_both_modes() {
    let template = device(vsdk_template_c::LIBRARY_PATH);
    for mode in [Mode::Isolated, Mode::Chained] {
        assert_passes(
            &run(&template, mode, &[Tier::Fp32], false),
            &format!("template {mode:?}"),
        );
    }
}

/// The TRELLIS variant pitfalls a port hits (docs/validation.md): each
/// template mutant fails exactly the stages that use its operator, and the
/// drill-down names it.
#[test]
fn a_wrong_new_operator_fails_exactly_its_stages() {
    for (mutant, op, stages) in [
        (
            vsdk_broken_providers::MUTANT_GELU_TANH_ERF,
            "vsdk.gelu_tanh@1",
            &["block_00", "block_01"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_SIN_COS_SWAPPED,
            "vsdk.cos@1",
            &["position_embedding", "timestep_embedding"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_SILU_SIGMOID,
            "vsdk.silu@1",
            &["block_00", "block_01", "timestep_embedding"][..],
        ),
    ] {
        let r = run(&device(mutant), Mode::Isolated, &[Tier::Fp32], false);
        assert!(!r.passed, "{mutant} passed");
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
            "{mutant}"
        );
        for s in t.stages.iter().filter(|s| s.status == Status::Fail) {
            let named = s.drill_down.as_ref().map(|d| d.op.as_str());
            assert!(
                named == Some(op) || (op == "vsdk.cos@1" && named == Some("vsdk.sin@1")),
                "{mutant} {}: drill-down names {named:?}, not {op}",
                s.stage
            );
        }
    }
}

/// How a TRELLIS port gets the model's graph wrong (the variant pitfalls
/// the document's notes name): each rewrites a stage's graph.
type GraphMistake = fn(graph: &mut Vec<GraphNode>);

/// An engine judged through `check` (isolated, fp32): each stage's graph,
/// after `mistake`, computed by the float64 reference from the golden inputs
/// and stored as float32, its outputs captured by name and every
/// intermediate the document also names as `NODE@STAGE` (an engine's own
/// tensors under the document's names, as PyTorch forward hooks give them).
fn engine_check(s: &Suite, mistake: GraphMistake) -> runner::RunReport {
    let cpu = built("cpu");
    let mut captured: HashMap<String, HostTensor> = HashMap::new();
    for stage in &s.document.stages {
        let float = Some(DType::F32);
        let params = &stage.tolerances[&Tier::Fp32];
        let mut values: HashMap<String, HostTensor> = stage
            .inputs
            .iter()
            .map(|n| (n.clone(), s.tensor(n).unwrap().cast(DType::F32)))
            .collect();
        let mut graph = stage.graph.clone();
        mistake(&mut graph);
        for node in &graph {
            let ins: Vec<&HostTensor> = node.inputs.iter().map(|n| &values[n]).collect();
            let r =
                error_model::node_reference(node, float, &ins, DType::F32, &cpu, params).unwrap();
            values.insert(node.output.clone(), r.value.cast(DType::F32));
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
        ..RunOptions::default()
    };
    runner::check(s, &captured, "engine", &cpu, &options).unwrap()
}

fn node_named<'a>(graph: &'a mut [GraphNode], output: &str) -> &'a mut GraphNode {
    graph.iter_mut().find(|n| n.output == output).unwrap()
}

/// A node of `graph` reading `inputs` into `output`, placed before the node
/// that produces `before`.
fn insert_before(
    graph: &mut Vec<GraphNode>,
    before: &str,
    op: Op,
    attrs: Attrs,
    inputs: &[&str],
    output: &str,
) {
    let at = graph.iter().position(|n| n.output == before).unwrap();
    let template = graph[at].clone();
    graph.insert(
        at,
        GraphNode {
            op,
            attrs,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            output: output.into(),
            ..template
        },
    );
}

/// The graph mistakes of a TRELLIS port (DESIGN.md section 13; the
/// document's notes), each caught by `check` at exactly the stages it
/// touches, and the drill-down over the captured intermediates names the
/// first operator whose output diverges. The correct engine passes.
#[test]
fn an_engine_with_a_trellis_graph_mistake_fails_at_its_stage_and_operator() {
    let s = suite();
    let correct = engine_check(&s, |_| {});
    assert_passes_stages(&correct, "the correct engine");
    let blocks = &["block_00", "block_01"][..];
    let mistakes: [(&str, GraphMistake, &[&str], &str, &str); 6] = [
        (
            "modulation `scale` for `1 + scale`",
            |g| {
                for (scaled, scale) in [("n1_scaled", "scale_msa"), ("n3_scaled", "scale_mlp")] {
                    if let Some(n) = g.iter_mut().find(|n| n.output == scaled) {
                        n.inputs[1] = scale.into();
                        g.retain(|n| n.output != format!("{scale}_1"));
                    }
                }
            },
            blocks,
            "n1_scaled",
            "vsdk.mul@1",
        ),
        (
            "the gate applied to the cross-attention",
            |g| {
                if g.iter().any(|n| n.output == "x_cross") {
                    insert_before(
                        g,
                        "x_cross",
                        Op::Mul,
                        Attrs::new(),
                        &["cross_out", "gate_msa"],
                        "cross_gated",
                    );
                    node_named(g, "x_cross").inputs[1] = "cross_gated".into();
                }
            },
            blocks,
            "x_cross",
            "vsdk.add@1",
        ),
        (
            // TRELLIS.2 normalises q and k before its RoPE; TRELLIS v1 (this
            // model) has no RoPE: the per-head axis is what a port gets wrong.
            "q's RMSNorm over all heads' channels at once, not per head",
            |g| {
                if g.iter().any(|n| n.output == "q_normed") {
                    let q = node_named(g, "q_normed").clone();
                    let shape = |s: &[i64]| Attrs::new().with("shape", AttrValue::Ints(s.to_vec()));
                    // q_tokens is [1, tokens, heads, 64].
                    let heads_shape = node_named(g, "q_tokens").attrs.clone();
                    let Some((_, AttrValue::Ints(d))) =
                        heads_shape.0.iter().find(|(k, _)| k == "shape")
                    else {
                        panic!("q_tokens is a reshape")
                    };
                    let (tokens, channels) = (d[1], d[2] * d[3]);
                    insert_before(
                        g,
                        "q_normed",
                        Op::Reshape,
                        shape(&[1, tokens, channels]),
                        &["q_tokens"],
                        "q_flat_mistake",
                    );
                    insert_before(
                        g,
                        "q_normed",
                        Op::Reshape,
                        shape(&[channels]),
                        &[&q.inputs[1]],
                        "q_gamma_flat_mistake",
                    );
                    insert_before(
                        g,
                        "q_normed",
                        Op::RmsNorm,
                        q.attrs.clone(),
                        &["q_flat_mistake", "q_gamma_flat_mistake"],
                        "q_normed_flat_mistake",
                    );
                    let n = node_named(g, "q_normed");
                    *n = GraphNode {
                        op: Op::Reshape,
                        attrs: heads_shape.clone(),
                        inputs: vec!["q_normed_flat_mistake".into()],
                        ..n.clone()
                    };
                }
            },
            blocks,
            "q_normed",
            "vsdk.rms_norm@1",
        ),
        (
            "the MLP's GELU in its erf form, not tanh",
            |g| {
                if let Some(n) = g.iter_mut().find(|n| n.op == Op::GeluTanh) {
                    n.op = Op::Gelu;
                }
            },
            blocks,
            "hidden_act",
            "vsdk.gelu_tanh@1",
        ),
        (
            "the timestep embedding's sin first (it is cos first)",
            |g| {
                if g.iter().any(|n| n.output == "t_freq") {
                    node_named(g, "t_freq").inputs.reverse();
                }
            },
            &["timestep_embedding"][..],
            "t_freq",
            "vsdk.concat@1",
        ),
        (
            "the position embedding's cos first (it is sin first)",
            |g| {
                if g.iter().any(|n| n.output == "pos_axis") {
                    node_named(g, "pos_axis").inputs.reverse();
                }
            },
            &["position_embedding"][..],
            "pos_axis",
            "vsdk.concat@1",
        ),
    ];
    for (what, mistake, stages, output, op) in mistakes {
        let r = engine_check(&s, mistake);
        assert!(!r.passed, "{what}: passed");
        let t = &r.tiers[0];
        let failed: BTreeSet<&str> = t
            .stages
            .iter()
            .filter(|s| s.status != Status::Pass)
            .map(|s| s.stage.as_str())
            .collect();
        assert_eq!(failed, stages.iter().copied().collect(), "{what}");
        for s in t.stages.iter().filter(|s| s.status != Status::Pass) {
            assert_eq!(s.status, Status::Fail, "{what} {}: {:?}", s.stage, s.reason);
            let named = s
                .drill_down
                .as_ref()
                .map(|d| (d.output.as_str(), d.op.as_str()));
            assert_eq!(
                named,
                Some((output, op)),
                "{what} {}: the drill-down names {named:?} ({:?})",
                s.stage,
                s.drill_down_note
            );
        }
    }
}

/// Every stage of a `check` passed.
fn assert_passes_stages(r: &runner::RunReport, what: &str) {
    let bad: Vec<String> = r.tiers[0]
        .stages
        .iter()
        .filter(|s| s.status != Status::Pass)
        .map(|s| format!("{} {:?}: {:?}", s.stage, s.status, s.reason))
        .collect();
    assert!(r.passed && bad.is_empty(), "{what}: {bad:#?}");
}
