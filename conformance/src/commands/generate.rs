//! `generate`: compute a suite's golden file on the CPU reference provider.

use crate::suites;
use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::Provider;

#[derive(clap::Args)]
pub struct Args {
    /// A suite name or directory.
    suite: String,
    /// Where to write (default: the suite's suite.golden).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fail (exit 1) if the file on disk differs instead of writing it.
    #[arg(long)]
    check: bool,
    /// Inputs the document does not define itself: a photo for a `golden`
    /// image, a checkpoint for `weights` tensors (.npy, .npz, .safetensors);
    /// repeatable. `--weights` is the same option.
    #[arg(long = "tensors", visible_alias = "weights")]
    tensors: Vec<PathBuf>,
}

pub fn run(args: Args) -> super::Outcome {
    let located = suites::locate(&args.suite)?;
    let golden_path = located.files().1;
    let doc = located.document()?;
    let reference = Provider::open_by_name("cpu")
        .and_then(|p| p.device(0))
        .map_err(|e| e.to_string())?;
    let bytes =
        vips_sdk::generate::generate(&doc, &reference, &args.tensors).map_err(|e| e.to_string())?;
    let out = args.out.unwrap_or(golden_path);
    if args.check {
        let on_disk = vips_sdk::limits::read_regular_file(&out, u64::MAX)
            .map_err(|e| format!("{}: {e}", out.display()))?;
        if on_disk != bytes {
            println!(
                "{} differs from what generate computes ({} vs {} bytes)",
                out.display(),
                on_disk.len(),
                bytes.len()
            );
            return Ok(ExitCode::from(1));
        }
        println!("{} is up to date", out.display());
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::write(&out, &bytes).map_err(|e| format!("{}: cannot write: {e}", out.display()))?;
    println!("wrote {} ({} bytes)", out.display(), bytes.len());
    Ok(ExitCode::SUCCESS)
}
