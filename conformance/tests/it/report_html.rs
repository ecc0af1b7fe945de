//! The HTML report (docs/report.md) and the progress bars, through the
//! command line: pages of passing and failing runs (a wrong-variant provider)
//! carry the failing stage's heatmaps and notes and fetch nothing; a results
//! file renders to the very page the run wrote; a report's signature status;
//! a flipped patch grid leaves a mirrored map; bad inputs are clear errors;
//! the pages load in headless Chromium (tools/report-browser-check) without
//! console errors or network requests; bars show on a terminal only.
//!
//! Chromium and `script` (util-linux) are required (CI installs them): without
//! them these tests fail and say so, rather than skip.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{repo, require, Out};
use vips_sdk::runner::results::markup_text;

fn test_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

fn lib(name: &str) -> PathBuf {
    test_dir().join(vips_sdk::library_file_name(name))
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// `vips-conformance args`, the mutant provider planting `mutation` when given.
fn cli(args: &[&str], mutation: Option<&str>) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vips-conformance"));
    cmd.args(args)
        .env("VSDK_PROVIDER_PATH", test_dir())
        .env_remove("VIPS_SIGN_KEY")
        .current_dir(repo());
    if let Some(m) = mutation {
        cmd.arg("--provider")
            .arg(test_dir().join("libvsdk_mutant_provider.so"))
            .env("VSDK_MUTANT_TARGET", lib("cpu"))
            .env("VSDK_MUTATION", m);
    }
    Out::of(cmd.output().expect("run vips-conformance"))
}

/// Runs `suite` (with `extra` arguments) writing results and page into
/// `dir`; returns (exit code, results, page).
fn run_page(
    dir: &Path,
    name: &str,
    suite: &str,
    extra: &[&str],
    mutation: Option<&str>,
) -> (i32, Value, String) {
    let (results, page) = (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}.html")),
    );
    let mut args = vec!["run", suite, "--output", s(&results), "--html", s(&page)];
    args.extend(extra);
    let r = cli(&args, mutation);
    let json = serde_json::from_str(&std::fs::read_to_string(&results).unwrap())
        .unwrap_or_else(|e| panic!("{name}: {e}: {}", r.text()));
    (r.code, json, std::fs::read_to_string(&page).unwrap())
}

/// What did not pass in a results file: each tier's stages, end-to-end
/// check, differential round and contract that failed, with their reasons.
fn not_passed(results: &Value) -> String {
    let mut out = Vec::new();
    for t in results["tiers"].as_array().into_iter().flatten() {
        for round in ["stages", "differential"] {
            for st in t[round].as_array().into_iter().flatten() {
                if st["status"] != "pass" {
                    out.push(format!(
                        "{} {round} {}: {} {}",
                        t["tier"], st["stage"], st["status"], st["reason"]
                    ));
                }
            }
        }
        for check in ["end_to_end", "contract"] {
            if t[check]["passed"] == false {
                out.push(format!("{} {check}: {}", t["tier"], t[check]));
            }
        }
    }
    out.join("; ")
}

/// The stage's notes, as the document has them.
fn notes(suite: &str, stage: &str) -> Vec<String> {
    let doc = repo()
        .join("conformance/suites")
        .join(suite)
        .join("suite.yaml");
    let doc = vips_sdk::document::Document::open(&doc).unwrap();
    let stage = doc.stages.iter().find(|s| s.name == stage).unwrap();
    assert!(!stage.notes.is_empty(), "{} has notes to show", stage.name);
    stage.notes.clone()
}

/// Nothing in the page is fetched: no scripts, styles, frames or images
/// from anywhere but the page itself.
fn assert_self_contained(page: &str) {
    for bad in [
        "<script",
        "<link",
        "<iframe",
        "src=\"http",
        "src=\"//",
        "href=\"http",
        "url(",
        "@import",
    ] {
        assert!(!page.contains(bad), "the page holds `{bad}`");
    }
    for src in page.split("src=\"").skip(1) {
        assert!(
            src.starts_with("data:image/png;base64,"),
            "src=\"{}",
            &src[..40.min(src.len())]
        );
    }
}

