//! VIPS documents: the demo suite loads; every kind of mistake gives
//! file:line:column, the field path and the cause.

use crate::common;
/// Weights pinned by reference (a module here: one test binary per theme, not per file).
mod pinned_weights;
use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::document::*;
use vips_sdk::error_model::{EndToEnd, TierParams};
use vips_sdk::Op;

const DEMO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../conformance/suites/demo-mlp/suite.yaml"
);

fn demo_text() -> String {
    std::fs::read_to_string(DEMO).unwrap()
}

fn parse_err(text: &str) -> String {
    match Document::parse(Path::new("doc.yaml"), text) {
        Ok(_) => panic!("parsed"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_demo_suite_loads() {
    let d = Document::open(DEMO).unwrap();
    assert_eq!(
        (d.component.id.as_str(), d.component.version.as_str()),
        ("demo-mlp", "0.1.0")
    );
    assert_eq!(d.stages.len(), 3);
    let s = &d.stages[0];
    assert_eq!(
        s.graph.iter().map(|n| n.op).collect::<Vec<_>>(),
        vec![Op::Linear, Op::Gelu]
    );
    assert_eq!(
        s.tolerances[&Tier::Fp32],
        TierParams::default_for(Tier::Fp32)
    );
    // A document's entry overrides the defaults field by field: fp16 sets
    // only end_to_end.rel_l2, so its cosine is the SDK's default.
    let fp16 = s.tolerances[&Tier::Fp16];
    let default16 = TierParams::default_for(Tier::Fp16);
    assert_eq!(
        fp16.end_to_end,
        EndToEnd {
            rel_l2: 2e-2,
            cosine: default16.end_to_end.cosine
        }
    );
    assert_eq!(s.tolerances[&Tier::Bf16].end_to_end.cosine, 0.995);
    assert_eq!(d.stages[2].verify.len(), 3);
    assert_eq!(d.tensor("w1").unwrap().shape, Some(vec![32, 16]));
    assert_eq!(d.stages[1].at.line, 45);
}

#[test]
fn a_stage_overrides_one_field_and_keeps_the_rest() {
    let text = demo_text().replace(
        "    inputs: [h, gamma, beta]\n",
        "    inputs: [h, gamma, beta]\n    tolerances: { fp16: { bias_z: 4.0 } }\n",
    );
    let d = Document::parse(Path::new("doc.yaml"), &text).unwrap();
    let (doc_level, stage) = (
        d.stages[0].tolerances[&Tier::Fp16],
        d.stages[1].tolerances[&Tier::Fp16],
    );
    assert_eq!(stage.bias_z, 4.0);
    assert_eq!(
        (stage.lambda, stage.end_to_end, stage.lsb),
        (doc_level.lambda, doc_level.end_to_end, doc_level.lsb)
    );
}

#[test]
fn a_stage_precision_pins_its_arithmetic_at_every_float_tier() {
    let text = demo_text().replace(
        "    inputs: [h, gamma, beta]\n",
        "    inputs: [h, gamma, beta]\n    precision: float32\n",
    );
    let d = Document::parse(Path::new("doc.yaml"), &text).unwrap();
    let (plain, pinned) = (&d.stages[0], &d.stages[1]);
    for tier in [Tier::Fp32, Tier::Fp16, Tier::Bf16] {
        assert_eq!(plain.arithmetic(tier), tier);
        assert_eq!(pinned.arithmetic(tier), Tier::Fp32);
    }
    // The exact tier keeps the document's dtypes either way.
    assert_eq!(pinned.arithmetic(Tier::Exact), Tier::Exact);
    let e = parse_err(&text.replace("precision: float32", "precision: float64"));
    assert!(
        e.contains("doc.yaml:")
            && e.contains("precision")
            && e.contains("`float64`: expected float32, float16 or bfloat16"),
        "{e}"
    );
}

/// `layout.tokens` reaches every stage (error maps draw tokens on it); a
/// grid of the wrong rank, a zero side or an absurd size is located.
#[test]
fn a_token_grid_reaches_every_stage_and_is_checked() {
    let with = |grid: &str| {
        demo_text().replace(
            "\nstages:",
            &format!("\nlayout:\n  tokens: {grid}\nstages:"),
        )
    };
    let d = Document::parse(
        Path::new("doc.yaml"),
        &with("{ prefix: 1, grid: [4, 2, 3] }"),
    )
    .unwrap();
    for s in &d.stages {
        assert_eq!(
            s.token_grid,
            Some(vips_sdk::error_map::TokenGrid {
                prefix: 1,
                grid: [4, 2, 3]
            }),
            "{}",
            s.name
        );
    }
    let flat = Document::parse(Path::new("doc.yaml"), &with("{ grid: [5, 7] }")).unwrap();
    assert_eq!(
        flat.stages[0].token_grid.map(|g| (g.prefix, g.grid)),
        Some((0, [1, 5, 7]))
    );
    assert_eq!(Document::open(DEMO).unwrap().stages[0].token_grid, None);
    for (grid, says) in [
        ("{ grid: [16] }", "expected 2 or 3 sides"),
        ("{ grid: [4, 0, 4] }", "expected 2 or 3 sides"),
        ("{ grid: [65536, 65536, 65536] }", "tokens is more than"),
        ("{ grid: [4, 4], depth: 2 }", "Unknown field `depth`"),
    ] {
        let e = parse_err(&with(grid));
        assert!(e.contains("doc.yaml:") && e.contains(says), "{grid}: {e}");
    }
}

#[test]
fn a_yaml_syntax_error_points_at_the_line() {
    let text = demo_text().replace("  - stage: layer_norm", "  - stage: [layer_norm");
    let e = parse_err(&text);
    assert!(e.starts_with("doc.yaml:"), "{e}");
    assert!(e.contains("YAML syntax error"), "{e}");
}

#[test]
fn an_unknown_operator_is_located() {
    let text = demo_text().replace("{ op: vsdk.gelu,", "{ op: vsdk.gelu_fast,");
    let e = parse_err(&text);
    assert!(
        e.starts_with("doc.yaml:38:15: stages[0].graph[1].op: unknown kernel `vsdk.gelu_fast@1`"),
        "{e}"
    );
}

#[test]
fn every_unknown_kernel_is_named_at_once() {
    // Three unknown kernels in two stages (the first and the last).
    let text = demo_text()
        .replace("{ op: vsdk.gelu,", "{ op: vsdk.gelu_fast,")
        .replace(
            "{ op: vsdk.linear, inputs: [n, w2, b2]",
            "{ op: vsdk.dense, inputs: [n, w2, b2]",
        )
        .replace("{ op: vsdk.softmax,", "{ op: vsdk.softmax@2,");
    let e = Document::parse(Path::new("doc.yaml"), &text).unwrap_err();
    assert_eq!(e.also.len(), 2, "{e}");
    let shown = e.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "{shown}");
    let wanted = [
        (
            "stages[0].graph[1].op",
            "`vsdk.gelu_fast@1` in stage `fc1_gelu` (node 1, output `h`",
        ),
        (
            "stages[2].graph[0].op",
            "`vsdk.dense@1` in stage `head` (node 0, output `logits`)",
        ),
        (
            "stages[2].graph[1].op",
            "`vsdk.softmax@2` in stage `head` (node 1, output `p`)",
        ),
    ];
    for (line, (path, kernel)) in lines.iter().zip(wanted) {
        // file:line:column: path: message, on every line.
        let parts: Vec<&str> = line.splitn(5, ": ").collect();
        let place: Vec<&str> = parts[0].split(':').collect();
        assert_eq!(place[0], "doc.yaml", "{line}");
        assert!(place[1].parse::<usize>().unwrap() > 0, "{line}");
        assert!(place[2].parse::<usize>().unwrap() > 0, "{line}");
        assert_eq!(parts[1], path, "{line}");
        assert!(
            parts[2].starts_with(&format!("unknown kernel {kernel}")),
            "{line}"
        );
    }
    // What the catalog knows is said once.
    assert_eq!(shown.matches("catalog v1 knows").count(), 1, "{shown}");
}

#[test]
fn an_intermediate_may_not_stand_for_a_declared_tensor() {
    // `head` names its intermediate `h`, the declared output of `fc1_gelu`.
    let text = demo_text()
        .replace("outputs: [logits] }", "outputs: [h] }")
        .replace(
            "inputs: [logits], outputs: [p]",
            "inputs: [h], outputs: [p]",
        );
    let e = parse_err(&text);
    assert!(
        e.contains("stages[2].graph[0].outputs[0]: `h` is a declared tensor but not an output of this stage"),
        "{e}"
    );
}

#[test]
fn a_reference_to_a_missing_tensor_is_located() {
    let text = demo_text().replace("inputs: [n, w2, b2]", "inputs: [n, w3, b2]");
    let e = parse_err(&text);
    assert_eq!(
        e,
        "doc.yaml:61:17: stages[2].inputs[1]: tensor `w3` is not declared in `tensors` nor produced before this point"
    );
}

#[test]
fn a_wrong_type_and_an_unknown_field_are_located() {
    let text = demo_text().replace("shape: [32, 16]", "shape: [32, sixteen]");
    let e = parse_err(&text);
    assert!(e.starts_with("doc.yaml:14:"), "{e}");
    assert!(e.contains("tensors"), "{e}");
    let text = demo_text().replace(
        "    algorithm: \"p = softmax",
        "    algoritm: \"p = softmax",
    );
    let e = parse_err(&text);
    assert!(e.contains("Unknown field `algoritm`"), "{e}");
}

#[test]
fn semantic_mistakes_are_located() {
    let cases = [
        (
            "dtype: float32, shape: [32, 16]",
            "dtype: float33, shape: [32, 16]",
            "tensors.w1.dtype: unknown dtype `float33`",
        ),
        (
            "version: 0.1.0",
            "version: 0.1",
            "component.version: `0.1` is not a semantic version",
        ),
        (
            "  fp16: { lambda: 6.0,",
            "  fp8: { lambda: 6.0,",
            "tolerances.fp8: unknown tier `fp8`",
        ),
        (
            "  fp32: { lambda: 6.0 }",
            "  fp32: { lambda: -1.0 }",
            "tolerances.fp32: lambda must be finite and > 0, got -1",
        ),
        (
            "  fp32: { lambda: 6.0 }",
            "  fp32: { rtol: 1.0e-5 }",
            "Unknown field `rtol`, expected one of `lambda`, `bias_z`, `bias_ratio`, `rms_factor`, `lsb`, `subpixel_bits`, or `end_to_end`",
        ),
        (
            "outputs: [logits] }",
            "outputs: [n] }",
            "stages[2].graph[0].outputs[0]: `n` is already defined",
        ),
        (
            "tensor: p, axis: -1",
            "tensor: logits, axis: -1",
            "stages[2].verify[0]: `logits` is not an output of this stage",
        ),
        (
            "vips: 1",
            "vips: 2",
            "vips: schema version 2 is not supported",
        ),
    ];
    for (from, to, want) in cases {
        let text = demo_text().replacen(from, to, 1);
        assert_ne!(text, demo_text(), "{from}");
        let e = parse_err(&text);
        assert!(e.contains(want), "{e}\nwanted: {want}");
        let loc: Vec<&str> = e.splitn(4, ':').collect();
        assert!(
            loc[1].parse::<usize>().unwrap() > 0 && loc[2].parse::<usize>().unwrap() > 0,
            "{e}"
        );
    }
}

fn model_doc(sha: &str) -> String {
    common::model_doc(sha, DEMO)
}

#[test]
fn composition_pins_the_used_document_by_hash() {
    use sha2::Digest;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compose");
    std::fs::create_dir_all(&dir).unwrap();
    let good = hex::encode(sha2::Sha256::digest(demo_text().as_bytes()));
    std::fs::write(dir.join("model.yaml"), model_doc(&good)).unwrap();
    let d = Document::open(dir.join("model.yaml")).unwrap();
    assert_eq!(d.uses[0].component, "demo-mlp");
    // Another hash: the last hex digit changed (to a different one).
    let last = if good.ends_with('0') { "1" } else { "0" };
    let bad = format!("{}{last}", &good[..63]);
    std::fs::write(dir.join("stale.yaml"), model_doc(&bad)).unwrap();
    let e = Document::open(dir.join("stale.yaml"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("stale.yaml:4:") && e.contains("uses[0]: ") && e.contains("this document pins"),
        "{e}"
    );
}

#[test]
fn a_golden_file_that_disagrees_with_the_document_is_located() {
    use vips_sdk::golden::GoldenWriter;
    use vips_sdk::HostTensor;
    let text = demo_text();
    let doc = Document::parse(Path::new("suite.yaml"), &text).unwrap();
    let mut w = GoldenWriter::new("demo-mlp", "0.1.0", doc.sha256);
    for t in &doc.tensors {
        let shape = t.shape.clone().unwrap();
        match &t.source {
            TensorSource::Seeded(s) => {
                w.seeded(&t.name, t.dtype, &shape, *s).unwrap();
            }
            _ => {
                // `h` stored with one column too few.
                let shape = if t.name == "h" { vec![4, 31] } else { shape };
                let n: usize = shape.iter().product();
                w.raw(
                    &t.name,
                    &HostTensor::from_vec(&shape, vec![0.25f32; n]).unwrap(),
                );
            }
        }
    }
    let golden =
        vips_sdk::golden::GoldenFile::from_bytes(Path::new("suite.golden"), w.to_bytes().unwrap())
            .unwrap();
    let e = vips_sdk::suite::Suite::new(doc, golden)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(e, "suite.yaml:20:3: tensor `h` is declared float32 [4, 32] but suite.golden holds float32 [4, 31]");
}

#[test]
fn the_format_page_shows_the_demo_document_verbatim() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/vips-format.md"
    ))
    .unwrap();
    let example = page
        .split("```yaml\n")
        .last()
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    assert_eq!(
        example,
        demo_text(),
        "docs/vips-format.md's complete example has drifted from the demo suite"
    );
}

