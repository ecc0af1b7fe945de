//! `pack-replay`: a replay pack of a suite's stages at one tier, for a device
//! to judge itself without a host (docs/embedded.md, docs/golden-format.md).

use crate::suites;
use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::Provider;

#[derive(clap::Args)]
pub struct Args {
    /// A suite name or directory.
    suite: String,
    /// The tier the device computes at: fp32, fp16, bf16 or exact.
    #[arg(long)]
    tier: String,
    /// A stage to include (repeatable, or comma-separated); default: every stage.
    #[arg(long = "stages", visible_alias = "stage", value_delimiter = ',')]
    stages: Vec<String>,
    /// Where to write the pack (.vrp).
    #[arg(long)]
    out: PathBuf,
    /// The reference provider that computes references and bounds in float64.
    #[arg(long, default_value = "cpu")]
    reference: String,
}

pub fn run(args: Args) -> super::Outcome {
    let tier = super::parse_tier(&args.tier)?;
    let located = suites::locate(&args.suite)?;
    let suite = located.open()?;
    let reference = Provider::open_by_name(&args.reference)
        .and_then(|p| p.device(0))
        .map_err(|e| format!("--reference {}: {e}", args.reference))?;
    // Written beside the destination, renamed once complete: a failure
    // leaves no half pack under the name.
    let partial = args.out.with_extension("vrp.partial");
    let file = std::fs::File::create(&partial)
        .map_err(|e| format!("{}: cannot write: {e}", partial.display()))?;
    let written = vips_sdk::replay::write(
        &suite,
        tier,
        &args.stages,
        &reference,
        std::io::BufWriter::new(file),
    );
    let summary = match written {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(format!("{}: {e}", located.path.display()));
        }
    };
    std::fs::rename(&partial, &args.out)
        .map_err(|e| format!("{}: cannot write: {e}", args.out.display()))?;
    println!(
        "wrote {} ({} bytes, {} frames, largest {} bytes): {} at {}, {} output(s)",
        args.out.display(),
        summary.bytes,
        summary.frames,
        summary.max_frame,
        summary.stages.join(", "),
        tier.name(),
        summary.outputs.len()
    );
    Ok(ExitCode::SUCCESS)
}