/// A wrong variant (a crop one row off) fails `preprocess`: the page shows
/// its heatmaps, the expected and actual images, the operator graph with
/// the crop marked and the stage's notes, and loads nothing; the results
/// file renders to the same page.
#[test]
fn a_failing_run_shows_where_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results, page) = run_page(
        dir.path(),
        "crop",
        "dinov2-vits14-quick",
        &["--no-differential"],
        Some("crop_off_by_one"),
    );
    assert_eq!(code, 1);
    assert_self_contained(&page);
    let failing: Vec<&str> = page
        .split("<details class=\"stage-detail failing-stage\" id=\"")
        .skip(1)
        .map(|a| &a[..a.find('"').unwrap()])
        .collect();
    assert_eq!(failing, ["stage-fp32-preprocess"]);
    // The only failing stage is open; the banner names it and its operator.
    assert!(page.contains("id=\"stage-fp32-preprocess\" open>"));
    assert!(
        page.contains(
            "fp32: 1 stage(s) did not pass; the first divergent stage is preprocess, \
             at operator node 1 vsdk.crop@1 → cropped"
        ),
        "{}",
        &page[..page.find("</header>").unwrap()]
    );
    let article = &page[page.find("id=\"stage-fp32-preprocess\"").unwrap()..];
    let article = &article[..article.find("</details>").unwrap()];
    for note in notes("dinov2-vits14-quick", "preprocess") {
        assert!(
            article.contains(&format!("<li>{}</li>", markup_text(&note))),
            "note {note}"
        );
    }
    assert!(article.contains("<div class=\"notes\">"));
    assert!(article.contains("class=\"diverged\"><code>vsdk.crop@1</code>"));
    assert!(article.contains("<figure class=\"heatmap\">"));
    assert!(article.contains("the image, expected") && article.contains("the image, actual"));
    assert!(article.contains("|actual − expected|"));
    // Expected, actual and their difference in one row that never wraps.
    let pair = &article[article.find("<div class=\"pair\">").unwrap()..];
    let pair = &pair[..pair.find("</div></div><div class=\"panels\">").unwrap()];
    assert!(
        pair.contains("the image, expected")
            && pair.contains("the image, actual")
            && pair.contains("|actual − expected|"),
        "{pair}"
    );
    // The colour scale is labelled at whole decades only.
    let ticks: Vec<&str> = article
        .split("<div class=\"ticks\">")
        .skip(1)
        .flat_map(|t| t[..t.find("</div>").unwrap()].split("</span>"))
        .filter_map(|t| t.rsplit('>').next().filter(|l| !l.is_empty()))
        .collect();
    assert!(ticks.len() >= 2, "{ticks:?}");
    for label in &ticks {
        let decade = *label == "1"
            || *label == "10"
            || label
                .strip_prefix("1e")
                .is_some_and(|k| k.parse::<i32>().is_ok());
        assert!(decade, "a colour scale labelled {label}: {ticks:?}");
    }
    // Heatmaps carry index ticks: the 56×56 image's rows and columns.
    let heatmap = &article[article.find("<figure class=\"heatmap\">").unwrap()..];
    let heatmap = &heatmap[..heatmap.find("</figure>").unwrap()];
    for axis in ["rt", "ct"] {
        let at = heatmap.find(&format!("<div class=\"{axis}\"")).unwrap();
        let labels = &heatmap[at..at + heatmap[at..].find("</div>").unwrap()];
        assert!(
            labels.contains(">0</span>") && labels.contains(">50</span>"),
            "{axis}: {labels}"
        );
    }
    assert!(page.contains("<header id=\"verdict\" class=\"fail\">"));
    let map = &results["tiers"][0]["stages"][0]["outputs"][0]["error_map"];
    assert_eq!(map["layout"]["kind"], "image", "{map:?}");

    let again = dir.path().join("again.html");
    let r = cli(
        &[
            "report",
            s(&dir.path().join("crop.json")),
            "--html",
            s(&again),
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(
        r.stdout.contains(&format!("wrote {} (", s(&again))),
        "{}",
        r.text()
    );
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        page,
        "the results file renders to the page the run wrote"
    );
}

