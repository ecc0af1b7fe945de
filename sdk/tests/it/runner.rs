//! The runner on the demo suite: both providers pass in both modes; a
//! template with one wrong operator fails exactly the stage that uses it and
//! drill-down names the operator; missing kernels are NOT SUPPORTED; filters
//! and shards select deterministically.

use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{Device, Provider};

fn demo() -> Suite {
    Suite::open(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/suites/demo-mlp"
    )))
    .unwrap()
}

fn device(path_or_name: &str) -> Device {
    Provider::open_by_name(path_or_name)
        .unwrap()
        .device(0)
        .unwrap()
}

fn opts(mode: Mode, tiers: &[Tier]) -> RunOptions {
    RunOptions {
        mode,
        tiers: tiers.to_vec(),
        ..crate::common::suites::options()
    }
}

#[test]
fn cpu_and_template_pass_in_both_modes() {
    let suite = demo();
    let cpu = device("cpu");
    for dev in [device("cpu"), device(vsdk_template_c::LIBRARY_PATH)] {
        for mode in [Mode::Isolated, Mode::Chained] {
            let r = runner::run(&suite, &dev, &cpu, &opts(mode, &[Tier::Fp32])).unwrap();
            let statuses: Vec<Status> = r.tiers[0].stages.iter().map(|s| s.status).collect();
            assert!(r.passed, "{} {mode:?}: {statuses:?}", r.provider);
            assert_eq!(statuses.len(), 3);
            assert!(r.tiers[0].first_divergent_stage.is_none());
        }
    }
    // The CPU provider also passes the reduced-precision tiers.
    let r = runner::run(
        &suite,
        &cpu,
        &cpu,
        &opts(Mode::Isolated, &[Tier::Fp16, Tier::Bf16]),
    )
    .unwrap();
    assert!(
        r.passed,
        "{:?}",
        r.tiers
            .iter()
            .flat_map(|t| t.stages.iter().map(|s| (s.tier, s.status)))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_wrong_gelu_fails_its_stage_and_drill_down_names_it() {
    let suite = demo();
    let (cpu, mutant) = (
        device("cpu"),
        device(vsdk_broken_providers::MUTANT_GELU_TANH),
    );
    let r = runner::run(&suite, &mutant, &cpu, &opts(Mode::Isolated, &[Tier::Fp32])).unwrap();
    let stages = &r.tiers[0].stages;
    assert_eq!(
        stages.iter().map(|s| s.status).collect::<Vec<_>>(),
        vec![Status::Fail, Status::Pass, Status::Pass]
    );
    let d = stages[0].drill_down.as_ref().expect("drill-down ran");
    assert_eq!(
        (d.node, d.op.as_str(), d.output.as_str()),
        (1, "vsdk.gelu@1", "h")
    );
    // The tanh form is off by up to ~5e-4: far outside GELU's bound of a few
    // float32 ulps.
    let j = &d.judgement;
    assert!(
        j.max_abs_error > 1e-5 && j.max_abs_error < 1e-3 && j.max_e > 10.0,
        "{j:?}"
    );
    assert!(!r.passed);
    // Chained: the first divergent stage is named, and later stages blame it.
    let r = runner::run(&suite, &mutant, &cpu, &opts(Mode::Chained, &[Tier::Fp32])).unwrap();
    assert_eq!(
        r.tiers[0].first_divergent_stage.as_deref(),
        Some("fc1_gelu")
    );
    let later = &r.tiers[0].stages[1];
    if later.status != Status::Pass {
        assert_eq!(
            later.drill_down_note.as_deref(),
            Some("its inputs come from `fc1_gelu`, which already diverged")
        );
    }
}

#[test]
fn missing_kernels_are_not_supported_and_block_certification() {
    let suite = demo();
    let template = device(vsdk_template_c::LIBRARY_PATH);
    let r = runner::run(
        &suite,
        &template,
        &device("cpu"),
        &opts(Mode::Isolated, &[Tier::Fp16]),
    )
    .unwrap();
    for s in &r.tiers[0].stages {
        assert_eq!(s.status, Status::NotSupported, "{}", s.stage);
        assert!(
            s.reason
                .as_deref()
                .unwrap()
                .starts_with("the provider lacks vsdk."),
            "{:?}",
            s.reason
        );
    }
    assert!(!r.passed);
}

#[test]
fn stage_globs_and_shards_select_deterministically() {
    let suite = demo();
    let glob = |g: &str| Some(globset::Glob::new(g).unwrap().compile_matcher());
    let names = |o: &RunOptions| {
        runner::select(&suite, o)
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&RunOptions {
            stage_glob: glob("*norm*"),
            ..RunOptions::default()
        }),
        vec!["layer_norm"]
    );
    let shard = |k| {
        names(&RunOptions {
            shard: Some((k, 2)),
            ..RunOptions::default()
        })
    };
    assert_eq!(shard(1), vec!["fc1_gelu", "head"]);
    assert_eq!(shard(2), vec!["layer_norm"]);
}

#[test]
fn a_stage_kernel_runs_fused_when_the_provider_has_it() {
    use vips_sdk::golden::GoldenFile;
    let text = r#"vips: 1
component: { id: fused-demo, version: 0.1.0, title: "one GELU stage with a fused kernel" }
tensors:
  a: { dtype: float32, shape: [3, 5], source: { seeded: { seed: 7, normal: [0.0, 2.0] } } }
  y: { dtype: float32, shape: [3, 5], source: golden }
stages:
  - stage: act
    algorithm: "y = GELU(a)"
    impl: "torch.nn.GELU()"
    inputs: [a]
    outputs: [y]
    kernel: test.fused_gelu@1
    graph:
      - { op: vsdk.gelu, inputs: [a], outputs: [y] }
"#;
    let doc = vips_sdk::document::Document::parse(Path::new("fused.yaml"), text).unwrap();
    let cpu = device("cpu");
    let bytes = vips_sdk::generate::generate(&doc, &cpu, &[]).unwrap();
    let suite = Suite::new(
        doc,
        GoldenFile::from_bytes(Path::new("fused.golden"), bytes).unwrap(),
    )
    .unwrap();
    let fixture = device(vsdk_broken_providers::WORKING);
    let r = runner::run(&suite, &fixture, &cpu, &crate::common::suites::options()).unwrap();
    let s = &r.tiers[0].stages[0];
    assert_eq!(
        (s.status, s.execution),
        (Status::Pass, Some(runner::Execution::Fused))
    );
    // The CPU provider has no such kernel: it runs the graph.
    let r = runner::run(&suite, &cpu, &cpu, &crate::common::suites::options()).unwrap();
    assert_eq!(
        r.tiers[0].stages[0].execution,
        Some(runner::Execution::Decomposed)
    );
}

/// Graph intermediates are local to their stage (docs/vips-format.md,
/// "Graph intermediates are not declared"): two stages that each name one
/// `t`, of different shapes, generate, type-check and run.
#[test]
fn two_stages_may_each_name_an_intermediate_alike() {
    use vips_sdk::golden::GoldenFile;
    let seed = rand::random::<u32>() as u64;
    eprintln!("seed {seed}");
    let text = format!(
        r#"vips: 1
component: {{ id: scoped, version: 0.1.0, title: "intermediates scoped per stage" }}
tensors:
  x:  {{ dtype: float32, shape: [4, 16], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 1.0] }} }} }}
  w1: {{ dtype: float32, shape: [32, 16], source: {{ seeded: {{ seed: {s1}, normal: [0.0, 0.3] }} }} }}
  w2: {{ dtype: float32, shape: [8, 32], source: {{ seeded: {{ seed: {s2}, normal: [0.0, 0.3] }} }} }}
  h:  {{ dtype: float32, shape: [4, 32], source: golden }}
  y:  {{ dtype: float32, shape: [4, 8], source: golden }}
