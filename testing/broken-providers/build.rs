//! Builds c/fixture.c once per way of being broken (see the comment there),
//! and the mutants of the C template.

use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: &[(&str, &str)] = &[
    ("working", ""),
    ("no_entry", "-DFIXTURE_NO_ENTRY"),
    ("wrong_abi", "-DFIXTURE_ABI=99"),
    ("null_execute", "-DFIXTURE_NULL_EXECUTE"),
    ("short_table", "-DFIXTURE_SHORT_TABLE"),
    ("kernel_fails", "-DFIXTURE_KERNEL_FAILS"),
    ("create_fails", "-DFIXTURE_CREATE_FAILS"),
    ("bad_version", "-DFIXTURE_BAD_VERSION"),
];

/// Variants of the real C template with one deliberate bug each.
const MUTANTS: &[(&str, &str)] = &[
    ("gelu_tanh", "c/mutant_gelu_tanh.c"),
    ("silu_sigmoid", "c/mutant_silu_sigmoid.c"),
    ("gelu_tanh_erf", "c/mutant_gelu_tanh_erf.c"),
    ("sin_cos_swapped", "c/mutant_sin_cos_swapped.c"),
    ("trig_f32_2pi", "c/mutant_trig_f32_2pi.c"),
    (
        "sparse_offsets_x_fastest",
        "c/mutant_sparse_offsets_x_fastest.c",
    ),
    (
        "sparse_weight_transposed",
        "c/mutant_sparse_weight_transposed.c",
    ),
    (
        "sparse_boundary_dropped",
        "c/mutant_sparse_boundary_dropped.c",
    ),
    ("segment_sum", "c/mutant_segment_sum.c"),
    ("gather_next_row", "c/mutant_gather_next_row.c"),
    ("relu_fmaxf", "c/mutant_relu_fmaxf.c"),
    ("hardsigmoid_keras", "c/mutant_hardsigmoid_keras.c"),
    ("sigmoid_overflowing", "c/mutant_sigmoid_overflowing.c"),
    ("tanh_overflowing", "c/mutant_tanh_overflowing.c"),
    ("batch_norm_eps", "c/mutant_batch_norm_eps.c"),
    ("pool_ceil_ignored", "c/mutant_pool_ceil_ignored.c"),
    ("pool_window_shifted", "c/mutant_pool_window_shifted.c"),
    (
        "avg_pool_overhang_counted",
        "c/mutant_avg_pool_overhang_counted.c",
    ),
    ("avg_pool_pad_excluded", "c/mutant_avg_pool_pad_excluded.c"),
    ("adaptive_bins_rounded", "c/mutant_adaptive_bins_rounded.c"),
    ("sdpa_gqa_modulo", "c/mutant_sdpa_gqa_modulo.c"),
    ("sdpa_causal_one_off", "c/mutant_sdpa_causal_one_off.c"),
    ("rotary_layout_swapped", "c/mutant_rotary_layout_swapped.c"),
    ("crop_step_ignored", "c/mutant_crop_step_ignored.c"),
    ("pad_reflect_symmetric", "c/mutant_pad_reflect_symmetric.c"),
    (
        "bilinear_corners_flipped",
        "c/mutant_bilinear_corners_flipped.c",
    ),
    (
        "nearest_centres_flipped",
        "c/mutant_nearest_centres_flipped.c",
    ),
    ("group_norm_unbiased", "c/mutant_group_norm_unbiased.c"),
    ("matmul_batch_first", "c/mutant_matmul_batch_first.c"),
];

/// Compiles `source` (plus `extra` flags) into `OUT_DIR/lib<stem>.so` and
/// exports its path to the crate as `env`.
fn shared_library(out_dir: &Path, stem: &str, env: &str, source: &str, extra: &[&str]) {
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let lib = out_dir.join(format!("lib{stem}{}", std::env::consts::DLL_SUFFIX));
    let status = Command::new(compiler.path())
        .args(["-std=c99", "-O1", "-fPIC", "-shared", "-fvisibility=hidden"])
        .args(["-Wall", "-Wextra", "-Werror", "-Wno-unused-function"])
        .args(["-I", "../../include", "-I", "../../vendors/template-c"])
        .args(extra.iter().filter(|f| !f.is_empty()))
        .args([source, "-lm", "-o"])
        .arg(&lib)
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the C compiler {}: {e}",
                compiler.path().display()
            )
        });
    assert!(status.success(), "{stem} failed to compile");
    println!("cargo:rustc-env={env}={}", lib.display());
    println!("cargo:rerun-if-changed={source}");
}

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (name, define) in FIXTURES {
        let env = format!("VSDK_FIXTURE_{}", name.to_uppercase());
        shared_library(
            &out_dir,
            &format!("vsdk_fixture_{name}"),
            &env,
            "c/fixture.c",
            &[define],
        );
    }
    for (name, source) in MUTANTS {
        let env = format!("VSDK_MUTANT_{}", name.to_uppercase());
        shared_library(&out_dir, &format!("vsdk_mutant_{name}"), &env, source, &[]);
    }
    println!("cargo:rerun-if-changed=../../vendors/template-c/template.c");
    println!("cargo:rerun-if-changed=../../include/vips_sdk/provider.h");
}