/// A provider that flips the patch grid upside down (in `vsdk.conv2d`, so
/// only `patch_embed` fails): the map of its output is (to the bounds'
/// variation) its own mirror image, and the actual values are the expected
/// ones upside down.
#[test]
fn a_flipped_patch_grid_leaves_a_mirrored_map() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results, page) = run_page(
        dir.path(),
        "flip",
        "dinov2-vits14",
        &["--stage", "patch_embed", "--no-differential"],
        Some("patch_grid_flip"),
    );
    assert_eq!(code, 1);
    let stage = &results["tiers"][0]["stages"][0];
    assert_eq!(stage["status"], "fail");
    assert_eq!(stage["drill_down"]["op"], "vsdk.conv2d@1");
    assert_eq!(
        // The drill-down's map is kept once, with its node.
        stage["nodes"][stage["drill_down"]["node"].as_u64().unwrap() as usize]["error_map"]
            ["layout"]["kind"],
        "feature_map"
    );
    let map = &stage["outputs"][0]["error_map"];
    assert_eq!(map["layout"]["kind"], "tokens");
    let panel = |title: &str| -> Vec<f64> {
        let p = map["panels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["title"].as_str().unwrap().starts_with(title))
            .unwrap_or_else(|| panic!("no panel {title}"));
        assert_eq!(
            (p["rows"].as_u64(), p["cols"].as_u64()),
            (Some(16), Some(16))
        );
        p["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    let grid = panel("largest |e| per patch token");
    let expected = panel("root mean square over channels per patch token, expected");
    let actual = panel("root mean square over channels per patch token, actual");
    let row = |v: &[f64], r: usize| v[r * 16..(r + 1) * 16].to_vec();
    for r in 0..16 {
        // |actual − reference| is exactly mirrored; the bounds (which
        // follow the values) differ a little between the two rows.
        for (x, y) in row(&grid, r).iter().zip(row(&grid, 15 - r)) {
            assert!(
                x / y < 1.5 && y / x < 1.5,
                "row {r} mirrors row {}: {x} vs {y}",
                15 - r
            );
        }
        for (a, e) in row(&actual, r).iter().zip(row(&expected, 15 - r)) {
            assert!(
                (a - e).abs() <= 1e-4 * e.abs().max(1e-3),
                "row {r}: {a} vs {e}"
            );
        }
    }
    // Not symmetric by accident: the expected picture itself is not.
    assert!((0..16).any(|r| row(&expected, r) != row(&expected, 15 - r)));
    assert!(page.contains("id=\"stage-fp32-patch_embed\""));
    // The drill-down's map is drawn, found with its node.
    assert!(page.contains("first divergent operator: node 0 <code>vsdk.conv2d@1</code>"));
}

/// A signed certification report renders with its signature's status and
/// the header follows: green only when CERTIFIED and the signature verifies
/// with the given key; red when it does not verify; orange unchecked.
#[test]
fn a_report_page_says_whether_its_signature_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let key = |name: &str| {
        let key = dir.path().join(format!("{name}.pem"));
        let r = cli(&["keygen", s(&key)], None);
        assert_eq!(r.code, 0, "{}", r.text());
        (key.clone(), dir.path().join(format!("{name}.pub.pem")))
    };
    let ((signer, signer_pub), (_, other_pub)) = (key("signer"), key("other"));
    let report = |name: &str, extra: &[&str]| {
        let path = dir.path().join(name);
        let mut args = vec![
            "run",
            "demo-mlp",
            "--report",
            s(&path),
            "--sign-key",
            s(&signer),
        ];
        args.extend(extra);
        let r = cli(&args, None);
        assert_eq!(r.code, 0, "{}", r.text());
        path
    };
    let run_page = dir.path().join("run.html");
    let (whole, filtered) = (
        report("whole.json", &["--html", s(&run_page)]),
        report("filtered.json", &["--stage", "fc1*"]),
    );
    // The run's own page names the report it wrote and the key that signed it.
    let signer_id = vips_sdk::certify::keys::key_id(
        &vips_sdk::certify::keys::read_public(&signer_pub).unwrap(),
    );
    let page = std::fs::read_to_string(&run_page).unwrap();
    assert!(
        page.contains(&format!("({}), signed by {signer_id}", s(&whole))),
        "{page}"
    );
    // (header class, signature cell) of a report's page.
    let page_with = |report: &Path, keys: &[&Path]| {
        let html = dir.path().join("page.html");
        let mut args = vec!["report", s(report), "--html", s(&html)];
        for k in keys {
            args.extend(["--pubkey", s(k)]);
        }
        let r = cli(&args, None);
        assert_eq!(r.code, 0, "{}", r.text());
        let page = std::fs::read_to_string(&html).unwrap();
        assert_self_contained(&page);
        assert!(page.contains("id=\"tier-fp32\""));
        let header = page
            .split("<header id=\"verdict\" class=\"")
            .nth(1)
            .unwrap();
        let at = page.find("<td id=\"signature\">").unwrap();
        (
            header[..header.find('"').unwrap()].to_string(),
            page[at..at + page[at..].find("</td>").unwrap()].to_string(),
        )
    };
    let (class, cell) = page_with(&whole, &[&signer_pub]);
    assert_eq!(class, "pass");
    assert!(cell.contains("the signature verifies"), "{cell}");
    let (class, cell) = page_with(&whole, &[&other_pub]);
    assert_eq!(class, "fail");
    assert!(cell.contains("DOES NOT VERIFY"), "{cell}");
    let (class, cell) = page_with(&whole, &[]);
    assert_eq!(class, "warn");
    assert!(cell.contains("not checked"), "{cell}");
    // A filtered run certifies nothing, whoever signed it.
    let (class, _) = page_with(&filtered, &[&signer_pub]);
    assert_eq!(class, "fail");
}

/// Strings of a results file (an untrusted file) are text on the page,
/// never markup.
#[test]
fn hostile_strings_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("demo.json");
    let r = cli(&["run", "demo-mlp", "--output", s(&results)], None);
    assert_eq!(r.code, 0, "{}", r.text());
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let hostile = "<script>alert(1)</script><img src=http://example.invalid/x>";
    json["provider"] = hostile.into();
    json["tiers"][0]["stages"][0]["stage"] = hostile.into();
    json["tiers"][0]["stages"][0]["reason"] = hostile.into();
    json["tiers"][0]["stages"][0]["status"] = "fail".into();
    json["tiers"][0]["stages"][0]["outputs"][0]["tensor"] = hostile.into();
    std::fs::write(&results, serde_json::to_vec(&json).unwrap()).unwrap();
    let page = dir.path().join("page.html");
    let r = cli(&["report", s(&results), "--html", s(&page)], None);
    assert_eq!(r.code, 0, "{}", r.text());
    let page = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&page);
    assert!(page
        .contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=http://example.invalid/x&gt;"));
}

