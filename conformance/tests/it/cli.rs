//! The `vips-conformance` binary: output and exit codes of `providers`.

/// Weights pinned by reference, through the command line.
mod pinned_weights;

use std::process::Command;

fn test_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

fn cli(args: &[&str]) -> (i32, String, String) {
    cli_env(args, &[])
}

/// `cli` with these environment variables set.
fn cli_env(args: &[&str], env: &[(&str, &std::path::Path)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args(args)
        // The CPU provider, a dev-dependency, is built beside this test program.
        .env("VSDK_PROVIDER_PATH", test_dir())
        .envs(env.iter().copied())
        .output()
        .expect("run vips-conformance");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lists_a_provider_given_by_path() {
    let (code, out, err) = cli(&["providers", "--provider", vsdk_template_c::LIBRARY_PATH]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("template-c 0.1.0 (VIPS SDK template), ABI v1"),
        "{out}"
    );
    assert!(out.contains("device 0: template-c host device"), "{out}");
    // Every kernel of the catalog.
    assert!(
        out.contains(&format!(
            "{} kernels: vsdk.adaptive_avg_pool2d@1 vsdk.add@1",
            vips_sdk::ALL_OPS.len()
        )),
        "{out}"
    );
}

/// The CUDA and HIP providers load everywhere: on a machine without their
/// device (CI) they list zero devices and say why, in the table and in JSON;
/// with one, its devices. (The providers cannot be linked into this test to
/// ask them: each defines the entry symbol.)
#[test]
fn the_gpu_providers_list_their_devices_or_why_there_are_none() {
    let (code, table, err) = cli(&["providers"]);
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = cli(&["providers", "--json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&json).expect("JSON on stdout");
    let present = |node: &str| std::path::Path::new(node).exists();
    for (name, gpu_here, reason) in [
        (
            "cuda",
            present("/dev/nvidiactl"),
            "(no devices: libcuda.so.1 not found",
        ),
        ("hip", present("/dev/kfd"), "(no devices: "),
    ] {
        let entry = report
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not listed: {json}"));
        let devices = entry["devices"].as_array().unwrap().len();
        let description = entry["description"].as_str().unwrap();
        if gpu_here {
            assert!(devices > 0, "{name}: {entry}");
        } else {
            assert_eq!(devices, 0, "{name}: {entry}");
            assert!(description.contains(reason), "{name}: {description}");
            assert!(table.contains(description), "{name} in the table: {table}");
        }
    }
}

#[test]
fn a_broken_provider_is_reported_without_hiding_the_others() {
    let broken = vsdk_broken_providers::NULL_EXECUTE;
    let (code, out, _) = cli(&[
        "providers",
        "--json",
        "--provider",
        broken,
        "--provider",
        vsdk_template_c::LIBRARY_PATH,
    ]);
    assert_eq!(code, 2);
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let entries = report.as_array().expect("a list");
    let error = entries
        .iter()
        .find_map(|e| e["error"].as_str())
        .expect("an error entry");
    assert_eq!(
        error,
        format!("{broken}: required slot `execute` of the function table is NULL")
    );
    assert!(entries
        .iter()
        .any(|e| e["name"] == "template-c" && e["devices"][0]["stable_id"] == "template-c:0"));
}

#[test]
fn a_missing_library_exits_2_with_its_path() {
    let (code, _, err) = cli(&[
        "providers",
        "--provider",
        "/nonexistent/libvsdk_provider_x.so",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("error: cannot load provider library /nonexistent/libvsdk_provider_x.so"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = cli(&["providers", "--no-such-flag"]);
    assert_eq!(code, 2, "{err}");
}

// ---- suites: run, list, inspect, generate, and bad input ------------------

const DEMO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/suites/demo-mlp");

/// A copy of the demo suite in a fresh directory, with `edit` applied to its document.
fn demo_copy(name: &str, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let doc = std::fs::read_to_string(format!("{DEMO_DIR}/suite.yaml")).unwrap();
    std::fs::write(dir.join("suite.yaml"), edit(doc)).unwrap();
    std::fs::copy(format!("{DEMO_DIR}/suite.golden"), dir.join("suite.golden")).unwrap();
    dir
}

#[test]
fn the_demo_runs_on_both_providers_in_both_modes() {
    for provider in ["cpu", vsdk_template_c::LIBRARY_PATH] {
        for mode in ["isolated", "chained"] {
            let (code, out, err) = cli(&["run", DEMO_DIR, "--provider", provider, "--mode", mode]);
            assert_eq!(code, 0, "{provider} {mode}: {out}{err}");
            assert!(out.contains(&format!("tier fp32, {mode} mode")), "{out}");
            assert!(
                out.contains("3 passed, 0 failed, 0 not supported")
                    && out.contains("verdict: PASS"),
                "{out}"
            );
        }
    }
    let results = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-results.json");
    let (code, out, err) = cli(&[
        "run",
        "demo-mlp",
        "--json",
        "--tier",
        "fp16",
        "--output",
        results.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    // Beside JSON, the files written are said on stderr.
    assert!(
        err.contains(&format!("wrote {} (the results, JSON)", results.display())),
        "{err}"
    );
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(report["tiers"][0]["tier"], "fp16");
    assert_eq!(report["tiers"][0]["stages"][2]["status"], "pass");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(written, report);
}

#[test]
fn a_wrong_operator_fails_its_stage_with_exit_1_and_drill_down() {
    let (code, out, _) = cli(&[
        "run",
        DEMO_DIR,
        "--provider",
        vsdk_broken_providers::MUTANT_GELU_TANH,
    ]);
    assert_eq!(code, 1, "{out}");
    let fc1 = out.lines().find(|l| l.starts_with("fc1_gelu")).unwrap();
    assert!(fc1.contains("FAIL"), "{out}");
    assert!(
        out.contains(
            "drill-down: first operator that fails its own check is node 1 `vsdk.gelu@1` -> `h`"
        ),
        "{out}"
    );
    assert!(
        out.lines()
            .find(|l| l.starts_with("layer_norm"))
            .unwrap()
            .contains("PASS"),
        "{out}"
    );
    let (code, out, _) = cli(&[
        "run",
        DEMO_DIR,
        "--provider",
        vsdk_template_c::LIBRARY_PATH,
        "--tier",
        "bf16",
    ]);
    assert_eq!(code, 1, "NOT SUPPORTED blocks certification: {out}");
    assert!(
        out.contains("NOT SUPPORTED") && out.contains("0 passed, 0 failed, 3 not supported"),
        "{out}"
    );
}

/// The table keeps to 100 columns: a failing run's reasons wrapped, the
/// coverage warnings counted, and the legend says the tightest operator's
/// `|e|` is against its own bound; `--wide` adds the execution, p99 and
/// drift columns, every warning and the whole library hash; every file
/// written is said; `check` names its captures once, here and on its page.
#[test]
fn the_table_fits_100_columns_and_wide_shows_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (results, page, saved) = (path("r.json"), path("r.html"), path("outs.safetensors"));
    let mutant = test_dir().join("libvsdk_mutant_provider.so");
    let target = test_dir().join(vips_sdk::library_file_name("cpu"));
    let env = [
        ("VSDK_MUTANT_TARGET", target.as_path()),
        ("VSDK_MUTATION", std::path::Path::new("layer_norm_eps")),
    ];
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "dinov2-vits14-quick",
            "--no-differential",
            "--provider",
            mutant.to_str().unwrap(),
        ];
        args.extend(extra);
        let (code, out, err) = cli_env(&args, &env);
        assert_eq!(code, 1, "{out}{err}");
        out
    };
    let out = run(&[
        "--output",
        &results,
        "--html",
        &page,
        "--save-outputs",
        &saved,
    ]);
    for line in out.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}\n{out}",
            line.chars().count()
        );
    }
    let header = out.lines().find(|l| l.starts_with("stage ")).unwrap();
    for (column, shown) in [
        ("tightest op", true),
        ("own|e|", true),
        ("execution", false),
        ("p99|e|", false),
        ("drift L2", false),
    ] {
        assert_eq!(header.contains(column), shown, "{column}: {header}");
    }
    let block = out.lines().find(|l| l.starts_with("block_00 ")).unwrap();
    assert!(
        block.contains("FAIL") && block.contains("layer_norm@1"),
        "{block}"
    );
    // The output's words, unwrapped.
    let words = |out: &str| out.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = words(&out);
    assert!(
        flat.contains("own|e|: the tightest operator's |e| against its own bound"),
        "{out}"
    );
    assert!(!out.contains("coverage: node"), "{out}");
    assert!(
        flat.contains("coverage: 19 warning(s) on 10 stages")
            && flat.contains("(--wide lists them)"),
        "{out}"
    );
    for (file, what) in [
        (results.clone(), "the results, JSON"),
        (format!("{results}.csv"), "a row per stage"),
        (format!("{results}.junit.xml"), "JUnit XML"),
        (page.clone(), "the HTML report"),
        (saved.clone(), "the outputs"),
    ] {
        assert!(
            out.contains(&format!("wrote {file} ({what}")),
            "{file}: {out}"
        );
    }

    let wide = run(&["--wide", "--stage", "block_0[0-3]"]);
    let header = wide.lines().find(|l| l.starts_with("stage ")).unwrap();
    for column in ["execution", "p99|e|", "drift L2", "tightest op", "own|e|"] {
        assert!(header.contains(column), "{column}: {header}");
    }
    assert!(
        wide.contains("\n    coverage: node 0 (`vsdk.layer_norm`"),
        "{wide}"
    );
    assert!(
        wide.lines().any(|l| l.chars().count() > 100),
        "unwrapped: {wide}"
    );
    let sha = |s: &str| {
        s.split("(sha256 ")
            .nth(1)
            .map(|h| h.chars().take_while(char::is_ascii_hexdigit).count())
    };
    assert_eq!(sha(&wide), Some(64), "{wide}");
    assert_eq!(sha(&flat), Some(16), "{out}");

    // `check` of those outputs: the captures named once.
    let check_page = path("check.html");
    let (code, out, err) = cli(&[
        "check",
        "dinov2-vits14-quick",
        "--tensors",
        &saved,
        "--stage",
        "block_00",
        "--html",
        &check_page,
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        out.lines().next(),
        Some(format!("dinov2-vits14-quick 0.1.0 on captured: {saved}").as_str()),
        "{out}"
    );
    assert!(out.contains(&format!("wrote {check_page} (")), "{out}");
    let html = std::fs::read_to_string(&check_page).unwrap();
    assert!(
        html.contains(&format!("<th>provider</th><td>captured: {saved}</td>")),
        "{html}"
    );
    assert_eq!(html.matches(&format!("captured: {saved}")).count(), 1);
}

#[test]
fn the_committed_demo_golden_file_is_what_generate_computes() {
    let (code, out, err) = cli(&["generate", "demo-mlp", "--check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("is up to date"), "{out}");
}

#[test]
fn list_and_inspect() {
    let (code, out, _) = cli(&["list"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("demo-mlp") && out.contains("3 stages"),
        "{out}"
    );
    let (code, out, _) = cli(&["list", "demo-mlp"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1. fc1_gelu") && out.contains("vsdk.linear → vsdk.gelu"),
        "{out}"
    );
    let (code, out, _) = cli(&["inspect", &format!("{DEMO_DIR}/suite.golden"), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tensors"].as_array().unwrap().len(), 10);
    assert_eq!(v["tensors"][7]["name"], "h");
    assert_eq!(v["tensors"][7]["shape"], serde_json::json!([4, 32]));
    assert_eq!(v["tensors"][7]["sha256"].as_str().unwrap().len(), 64);
    let (code, out, _) = cli(&["inspect", DEMO_DIR, "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let layer_norm = &v["stages"][1];
    assert_eq!(layer_norm["stage"], "layer_norm");
    let change = layer_norm["relative_change"].as_f64().unwrap();
    assert!(
        change > 0.05 && change.is_finite(),
        "a stage must change its input: {change}"
    );
    let (code, out, _) = cli(&["inspect", &format!("{DEMO_DIR}/suite.yaml")]);
    assert_eq!(code, 0);
    assert!(out.contains("demo-mlp 0.1.0 (document sha256"), "{out}");
}

#[test]
fn bad_input_exits_2_naming_the_file_and_place() {
    let check = |args: &[&str], want: &str| {
        let (code, out, err) = cli(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(want), "{args:?}: {err}\nwanted: {want}");
        assert!(!err.contains("panicked"), "{err}");
    };
    // Documents.
    let d = demo_copy("syntax", |t| {
        t.replace("  - stage: head", "  - stage: [head")
    });
    check(&["run", d.to_str().unwrap()], "suite.yaml:");
    let d = demo_copy("unknown-op", |t| {
        t.replace("op: vsdk.softmax", "op: vsdk.softmax2")
    });
    check(
        &["run", d.to_str().unwrap()],
        "suite.yaml:65:15: stages[2].graph[1].op: unknown kernel `vsdk.softmax2@1`",
    );
    let d = demo_copy("missing-tensor", |t| {
        t.replace("inputs: [h, gamma, beta]\n", "inputs: [h, gama, beta]\n")
    });
    check(
        &["run", d.to_str().unwrap()],
        "stages[1].inputs[1]: tensor `gama` is not declared",
    );
    // A document edited after packing.
    let d = demo_copy("stale", |t| {
        t.replace("certifies nothing", "certifies nothing at all")
    });
    check(
        &["run", d.to_str().unwrap()],
        "made from another version of",
    );
    // Golden files: truncated, corrupted, absent.
    let d = demo_copy("truncated", |t| t);
    let g = d.join("suite.golden");
    let bytes = std::fs::read(&g).unwrap();
    std::fs::write(&g, &bytes[..bytes.len() / 2]).unwrap();
    check(
        &["run", d.to_str().unwrap()],
        "suite.golden: checksum mismatch",
    );
    std::fs::write(&g, b"not a golden file").unwrap();
    check(
        &["inspect", g.to_str().unwrap()],
        "suite.golden: not a VIPS golden vector file",
    );
    std::fs::remove_file(&g).unwrap();
    check(&["run", d.to_str().unwrap()], "suite.golden: cannot read");
    // Usage.
    check(&["run", DEMO_DIR, "--shard", "3/2"], "--shard `3/2`");
    check(&["run", DEMO_DIR, "--tier", "fp8"], "--tier `fp8`");
    check(
        &["run", DEMO_DIR, "--stage", "nothing*"],
        "no stage matches",
    );
    check(&["run", "no-such-suite"], "no suite `no-such-suite`");
}

/// docs/runner.md, "Naming a suite": an argument with a `/` or a `.yaml`
/// ending is a path, anything else a name, whatever the working directory
/// holds; errors say which reading was taken. Providers alike (`/` or `.so`).
#[test]
fn names_and_paths_are_told_apart_by_their_spelling() {
    let cwd = tempfile::tempdir().unwrap();
    let here = cwd.path();
    std::fs::create_dir(here.join("demo-mlp")).unwrap();
    std::fs::create_dir(here.join("elsewhere")).unwrap();
    std::fs::write(here.join("cpu"), "not a provider").unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
            .args(args)
            .env("VSDK_PROVIDER_PATH", test_dir())
            .current_dir(here)
            .output()
            .expect("run vips-conformance");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("panicked"), "{err}");
        (
            out.status.code().expect("exited"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            err,
        )
    };
    // A directory `demo-mlp` here does not hide the suite of that name.
    let (code, out, err) = run(&["list", "demo-mlp"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fc1_gelu"), "{out}");
    // `./demo-mlp` is that directory, which holds no suite.
    let (code, _, err) = run(&["list", "./demo-mlp"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("`./demo-mlp` (read as a path: it contains `/`): ./demo-mlp/suite.yaml"),
        "{err}"
    );
    // A name that is not a suite, though a directory of that name is here.
    let (code, _, err) = run(&["list", "elsewhere"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "no suite `elsewhere`: read as a name (it has no `/` and does not end in `.yaml`)"
        ) && err.contains("write `./elsewhere` to open it as a path"),
        "{err}"
    );
    // Paths: a document by its `.yaml` ending, a missing path.
    std::fs::copy(format!("{DEMO_DIR}/suite.yaml"), here.join("demo.yaml")).unwrap();
    std::fs::copy(format!("{DEMO_DIR}/suite.golden"), here.join("demo.golden")).unwrap();
    let (code, out, err) = run(&["list", "demo.yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("fc1_gelu"), "{out}");
    let (code, out, err) = run(&["inspect", "demo.golden"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("w1"), "{out}");
    let (code, _, err) = run(&["list", "gone/demo-mlp"]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "no suite at `gone/demo-mlp`: read as a path (it contains `/`), and nothing is there"
        ),
        "{err}"
    );
    // Providers: `cpu` is a name (the file `cpu` here is not loaded); a
    // `.so` ending is a file of the working directory.
    let (code, out, err) = run(&["providers", "--json", "--provider", "cpu"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("libvsdk_provider_cpu.so"), "{out}");
    let lib = vips_sdk::library_file_name("cpu");
    let (code, out, err) = run(&["providers", "--json", "--provider", &lib]);
    assert_ne!(code, 0, "{out}");
    assert!(
        format!("{out}{err}").contains(&format!(
            "no provider library at `./{lib}`: read as a path (it ends in `.so`), and no file is there"
        )),
        "{out}{err}"
    );
    std::fs::copy(test_dir().join(&lib), here.join(&lib)).unwrap();
    let (code, out, err) = run(&["providers", "--json", "--provider", &lib]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("\"./{lib}\"")), "{out}");
}

#[test]
fn inspect_takes_a_suite_name_and_shows_activation_scales() {
    let (code, out, err) = cli(&["inspect", "dinov2-vits14-stress", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let max_abs = |stage: &str| {
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == stage)
            .unwrap()["output_max_abs"]
            .as_f64()
            .unwrap()
    };
    // The stress suite's outlier channels appear at block 2 and stay.
    assert!(
        max_abs("block_01") < 100.0 && max_abs("block_02") > 300.0 && max_abs("block_11") > 300.0
    );
}

#[test]
fn inspect_shows_where_sparse_voxels_are() {
    let (code, out, err) = cli(&["inspect", "trellis-slat-flow-quick", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sparse = v["sparse_voxels"].as_array().unwrap();
    let names: Vec<&str> = sparse
        .iter()
        .map(|s| s["tensor"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["coords", "coarse_coords"]);
    for s in sparse {
        let per_slice: u64 = s["per_x_slice"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .sum();
        assert_eq!(Some(per_slice), s["voxels"].as_u64(), "{s}");
    }
    // The downsample halves the box.
    assert_eq!(sparse[0]["extent"][0], 16);
    assert_eq!(sparse[1]["extent"][0], 8);
    let (_, text, _) = cli(&["inspect", "trellis-slat-flow-quick"]);
    assert!(text.contains("active voxels per x slice"), "{text}");
}

/// The demo suite's tensors exported, with `h` scaled by `1 + rel` (and `p`
/// all NaN when `rel` is NaN).
fn captures(name: &str, rel: f32) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("check");
    std::fs::create_dir_all(&dir).unwrap();
    let all = dir.join(format!("{name}-all.safetensors"));
    let (code, _, err) = cli(&["export", "demo-mlp", "--out", all.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&all).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut owned = Vec::new();
    for out in ["h", "n", "p"] {
        let t = st.tensor(out).unwrap();
        let mut v: Vec<f32> = t
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        if out == "h" && !rel.is_nan() {
            v.iter_mut().for_each(|x| *x *= 1.0 + rel);
        }
        if out == "p" && rel.is_nan() {
            v.iter_mut().for_each(|x| *x = f32::NAN);
        }
        owned.push((out, t.shape().to_vec(), v));
    }
    let bytes: Vec<(&str, Vec<usize>, Vec<u8>)> = owned
        .iter()
        .map(|(n, s, v)| {
            (
                *n,
                s.clone(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views: Vec<_> = bytes
        .iter()
        .map(|(n, s, b)| {
            (
                *n,
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)
                    .unwrap(),
            )
        })
        .collect();
    let path = dir.join(format!("{name}.safetensors"));
    safetensors::serialize_to_file(views, None, &path).unwrap();
    path
}

#[test]
fn check_judges_outputs_computed_elsewhere() {
    // `check demo-mlp --tensors FILE [extra] --json`: exit code and report.
    let check = |file: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "check",
            "demo-mlp",
            "--tensors",
            file.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = cli(&args);
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        (code, v)
    };
    // The golden values themselves: float32 roundings of the reference.
    let good = captures("good", 0.0);
    for mode in ["isolated", "chained"] {
        let (code, v) = check(&good, &["--mode", mode]);
        assert_eq!(code, 0, "{mode}: {v}");
        assert_eq!(v["tiers"][0]["stages"][0]["execution"], "captured");
    }
    // One output 1e-4 off (relative): far outside float32 bounds.
    let bad = captures("bad", 1e-4);
    let (code, out, _) = cli(&[
        "check",
        "demo-mlp",
        "--tensors",
        bad.to_str().unwrap(),
        "--wide",
    ]);
    assert_eq!(code, 1, "{out}");
    let fc1 = out.lines().find(|l| l.starts_with("fc1_gelu")).unwrap();
    assert!(fc1.contains("captured") && fc1.contains("FAIL"), "{out}");
    // NaN outputs fail their stage and the end-to-end check (which measures
    // its norms over finite pairs only, and so must count NaN apart).
    let (code, v) = check(&captures("nan", f32::NAN), &["--mode", "chained"]);
    assert_eq!(code, 1);
    let e2e = &v["tiers"][0]["end_to_end"][0];
    assert_eq!(e2e["tensor"], "p");
    assert_eq!(e2e["passed"], false, "{e2e}");
    assert_eq!(e2e["drift"]["nonfinite_mismatches"], 40);
    // A stage that does not use the wrong tensor still passes.
    let (code, v) = check(&bad, &["--stage", "head"]);
    assert_eq!(code, 0, "{v}");
    // Stages none of whose outputs were captured are NOT CAPTURED, not
    // failures; the next is fed the golden value and says so.
    let (code, v) = check(&dir_with_only_h(&good), &["--mode", "chained"]);
    assert_eq!(code, 0, "{v}");
    let stages = &v["tiers"][0]["stages"];
    assert_eq!(stages[1]["status"], "not_captured", "{v}");
    assert_eq!(stages[2]["status"], "not_captured", "{v}");
    // Only `h`, and wrong: the stage that produced it fails.
    let (code, v) = check(&dir_with_only_h(&bad), &[]);
    assert_eq!(code, 1);
    assert_eq!(v["tiers"][0]["stages"][0]["status"], "fail");
}

/// A capture file holding only `h`.
fn dir_with_only_h(from: &std::path::Path) -> std::path::PathBuf {
    let bytes = std::fs::read(from).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let h = st.tensor("h").unwrap();
    let path = from.with_file_name("only-h.safetensors");
    safetensors::serialize_to_file([("h", h)], None, &path).unwrap();
    path
}

/// The demo with fresh seeds and `b1` near 40: `h` is large next to its
/// spread, so LayerNorm magnifies how its input was rounded (as a
/// transformer's residual stream does). Its golden file is generated.
fn offset_demo(name: &str) -> (std::path::PathBuf, vips_sdk::document::Document) {
    let seed = std::env::var("VSDK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::random::<u32>() as u64);
    eprintln!("{name}: VSDK_TEST_SEED={seed}");
    let dir = demo_copy(name, |doc| {
        let mut doc = doc.replace(
            "seed: 102, uniform: [-0.1, 0.1]",
            "seed: 102, uniform: [40.0, 41.0]",
        );
        for s in 100..=106u64 {
            doc = doc.replace(
                &format!("seed: {s}, "),
                &format!("seed: {}, ", seed * 8 + s),
            );
        }
        doc
    });
    let (code, _, err) = cli(&["generate", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let doc = vips_sdk::document::Document::open(dir.join("suite.yaml")).unwrap();
    (dir, doc)
}

/// The demo computed end to end in float32 by NumPy from the document's
/// seeded tensors (tools/demo_reference.py regenerates them), rounded to
/// bfloat16 first when `params` is "bf16" (an engine at bf16 that keeps
/// float32 between stages); `h`, `n`, `p` saved as float32 in `out`.
fn numpy_float32_demo(doc: &vips_sdk::document::Document, params: &str, out: &std::path::Path) {
    use std::io::Write;
    let specs: Vec<String> = doc
        .tensors
        .iter()
        .filter_map(|t| match &t.source {
            vips_sdk::document::TensorSource::Seeded(s) => {
                let dist = match s.distribution {
                    vips_sdk::golden::Distribution::Uniform { low, high } => {
                        format!("{{\"uniform\": [{low:?}, {high:?}]}}")
                    }
                    vips_sdk::golden::Distribution::Normal { mean, std } => {
                        format!("{{\"normal\": [{mean:?}, {std:?}]}}")
                    }
                    vips_sdk::golden::Distribution::TestImage => unreachable!("not in the demo"),
                };
                Some(format!(
                    "{{\"name\": \"{}\", \"dtype\": \"{}\", \"shape\": {:?}, \"seed\": {}, \"distribution\": {dist}}}",
                    t.name,
                    t.dtype,
                    t.shape.as_ref().unwrap(),
                    s.seed
                ))
            }
            _ => None,
        })
        .collect();
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools");
    let script = format!(
        "import json, math, sys\nimport numpy as np\nsys.path.insert(0, {tools:?})\nimport demo_reference\n\
         def bf16(a):\n    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)\n\
         \x20   return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)\n\
         r = bf16 if sys.argv[2] == 'bf16' else (lambda a: np.asarray(a, np.float32))\n\
         t = {{s['name']: r(demo_reference.tensor(s)) for s in json.load(sys.stdin)}}\n\
         f = np.float32\nerf = np.vectorize(math.erf, otypes=[np.float32])\n\
         lin = t['x'] @ t['w1'].T + t['b1']\nh = f(0.5) * lin * (f(1) + erf(lin / f(math.sqrt(2))))\n\
         m = h.mean(-1, keepdims=True)\nv = ((h - m) ** 2).mean(-1, keepdims=True)\n\
         n = (h - m) / np.sqrt(v + f(1e-6)) * t['gamma'] + t['beta']\n\
         lg = n @ t['w2'].T + t['b2']\ne = np.exp(lg - lg.max(-1, keepdims=True))\np = e / e.sum(-1, keepdims=True)\n\
         assert h.dtype == n.dtype == p.dtype == np.float32\nnp.savez(sys.argv[1], h=h, n=n, p=p)\n"
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .arg(out)
        .arg(params)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with numpy is needed (tools/test installs numpy)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("[{}]", specs.join(",")).as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "python3 failed on:\n{script}"
    );
}

/// A correct float32 engine's end-to-end captures (issue 46): `check`
/// judges them chained by default, as the engine ran (isolated mode feeds
/// stages golden inputs the engine never saw, and fails them); isolated on
/// request, with a hint naming chained mode, not more captures; isolated by
/// default only where the captures hold no stage's input.
#[test]
fn check_judges_end_to_end_captures_as_the_engine_ran_them() {
    let (dir, doc) = offset_demo("end-to-end");
    let caps = dir.join("f32.npz");
    numpy_float32_demo(&doc, "fp32", &caps);
    let suite = dir.to_str().unwrap();
    let check = |extra: &[&str]| {
        let mut args = vec![
            "check",
            suite,
            "--tensors",
            caps.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = cli(&args);
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
        (code, v, err)
    };
    let (code, v, err) = check(&[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["tiers"][0]["mode"], "chained", "{v}");
    assert!(
        err.contains("chained mode: the captures hold what the engine fed"),
        "{err}"
    );
    // Isolated, asked for: a stage fed golden inputs fails, and its hint
    // is chained mode.
    let (code, v, _) = check(&["--mode", "isolated"]);
    assert_eq!(code, 1, "{v}");
    let failed: Vec<&serde_json::Value> = v["tiers"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "fail")
        .collect();
    assert!(!failed.is_empty());
    for s in failed {
        let hint = s["drill_down_note"].as_str().unwrap_or_default();
        assert!(
            hint.contains("judge it in chained mode") && !hint.contains("NODE@STAGE"),
            "{s}"
        );
    }
    // Only the last output: no stage's input captured, isolated, said so.
    let (code, _, err) = cli(&[
        "export",
        suite,
        "--out",
        dir.join("all.safetensors").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let only_p = dir.join("only-p.safetensors");
    let bytes = std::fs::read(dir.join("all.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    safetensors::serialize_to_file([("p", st.tensor("p").unwrap())], None, &only_p).unwrap();
    let (code, out, err) = cli(&["check", suite, "--tensors", only_p.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("isolated mode: the captures hold no stage's input")
            && out.contains("tier fp32, isolated mode"),
        "{out}"
    );
}

/// An engine at bf16 that hands float32 between stages (as autocast does):
/// chained `check` feeds each stage the float32 capture it was fed, not
/// that capture rounded to bfloat16 (which LayerNorm magnifies far beyond
/// its bound here), and says so on the stage.
#[test]
fn chained_check_feeds_a_capture_wider_than_the_tier_as_captured() {
    let (dir, doc) = offset_demo("wide-captures");
    let caps = dir.join("f32-bf16-params.npz");
    numpy_float32_demo(&doc, "bf16", &caps);
    let (code, out, err) = cli(&[
        "check",
        dir.to_str().unwrap(),
        "--tensors",
        caps.to_str().unwrap(),
        "--tier",
        "bf16",
        "--mode",
        "chained",
        "--json",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let tier = &v["tiers"][0];
    for s in tier["stages"].as_array().unwrap() {
        assert_eq!(s["status"], "pass", "{s}");
    }
    // End to end is the demo's conditioning, not this feature: layer_norm of
    // rows with mean 40 amplifies bfloat16 parameters' rounding, and for some
    // seeds (VSDK_TEST_SEED=3989701402) `p` drifts past bf16's rel L2 0.1.
    // The exit code must still say what the report says.
    let end_to_end = tier["end_to_end"].as_array().unwrap();
    assert!(!end_to_end.is_empty(), "{v}");
    let all_passed = end_to_end.iter().all(|e| e["passed"] == true);
    assert_eq!(code == 0, all_passed, "{v}");
    let ln = &tier["stages"][1];
    assert_eq!(ln["stage"], "layer_norm");
    assert!(
        ln["notes"].to_string().contains(
            "input `h` is its capture as the engine fed it on (float32, wider than bfloat16)"
        ),
        "{ln}"
    );
}

/// `--timings` names where the verdict's float64 work goes, by operator
/// family, under the table; the JSON holds it per stage. The demo's stages
/// are linear + GELU, layer norm, linear + softmax (no reference cache: a
/// fresh results directory).
#[test]
fn timings_show_the_verdicts_work_by_operator_family() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.json");
    let (code, out, err) = cli(&[
        "run",
        "demo-mlp",
        "--timings",
        "--tier",
        "fp32",
        "--output",
        results.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = flat
        .split("the verdict's float64 work by operator family")
        .nth(1)
        .unwrap_or_else(|| panic!("no family line: {out}"));
    for family in ["linear", "elementwise", "normalization"] {
        assert!(line.contains(&format!("{family} ")), "{family}: {line}");
    }
    assert!(!line.contains("attention"), "{line}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let stages = r["tiers"][0]["stages"].as_array().unwrap();
    let norm = stages
        .iter()
        .find(|s| s["timings"]["families"]["normalization"].is_object())
        .unwrap_or_else(|| panic!("no stage with a normalization family: {stages:?}"));
    let t = &norm["timings"]["families"]["normalization"];
    let total = t["reference"].as_f64().unwrap() + t["judgement"].as_f64().unwrap();
    assert!(total > 0.0, "{t}");
}
