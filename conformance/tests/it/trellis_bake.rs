//! TRELLIS.2's texture bake, quick variant (`trellis-texture-bake-quick`,
//! written by tools/make_trellis_bake_suite.py): its committed golden file
//! is what `generate` computes; the CPU provider passes at every tier in both
//! modes (with the differential round and the kernel contract of both
//! raster kernels), the C template at fp32 (the reference's ids bit for
//! bit), the GPU kernels under the SIMT emulation at fp32 (8 sub-pixel bits,
//! integer edge functions), and so does a rasterizer that snaps its
//! vertices to 4 sub-pixel bits as nvdiffrast's CUDA one does, though its
//! triangle ids differ from the reference's at edges; each of a port's
//! classic mistakes fails the rasterize stage alone, with the wrong pixels
//! counted and drawn; an engine that skips the V flip fails `uv_to_clip`.

use crate::common;
use common::suites::{
    assert_fails_exactly, assert_golden_is_generated, built, engine_check, ALL_TIERS,
};
use serde_json::Value;
use vips_sdk::runner::{Mode, Status};

const SUITE: &str = "trellis-texture-bake-quick";
/// uv_to_clip, rasterize, interpolate.
const STAGES: usize = 3;

#[test]
fn the_committed_golden_file_is_what_generate_computes() {
    assert_golden_is_generated(SUITE);
}

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let (s, cpu) = (common::suites::suite(SUITE), built("cpu"));
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = common::suites::run(&s, &cpu, mode, &ALL_TIERS, mode == Mode::Isolated);
        common::suites::assert_passes(&r, &format!("cpu {mode:?}"), STAGES);
        for t in &r.tiers {
            let rast = t.stages.iter().find(|s| s.stage == "rasterize").unwrap();
            let px = rast.outputs[0].pixels.as_ref().expect("pixel counts");
            // The reference's own ids: nothing wrong; centres near the
            // atlas's edges are ambiguous, a small share of the texels.
            assert_eq!(px.pixels, 256 * 256);
            assert_eq!(px.failed(), 0, "{px:?}");
            assert!(px.ambiguous > 0 && px.ambiguous < px.pixels / 20, "{px:?}");
            if mode == Mode::Isolated {
                assert_raster_contract_passed(t);
            }
        }
    }
}

/// The plain-C vendor template computes the reference's ids bit for bit
/// (the same float64 edge functions, no fused multiply-adds).
#[test]
fn the_c_template_passes_at_fp32_in_both_modes() {
    let (s, template) = (
        common::suites::suite(SUITE),
        common::suites::device(vsdk_template_c::LIBRARY_PATH),
    );
    for mode in [Mode::Isolated, Mode::Chained] {
        let fp32 = [vips_sdk::compare::Tier::Fp32];
        let r = common::suites::run(&s, &template, mode, &fp32, mode == Mode::Isolated);
        common::suites::assert_passes(&r, &format!("template {mode:?}"), STAGES);
        // Every id the reference's, (u, v, z/w) its values rounded once.
        let stage = r.tiers[0].stages.iter().find(|s| s.stage == "rasterize");
        let rast = &stage.unwrap().outputs[0];
        assert_eq!(rast.pixels.as_ref().unwrap().failed(), 0, "{mode:?}");
        assert!(
            rast.judgement.max_e < 1e-3,
            "{mode:?}: {}",
            rast.judgement.max_e
        );
    }
}

/// The GPU kernel source under the SIMT emulation (vendors/simt) snaps
/// vertices to 8 sub-pixel bits and decides coverage with exact 64-bit
/// integer edge functions: its ids differ from the reference's only at
/// ambiguous centres, its (u, v, z/w) by what the snapping moves (a real
/// error, well inside the bound), and both kernels keep the contract.
#[test]
fn the_gpu_kernels_under_simt_emulation_pass_at_fp32_in_both_modes() {
    let (s, simt) = (common::suites::suite(SUITE), built("simt"));
    for mode in [Mode::Isolated, Mode::Chained] {
        let fp32 = [vips_sdk::compare::Tier::Fp32];
        let r = common::suites::run(&s, &simt, mode, &fp32, mode == Mode::Isolated);
        common::suites::assert_passes(&r, &format!("simt {mode:?}"), STAGES);
        let t = &r.tiers[0];
        let stage = t.stages.iter().find(|s| s.stage == "rasterize");
        let rast = &stage.unwrap().outputs[0];
        let px = rast.pixels.as_ref().expect("pixel counts");
        assert_eq!(px.pixels, 256 * 256);
        assert_eq!(px.failed(), 0, "{mode:?}: {px:?}");
        let e = rast.judgement.max_e;
        assert!(e > 0.0 && e < 0.5, "{mode:?}: max|e| {e}");
        if mode == Mode::Isolated {
            assert_raster_contract_passed(t);
        }
    }
}

