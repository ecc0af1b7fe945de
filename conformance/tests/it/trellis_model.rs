//! TRELLIS-image-large as a model of certified components
//! (`trellis-image-large(-quick)`, written by tools/make_trellis_model.py):
//! `verify --model` gives CERTIFIED for the CPU provider when a signed report
//! certifies each component the model uses and its own stage, names the one
//! whose report is missing otherwise, and writes the model's page with every
//! component's verdict. The quick model's components are the quick suites;
//! the real model pins the real ones, which reports on the quick ones do not
//! certify.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The quick model's components, then the model itself.
const QUICK: [&str; 5] = [
    "dinov2-vitl14-reg-518-quick",
    "trellis-ss-flow-quick",
    "trellis-slat-flow-quick",
    "trellis-texture-bake-quick",
    "trellis-image-large-quick",
];

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn cli(args: &[&str]) -> Out {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let o = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args(args)
        .env("VSDK_PROVIDER_PATH", &dir)
        .env_remove("VIPS_SIGN_KEY")
        .output()
        .unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Signed fp32 reports of every suite in `QUICK` on the CPU provider.
fn reports(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let key = dir.join("k.pem");
    let r = cli(&["keygen", s(&key)]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let reports = QUICK
        .iter()
        .map(|suite| {
            let report = dir.join(format!("{suite}.report.json"));
            let r = cli(&[
                "run",
                suite,
                "--tier",
                "fp32",
                "--report",
                s(&report),
                "--sign-key",
                s(&key),
            ]);
            assert_eq!(r.code, Some(0), "{suite}: {}{}", r.stdout, r.stderr);
            report
        })
        .collect();
    (dir.join("k.pub.pem"), reports)
}

fn verify(model: &str, public: &Path, reports: &[PathBuf], html: Option<&Path>) -> Out {
    let mut args = vec!["verify"];
    args.extend(reports.iter().map(|r| s(r)));
    args.extend(["--pubkey", s(public), "--model", model, "--tier", "fp32"]);
    args.extend(["--provider", "cpu"]);
    if let Some(h) = html {
        args.extend(["--html", s(h)]);
    }
    cli(&args)
}

#[test]
fn the_model_is_certified_from_its_components_and_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let (public, reports) = reports(dir.path());
    let model = "trellis-image-large-quick";

    let page = dir.path().join("model.html");
    let v = verify(model, &public, &reports, Some(&page));
    assert_eq!(v.code, Some(0), "{}{}", v.stdout, v.stderr);
    assert!(
        v.stdout
            .contains(&format!("model {model} at fp32: CERTIFIED")),
        "{}",
        v.stdout
    );
    for c in &QUICK[..4] {
        assert!(
            v.stdout
                .lines()
                .any(|l| l.contains(c) && l.ends_with(": certified")),
            "{c}: {}",
            v.stdout
        );
    }
    // The page: the model's verdict, then each component's.
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<div class=\"verdict\">CERTIFIED</div>"),
        "{html}"
    );
    for c in QUICK {
        assert!(
            html.contains(&format!("<code>{c}</code>")),
            "{c} not on the page"
        );
    }
    assert_eq!(html.matches(">CERTIFIED</span>").count(), 5, "{html}");

    // Without the bake's report: NOT CERTIFIED, and the bake is named.
    let without: Vec<PathBuf> = reports
        .iter()
        .filter(|r| !s(r).contains("texture-bake"))
        .cloned()
        .collect();
    let v = verify(model, &public, &without, Some(&page));
    assert_eq!(v.code, Some(1), "{}", v.stdout);
    assert!(
        v.stdout
            .contains(&format!("model {model} at fp32: NOT CERTIFIED")),
        "{}",
        v.stdout
    );
    let missing: Vec<&str> = v.stdout.lines().filter(|l| l.contains("MISSING")).collect();
    assert_eq!(missing.len(), 1, "{}", v.stdout);
    assert!(
        missing[0].contains("trellis-texture-bake-quick 0.1.0"),
        "{}",
        missing[0]
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(">MISSING</span>") && html.contains("NOT CERTIFIED"),
        "{html}"
    );

    // The real model pins the real components: the quick reports certify
    // none of them, and each is named (its own stage is also uncertified).
    let v = verify("trellis-image-large", &public, &reports, None);
    assert_eq!(v.code, Some(1), "{}", v.stdout);
    for c in [
        "trellis-image-large 0.1.0",
        "dinov2-vitl14-reg-518 0.1.0",
        "trellis-ss-flow 0.1.0",
        "trellis-slat-flow 0.1.0",
        "trellis-texture-bake 0.1.0",
    ] {
        assert!(
            v.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(c) && l.contains("MISSING")),
            "{c}: {}",
            v.stdout
        );
    }
}
