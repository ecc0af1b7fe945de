//! `verify`: checks certification reports offline: the signature against
//! the given public key(s), then, when given, that the provider library and
//! the golden file are the certified ones, and with `--model` that a model
//! document's components are all certified. Exit code 0 only when every
//! report verifies and says CERTIFIED (and the model is certified).

use crate::html;
use crate::reports::{describe, short};
use crate::suites;
use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::certify::{self, compose, keys, Statement, SubjectFiles, Verdict};

#[derive(clap::Args)]
pub struct Args {
    /// Report files (DSSE envelopes written by `run --report` or `merge`).
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    /// A trusted public key (SPKI PEM, from `keygen`); repeatable.
    #[arg(long = "pubkey", value_name = "PUB.pem", required = true)]
    pubkeys: Vec<PathBuf>,
    /// Check that this provider library (a path, or a name on the search
    /// path) is the certified one.
    #[arg(long, value_name = "LIB|NAME")]
    provider: Option<String>,
    /// Check that this golden file (or the golden file of this suite) is
    /// the certified one.
    #[arg(long, value_name = "FILE|SUITE")]
    golden: Option<String>,
    /// A model document (or suite): certified when a verified report
    /// certifies it and each component it uses, at --tier, for one
    /// provider binary.
    #[arg(long, value_name = "DOC|SUITE", requires = "tier")]
    model: Option<String>,
    /// The tier the model must be certified at.
    #[arg(long)]
    tier: Option<String>,
    /// With --model: write a page of the model and each component's
    /// verdict (docs/report.md, "A model's page").
    #[arg(long, value_name = "FILE.html", requires = "model")]
    html: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

/// The golden file a `--golden` argument stands for.
fn golden_file(arg: &str) -> Result<PathBuf, String> {
    Ok(suites::locate(arg)?.files().1)
}

#[derive(serde::Serialize)]
struct Verified<'a> {
    report: String,
    /// Why it does not verify; absent when it does.
    error: Option<String>,
    statement: Option<&'a Statement>,
}

pub fn run(args: Args) -> super::Outcome {
    let keys = args
        .pubkeys
        .iter()
        .map(|p| keys::read_public(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let provider = args
        .provider
        .as_deref()
        .map(|p| vips_sdk::Provider::locate(p).map_err(|e| e.to_string()))
        .transpose()?;
    let golden = args.golden.as_deref().map(golden_file).transpose()?;
    // Hashed once for every report and the model check.
    let files =
        SubjectFiles::hash(provider.as_deref(), golden.as_deref()).map_err(|e| e.to_string())?;
    let tier = args.tier.as_deref().map(super::parse_tier).transpose()?;
    let model = args
        .model
        .as_deref()
        .map(|m| suites::locate(m)?.document())
        .transpose()?;

    let mut results = Vec::new();
    for path in &args.reports {
        // An unreadable or malformed file is an input error (exit 2); one
        // that reads but does not verify is a failing verdict (exit 1).
        let envelope = certify::read_envelope(path).map_err(|e| e.to_string())?;
        results.push((path, certify::verify(&envelope, &keys, &files)));
    }
    let verified: Vec<Statement> = results
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().cloned())
        .collect();
    let model_check = model.as_ref().zip(tier).map(|(m, t)| {
        let provider_sha = files.provider.as_ref().map(|(_, h)| h.as_str());
        compose::check_model(m, &verified, t, provider_sha)
    });

    let mut ok = true;
    if args.json {
        let list: Vec<Verified> = results
            .iter()
            .map(|(p, r)| Verified {
                report: p.display().to_string(),
                error: r.as_ref().err().map(|e| e.to_string()),
                statement: r.as_ref().ok(),
            })
            .collect();
        super::print_json(&serde_json::json!({ "reports": list, "model": model_check }))?;
    }
    for (path, result) in &results {
        match result {
            Ok(s) => {
                ok &= s.predicate.verdict == Verdict::Certified;
                if !args.json {
                    println!("{}: signature verified", path.display());
                    for line in describe(s) {
                        println!("  {line}");
                    }
                }
            }
            Err(e) => {
                ok = false;
                if !args.json {
                    println!("{}: DOES NOT VERIFY: {e}", path.display());
                }
            }
        }
    }
    if !args.json {
        println!(
            "trusted key(s): {}",
            keys.iter()
                .map(|k| short(&keys::key_id(k)).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(check) = &model_check {
        ok &= check.certified;
        if !args.json {
            print_model(check);
        }
    }
    if let (Some(page), Some(check), Some(model)) = (&args.html, &model_check, &model) {
        // The reports as `check_model` numbered them: the verified ones.
        let given: Vec<html::model::GivenReport> = results
            .iter()
            .filter_map(|(p, r)| r.as_ref().ok().map(|s| (p, s)))
            .map(|(p, s)| html::model::GivenReport {
                file: p.display().to_string(),
                statement: Some(s),
                lines: describe(s),
            })
            .chain(results.iter().filter_map(|(p, r)| {
                r.as_ref().err().map(|e| html::model::GivenReport {
                    file: p.display().to_string(),
                    statement: None,
                    lines: vec![e.to_string()],
                })
            }))
            .collect();
        std::fs::write(page, html::model::render(check, model, &given))
            .map_err(|e| format!("{}: {e}", page.display()))?;
        if !args.json {
            println!("wrote {}", page.display());
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_model(check: &compose::ModelCheck) {
    println!(
        "model {} at {}: {}",
        check.model,
        check.tier.name(),
        if check.certified {
            "CERTIFIED"
        } else {
            "NOT CERTIFIED"
        }
    );
    for (req, standing) in &check.components {
        let what = format!(
            "{} {} ({})",
            req.component,
            req.version,
            short(&req.document_sha256)
        );
        match standing {
            compose::Standing::Certified { .. } => println!("  {what}: certified"),
            compose::Standing::NotCertified { reasons, .. } => {
                println!("  {what}: NOT CERTIFIED: {}", reasons.join("; "))
            }
            compose::Standing::Missing { hint } => println!(
                "  {what}: MISSING: no verified report{}",
                hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
            ),
        }
    }
}