/// The kernel contract ran both raster kernels' own cases, and they passed.
fn assert_raster_contract_passed(t: &vips_sdk::runner::TierReport) {
    for k in ["vsdk.rasterize@1", "vsdk.interpolate@1"] {
        let cases: Vec<_> = t
            .contract
            .iter()
            .filter(|c| c.stage.starts_with(k))
            .collect();
        assert!(cases.len() >= 4, "{k}: {} contract cases", cases.len());
        assert!(cases.iter().all(|c| c.status == Status::Pass), "{k}");
    }
}

/// The suite at fp32 through the CLI on the CPU provider with one injected
/// rasterizer (testing/mutant-provider): the exit code and the report.
fn mutated(mutation: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let args = [&["--tier", "fp32"][..], extra].concat();
    common::suites::mutant_run("cpu", mutation, SUITE, &args)
}

fn stage<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tiers"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

/// nvdiffrast's CUDA rasterizer snaps vertices to 4 sub-pixel bits: its ids
/// differ from the reference's at edges, its (u, v) by what the snapping
/// moves. dEQP's verdict accepts it, in both modes.
#[test]
fn a_rasterizer_that_snaps_to_4_subpixel_bits_passes() {
    for mode in ["isolated", "chained"] {
        let (code, report) = mutated("raster_snapped", &["--mode", mode]);
        let rast = stage(&report, "rasterize");
        assert_eq!(code, Some(0), "{mode}: {rast:#}");
        let o = &rast["outputs"][0];
        assert_eq!(o["pixels"]["missing"], 0);
        // Not the reference's bits: the error is real and inside the bound.
        assert!(o["judgement"]["max_e"].as_f64().unwrap() > 0.0, "{o:#}");
    }
}

/// A port's classic mistakes (docs/operators.md, vsdk.rasterize's pitfalls):
/// each fails the rasterize stage alone (the other two are fed golden
/// inputs), says how many texels are wrong and where (an image).
#[test]
fn a_rasterizer_port_mistake_fails_the_rasterize_stage_with_its_pixels_counted() {
    for (mutation, wrong_ids) in [
        ("raster_rows_top_down", true),
        ("raster_ids_from_zero", true),
        ("raster_half_pixel", true),
        ("raster_cull_back", true),
        ("raster_uv_swapped", false),
    ] {
        let (code, report) = mutated(mutation, &[]);
        assert_eq!(code, Some(1), "{mutation} must fail");
        for s in ["uv_to_clip", "interpolate"] {
            assert_eq!(stage(&report, s)["status"], "pass", "{mutation}: {s}");
        }
        let rast = stage(&report, "rasterize");
        assert_eq!(rast["status"], "fail", "{mutation}");
        let o = &rast["outputs"][0];
        let px = &o["pixels"];
        let failed: u64 = ["missing", "unexpected", "wrong"]
            .iter()
            .map(|k| px[k].as_u64().unwrap())
            .sum();
        if wrong_ids {
            assert!(failed > 100, "{mutation}: {px}");
        } else {
            // Every id right, the barycentrics not.
            assert_eq!(failed, 0, "{mutation}: {px}");
        }
        if mutation == "raster_cull_back" {
            // The V flip turns every chart clockwise: nothing is drawn.
            assert!(px["missing"].as_u64().unwrap() > 10_000, "{px}");
        }
        assert!(
            o["judgement"]["over_bound"].as_u64().unwrap() > 0,
            "{mutation}"
        );
        let layout = &o["error_map"]["layout"];
        assert_eq!(layout["kind"], "image", "{mutation}: {layout}");
        assert_eq!(layout["height"], 256, "{mutation}: {layout}");
    }
}

/// TRELLIS.2 flips V before rasterizing and again in the exported mesh: an
/// engine that skips the first flip (or does it twice, the same thing)
/// fails `uv_to_clip`, whose captured intermediates name the operator that
/// diverges first; the stages after it are fed golden inputs and pass.
#[test]
fn an_engine_without_the_v_flip_fails_uv_to_clip() {
    let s = common::suites::suite(SUITE);
    assert!(engine_check(&s, |_| {}).passed, "the correct engine failed");
    let r = engine_check(&s, |g| {
        g.retain(|n| n.output != "v_flipped");
        if let Some(n) = g.iter_mut().find(|n| n.output == "v2") {
            n.inputs[0] = "v".into();
        }
    });
    assert_fails_exactly(&r, "no V flip", &["uv_to_clip"], &["vsdk.mul@1"]);
}
