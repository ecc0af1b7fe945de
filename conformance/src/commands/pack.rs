//! `pack`: document + captured tensors → golden file.

use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::document::Document;
use vips_sdk::Provider;

#[derive(clap::Args)]
pub struct Args {
    /// The VIPS document (suite.yaml).
    #[arg(long)]
    document: PathBuf,
    /// Captured tensors: .npy (named after the file), .npz, .safetensors;
    /// repeatable. Inputs no stage produces and `weights` are stored; stage
    /// outputs are computed by the float64 reference, and the captured ones
    /// judged against it as `check` judges an engine's.
    #[arg(long = "tensors", required = true)]
    tensors: Vec<PathBuf>,
    /// Where to write the golden file (default: beside the document, `.golden`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the golden file even where captured stage outputs disagree with
    /// the reference beyond the error model's bounds (listed as warnings).
    #[arg(long)]
    allow_disagreement: bool,
}

pub fn run(args: Args) -> super::Outcome {
    let doc = Document::open(&args.document).map_err(|e| e.to_string())?;
    let reference = Provider::open_by_name("cpu")
        .and_then(|p| p.device(0))
        .map_err(|e| format!("reference provider: {e}"))?;
    let (bytes, summary) =
        vips_sdk::pack::pack(&doc, &reference, &args.tensors, args.allow_disagreement)
            .map_err(|e| e.to_string())?;
    let out = args
        .out
        .unwrap_or_else(|| args.document.with_extension("golden"));
    std::fs::write(&out, &bytes).map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    println!(
        "wrote {} ({} bytes): {} stored, {} seeded, {} computed by the float64 reference",
        out.display(),
        bytes.len(),
        summary.stored.len(),
        summary.seeded.len(),
        summary.computed.len()
    );
    match &summary.judged {
        Some(how) => println!(
            "captured outputs judged {how}: {} stage(s) agree{}",
            summary.agreeing.len(),
            if summary.not_captured.is_empty() {
                String::new()
            } else {
                format!(", not captured: {}", summary.not_captured.join(", "))
            }
        ),
        None => println!("no stage output was captured: nothing judged against the reference"),
    }
    for d in &summary.disagreeing {
        eprintln!("warning: disagrees with the reference: {d}");
    }
    if !summary.unused.is_empty() {
        println!(
            "not in the document (ignored): {}",
            summary.unused.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