#[test]
fn bad_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.html");
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, b"\x00\x01 not json").unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, br#"{"tiers": 3}"#).unwrap();
    for (input, says) in [
        (garbage.as_path(), "not a JSON object"),
        (
            other.as_path(),
            "not a results file (`run --output`) nor a certification report",
        ),
        (dir.path(), "not a regular file"),
        (
            Path::new("/nonexistent/results.json"),
            "/nonexistent/results.json",
        ),
    ] {
        let r = cli(&["report", s(input), "--html", s(&out)], None);
        assert_eq!(r.code, 2, "{input:?}: {}", r.text());
        assert!(r.stderr.contains(says), "{input:?}: {}", r.stderr);
        assert!(r.stderr.contains(s(input)), "{input:?} named: {}", r.stderr);
    }
    // A results file whose error map could not be drawn (cells beyond the
    // bound, too few values) is refused, naming the map.
    let results = dir.path().join("demo.json");
    let r = cli(&["run", "demo-mlp", "--output", s(&results)], None);
    assert_eq!(r.code, 0, "{}", r.text());
    let mut json: Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let tensor = json["tiers"][0]["stages"][0]["outputs"][0]["tensor"]
        .as_str()
        .unwrap()
        .to_string();
    for (rows, values, says) in [
        (500, 250_000, "500×500 cells"),
        (4, 15, "15 values for 4×4×1 cells"),
    ] {
        json["tiers"][0]["stages"][0]["outputs"][0]["error_map"] = serde_json::json!({
            "shape": [rows, rows],
            "layout": {"kind": "matrix", "rows": rows, "cols": rows},
            "panels": [{"title": "t", "kind": "error", "row_axis": "row", "col_axis": "column",
                "rows": rows, "cols": rows, "channels": 1, "row_step": 1, "col_step": 1,
                "values": vec![1.0; values]}],
            "histogram": {"zero": 0, "below": 0, "bins": vec![0; 48], "above": 0, "non_finite": 0},
            "worst": []
        });
        let tampered = dir.path().join("tampered.json");
        std::fs::write(&tampered, serde_json::to_vec(&json).unwrap()).unwrap();
        let r = cli(&["report", s(&tampered), "--html", s(&out)], None);
        assert_eq!(r.code, 2, "{}", r.text());
        assert!(
            r.stderr
                .contains(&format!("the error map of `{tensor}`: panel 0: {says}")),
            "{}",
            r.stderr
        );
    }
    // An unwritable page fails before the run.
    let r = cli(
        &["run", "demo-mlp", "--html", "/nonexistent/dir/page.html"],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.text());
    assert!(r
        .stderr
        .contains("/nonexistent/dir/page.html: cannot write"));
}

