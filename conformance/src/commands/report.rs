//! `report`: the HTML page of a run's results file (`run --output`) or of a
//! certification report (`run --report`), docs/report.md.

use crate::html::{self, view::Signature, view::View};
use crate::suites;
use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::certify::{self, keys, SubjectFiles};
use vips_sdk::document::Document;
use vips_sdk::runner::results;

/// Whether a JSON document is a DSSE envelope, read without keeping the rest.
#[derive(serde::Deserialize)]
struct Probe {
    #[serde(rename = "payloadType")]
    payload_type: Option<serde::de::IgnoredAny>,
}

#[derive(clap::Args)]
pub struct Args {
    /// A results file (`run --output results.json`) or a certification
    /// report (`run --report report.json`).
    input: PathBuf,
    /// Write the page here.
    #[arg(long, value_name = "OUT.html")]
    html: PathBuf,
    /// The suite the run used (for the stages' notes and graphs); default:
    /// the suite named after the component.
    #[arg(long)]
    suite: Option<String>,
    /// A certification report's trusted public key (SPKI PEM, from
    /// `keygen`); repeatable. Without one the signature is shown unchecked.
    #[arg(long = "pubkey", value_name = "PUB.pem")]
    pubkeys: Vec<PathBuf>,
}

/// The document of `suite` (a name or path), or of the suite named after
/// `component`: a name only, as the file's `component` is untrusted.
pub fn document(suite: Option<&str>, component: &str) -> Result<Document, String> {
    let path = match suite {
        Some(s) => return suites::locate(s)?.document(),
        None => suites::all()
            .into_iter()
            .find(|(name, _)| name == component)
            .map(|(_, path)| path)
            .ok_or_else(|| format!("no suite is named `{component}`"))?,
    };
    let doc = if path.is_dir() {
        vips_sdk::suite::suite_files(&path).0
    } else {
        path
    };
    Document::open(&doc).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> super::Outcome {
    let bytes = vips_sdk::limits::read_regular_file(&args.input, results::MAX_JSON_BYTES)
        .map_err(|e| format!("{}: {e}", args.input.display()))?;
    let bad = |e: String| format!("{}: {e}", args.input.display());
    let probe: Probe =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a JSON object: {e}")))?;
    let (mut view, component, sha256) = if probe.payload_type.is_some() {
        let envelope = certify::parse_envelope(&bytes).map_err(bad)?;
        let statement = certify::read_statement(&envelope).map_err(|e| bad(e.to_string()))?;
        let signature = if envelope.signatures.is_empty() {
            Signature::Unsigned
        } else if args.pubkeys.is_empty() {
            Signature::NotChecked(
                envelope
                    .signatures
                    .iter()
                    .map(|s| s.keyid.clone().unwrap_or_else(|| "an unnamed key".into()))
                    .collect(),
            )
        } else {
            let keys = args
                .pubkeys
                .iter()
                .map(|p| keys::read_public(p).map_err(|e| format!("{}: {e}", p.display())))
                .collect::<Result<Vec<_>, _>>()?;
            match certify::verify(&envelope, &keys, &SubjectFiles::default()) {
                // The given keys that verify it on their own (a
                // signature's keyid is only a hint).
                Ok(_) => Signature::Verified(
                    keys.iter()
                        .filter(|k| {
                            let one = std::slice::from_ref(*k);
                            certify::verify(&envelope, one, &SubjectFiles::default()).is_ok()
                        })
                        .map(keys::key_id)
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                Err(e) => Signature::Invalid(e.to_string()),
            }
        };
        let p = &statement.predicate;
        (
            View::of_report(p, signature),
            p.component.id.clone(),
            p.component.document_sha256.clone(),
        )
    } else {
        let run = results::read_json(&bytes).map_err(bad)?;
        (
            View::of_results(&run),
            run.component.clone(),
            run.document_sha256.clone(),
        )
    };
    let doc = document(args.suite.as_deref(), &component);
    let same = view.with_document(doc.as_ref().map_err(Clone::clone), &sha256);
    let doc = doc.ok().filter(|_| same);
    html::write(&args.html, &view, doc.as_ref())?;
    println!("wrote {} ({})", args.html.display(), html::PAGE);
    Ok(ExitCode::SUCCESS)
}