stages:
  - stage: a
    algorithm: "h = GELU(x · w1ᵀ)"
    impl: "torch.nn.Linear(16, 32, bias=False) then torch.nn.GELU()"
    inputs: [x, w1]
    outputs: [h]
    graph:
      - {{ op: vsdk.linear, inputs: [x, w1], outputs: [t] }}
      - {{ op: vsdk.gelu, inputs: [t], outputs: [h] }}
  - stage: b
    algorithm: "y = GELU(h · w2ᵀ)"
    impl: "torch.nn.Linear(32, 8, bias=False) then torch.nn.GELU()"
    inputs: [h, w2]
    outputs: [y]
    graph:
      - {{ op: vsdk.linear, inputs: [h, w2], outputs: [t] }}
      - {{ op: vsdk.gelu, inputs: [t], outputs: [y] }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2
    );
    let doc = vips_sdk::document::Document::parse(Path::new("scoped.yaml"), &text).unwrap();
    let cpu = device("cpu");
    let bytes = vips_sdk::generate::generate(&doc, &cpu, &[]).unwrap();
    let suite = Suite::new(
        doc,
        GoldenFile::from_bytes(Path::new("scoped.golden"), bytes).unwrap(),
    )
    .unwrap();
    let shape = |stage: &str| suite.spec_in(stage, "t").map(|s| s.shape.clone());
    assert_eq!(shape("a"), Some(vec![4, 32]));
    assert_eq!(shape("b"), Some(vec![4, 8]));
    assert!(
        suite.spec("t").is_none(),
        "an intermediate is no suite tensor"
    );
    assert_eq!(
        suite.spec_in("b", "h").map(|s| s.shape.clone()),
        Some(vec![4, 32])
    );
    // Every GELU is found by the contract, whose input is `t` in both stages.
    let stages: Vec<_> = suite.document.stages.iter().collect();
    let needed = vips_sdk::contract::needed(&suite, &stages, Tier::Fp32);
    assert!(
        needed.iter().any(|n| n.op == vips_sdk::Op::Gelu),
        "{:?}",
        needed.iter().map(|n| n.op).collect::<Vec<_>>()
    );
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = runner::run(&suite, &cpu, &cpu, &opts(mode, &[Tier::Fp32])).unwrap();
        let statuses: Vec<Status> = r.tiers[0].stages.iter().map(|s| s.status).collect();
        assert_eq!(statuses, vec![Status::Pass; 2], "{mode:?}");
    }
    // A wrong GELU: drill-down locates it in stage `b` too, fed `b`'s `t`.
    let mutant = device(vsdk_broken_providers::MUTANT_GELU_TANH);
    let r = runner::run(&suite, &mutant, &cpu, &opts(Mode::Isolated, &[Tier::Fp32])).unwrap();
    let b = &r.tiers[0].stages[1];
    assert_eq!(b.status, Status::Fail);
    let d = b.drill_down.as_ref().expect("drill-down ran");
    assert_eq!(
        (d.node, d.op.as_str(), d.output.as_str()),
        (1, "vsdk.gelu@1", "y")
    );
}