fn checker(args: &[&str]) -> Out {
    Out::of(
        Command::new(repo().join("tools/report-browser-check"))
            .args(args)
            .output()
            .expect("run tools/report-browser-check"),
    )
}

/// What Chromium lays out: `page` with a script appended that puts
/// `expression`'s value (JSON) on the body, read back from `--dump-dom` at
/// a window `width` pixels wide. (The page itself has no script; a copy
/// gets one.)
fn laid_out(page: &Path, width: u32, expression: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe.html");
    let mut html = std::fs::read_to_string(page).unwrap();
    html.push_str(&format!(
        "<script>document.body.setAttribute('data-probe', JSON.stringify({expression}))</script>"
    ));
    std::fs::write(&probe, html).unwrap();
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless=new",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        &format!("--window-size={width},900"),
        &format!("--user-data-dir={}", s(&dir.path().join("profile"))),
        "--dump-dom",
    ]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--no-sandbox"); // chromium refuses root with its sandbox
    }
    let o = Out::of(
        cmd.arg(format!("file://{}", s(&probe)))
            .env("XDG_CONFIG_HOME", dir.path())
            .env("XDG_CACHE_HOME", dir.path())
            .output()
            .expect("run chromium"),
    );
    let at = o
        .stdout
        .find("data-probe=\"")
        .unwrap_or_else(|| panic!("no probe: {}", o.text()));
    let value = &o.stdout[at + "data-probe=\"".len()..];
    let value = value[..value.find('"').unwrap()]
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&value).unwrap()
}

/// Both pages in headless Chromium: no console error, no network request,
/// the failing stage's heatmap and notes visible; screenshots kept in
/// target/report-screenshots. The checker's own self-test shows it fails
/// pages that break these rules. A page of twelve failing blocks stays
/// short (every stage but the first folded); expected and actual panels
/// stay side by side at 1400 pixels.
#[test]
fn the_pages_load_in_headless_chromium_without_errors_or_requests() {
    require(
        "chromium",
        &["--version"],
        "Debian's chromium (apt-get install --no-install-recommends chromium)",
    );
    let r = checker(&["--self-test"]);
    assert_eq!(r.code, 0, "the checker's self-test: {}", r.text());
    let dir = tempfile::tempdir().unwrap();
    let shots = repo().join("target/report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let (code, json, _) = run_page(
        dir.path(),
        "pass",
        "dinov2-vits14-quick",
        &["--mode", "chained", "--tier", "fp32", "--tier", "bf16"],
        None,
    );
    assert_eq!(code, 0, "the passing run failed: {}", not_passed(&json));
    let (code, _, _) = run_page(
        dir.path(),
        "fail",
        "dinov2-vits14-quick",
        &["--no-differential"],
        Some("crop_off_by_one"),
    );
    assert_eq!(code, 1);
    let (code, _, gelu) = run_page(
        dir.path(),
        "gelu",
        "dinov2-vits14-quick",
        &["--no-differential"],
        Some("gelu_tanh"),
    );
    assert_eq!(code, 1);
    assert_eq!(
        gelu.matches("<details class=\"stage-detail failing-stage\"")
            .count(),
        12
    );
    assert_eq!(
        gelu.matches("class=\"stage-detail failing-stage\" id=\"stage-fp32-block_00\" open>")
            .count(),
        1
    );
    assert_eq!(gelu.matches("\" open>").count(), 1, "one stage open");
    assert!(gelu.contains(
        "fp32: 12 stage(s) did not pass; the first divergent stage is block_00, at operator node 18 vsdk.gelu@1 → hidden_act"
    ));
    let note: String = notes("dinov2-vits14-quick", "preprocess")[0]
        .chars()
        .take(40)
        .collect();
    let cases: [(&str, &[&str]); 3] = [
        (
            "pass",
            &[
                "--expect",
                "#verdict.pass",
                "--expect",
                "#tier-bf16 svg",
                "--expect",
                "#drift-fp32 svg",
            ],
        ),
        (
            "fail",
            &[
                "--expect",
                "#verdict.fail",
                "--expect",
                ".failing-stage .heatmap img",
                "--expect",
                ".failing-stage .notes",
                "--expect",
                ".failing-stage .graph .diverged",
                "--expect-text",
                &note,
            ],
        ),
        (
            "gelu",
            &[
                "--expect",
                "#stage-fp32-block_00 .heatmap img",
                "--expect",
                "#stage-fp32-block_11 summary",
            ],
        ),
    ];
    for (name, expects) in cases {
        let page = dir.path().join(format!("{name}.html"));
        let shot = shots.join(format!("{name}.png"));
        let mut args = vec!["--screenshot", s(&shot)];
        args.extend(expects);
        args.push(s(&page));
        let r = checker(&args);
        assert_eq!(r.code, 0, "{name}: {}", r.text());
        let seen: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(seen["console_errors"], Value::Array(vec![]), "{name}");
        assert_eq!(seen["network_requests"], Value::Array(vec![]), "{name}");
        assert!(
            std::fs::metadata(&shot).unwrap().len() > 10_000,
            "{name}: a screenshot"
        );
        if name == "gelu" {
            // Twelve failing blocks, folded: 16,000 pixels before.
            let height = seen["content_height"].as_u64().unwrap();
            assert!(height < 7_000, "{height} pixels tall");
        }
    }
    // Each row of expected, actual and difference: one top, left to right,
    // at 1400 pixels (the image panels wrapped apart there).
    let rows = laid_out(
        &dir.path().join("fail.html"),
        1400,
        "[...document.querySelectorAll('.pair')].map(p => [...p.querySelectorAll('figure')]\
         .map(f => { const b = f.getBoundingClientRect(); return [b.top, b.left]; }))",
    );
    let rows = rows.as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let figs: Vec<(f64, f64)> = row
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f[0].as_f64().unwrap(), f[1].as_f64().unwrap()))
            .collect();
        assert_eq!(figs.len(), 3, "{row}");
        assert!(
            figs.windows(2).all(|w| w[0].0 == w[1].0 && w[0].1 < w[1].1),
            "side by side: {row}"
        );
    }
}

