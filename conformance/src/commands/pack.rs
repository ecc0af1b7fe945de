//! `pack`: document + captured tensors → golden file.

use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::document::Document;

#[derive(clap::Args)]
pub struct Args {
    /// The VIPS document (suite.yaml).
    #[arg(long)]
    document: PathBuf,
    /// Captured tensors: .npy (named after the file), .npz, .safetensors; repeatable.
    #[arg(long = "tensors", required = true)]
    tensors: Vec<PathBuf>,
    /// Where to write the golden file (default: beside the document, `.golden`).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: Args) -> super::Outcome {
    let doc = Document::open(&args.document).map_err(|e| e.to_string())?;
    let (bytes, summary) = vips_sdk::pack::pack(&doc, &args.tensors).map_err(|e| e.to_string())?;
    let out = args
        .out
        .unwrap_or_else(|| args.document.with_extension("golden"));
    std::fs::write(&out, &bytes).map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    println!(
        "wrote {} ({} bytes): {} stored, {} seeded",
        out.display(),
        bytes.len(),
        summary.stored.len(),
        summary.seeded.len()
    );
    if !summary.unused.is_empty() {
        println!(
            "not in the document (ignored): {}",
            summary.unused.join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