#[test]
fn committed_documents_write_floats_that_yaml_1_1_reads_as_floats() {
    // YAML 1.1 (PyYAML) reads `1e-06` as a string: its float pattern needs a
    // dot before the exponent.
    let suites = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/suites");
    let mut checked = 0;
    for entry in std::fs::read_dir(suites).unwrap() {
        let doc = entry.unwrap().path().join("suite.yaml");
        let text = std::fs::read_to_string(&doc).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split('#').next().unwrap_or("");
            let code = code.split('"').step_by(2).collect::<String>(); // outside strings
            for token in code.split(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c))) {
                let Some((mantissa, exp)) = token.split_once(['e', 'E']) else {
                    continue;
                };
                let numeric = !mantissa.is_empty()
                    && mantissa
                        .trim_start_matches(['-', '+'])
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '.')
                    && exp
                        .trim_start_matches(['-', '+'])
                        .chars()
                        .all(|c| c.is_ascii_digit())
                    && !exp.trim_start_matches(['-', '+']).is_empty();
                if numeric {
                    checked += 1;
                    assert!(
                        mantissa.contains('.'),
                        "{}:{}: `{token}`",
                        doc.display(),
                        n + 1
                    );
                }
            }
        }
    }
    assert!(checked > 10, "the suites write exponents: {checked}");
}