/// Bars on a terminal (a pseudo-terminal from util-linux's `script`), on
/// stderr only; none when stderr is a pipe, with --quiet or with --json.
#[test]
fn progress_bars_show_on_a_terminal_only() {
    require("script", &["--version"], "util-linux's `script`");
    let exe = env!("CARGO_BIN_EXE_vips-conformance");
    let on_terminal = |extra: &str| {
        let o = Command::new("script")
            .args([
                "-qfec",
                &format!("{exe} run demo-mlp --tier fp32 --tier fp16 {extra} >/dev/null"),
                "/dev/null",
            ])
            .env("VSDK_PROVIDER_PATH", test_dir())
            .current_dir(repo())
            .output()
            .expect("script");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let drawn = on_terminal("");
    for part in [" fp32 [", " fp16 [", "\x1b[2K"] {
        assert!(drawn.contains(part), "{part:?} in {drawn:?}");
    }
    // Every frame's bar is as long as its count says: empty at 0 (also at
    // 0/0, before the stages are planned), full only when done.
    let mut frames = 0;
    for frame in drawn.split(" [").skip(1) {
        let Some((bar, rest)) = frame.split_once(']') else {
            continue;
        };
        let count: Vec<u64> = rest
            .split_whitespace()
            .next()
            .unwrap_or("")
            .split('/')
            .filter_map(|n| n.parse().ok())
            .collect();
        let [pos, len] = count[..] else { continue };
        let filled = bar.chars().filter(|&c| c == '=').count() as u64;
        let width = bar.chars().count() as u64;
        if pos == 0 {
            assert_eq!(filled, 0, "[{bar}] {pos}/{len}");
        } else {
            assert!(filled <= width * pos / len + 1, "[{bar}] {pos}/{len}");
        }
        frames += 1;
    }
    assert!(frames > 3, "{drawn:?}");
    for quiet in ["--quiet", "--json"] {
        let shown = on_terminal(quiet);
        assert!(!shown.contains(" fp32 ["), "{quiet}: {shown:?}");
    }
    let piped = cli(&["run", "demo-mlp", "--tier", "fp32"], None);
    assert_eq!(piped.code, 0);
    assert_eq!(piped.stderr, "", "nothing on a pipe");
}
