//! `check`: stage outputs computed outside the SDK (an engine's own kernels,
//! PyTorch) judged with the error model, as `run` judges a provider's.

use super::run::Common;
use std::collections::HashMap;
use std::path::PathBuf;
use vips_sdk::runner;

#[derive(clap::Args)]
pub struct Args {
    /// A suite name (see `list`), a suite directory or a document.
    suite: String,
    /// Captured stage outputs by tensor name (.npy named after the tensor,
    /// .npz, .safetensors); repeatable. Each stage is judged as computed from
    /// its inputs in the tier's dtype (capture at the precision you compute
    /// in: float32 work checks at fp32); captures are rounded to it (the
    /// stage's notes say so). In chained mode (the default where the
    /// captures hold what fed the stages) each stage's inputs are the
    /// captured outputs of the stages before it, fed as captured where wider
    /// than the tier (float32 at bf16). In either mode a capture named
    /// `INPUT@STAGE` is that stage's input exactly as the engine fed it (a
    /// float32 parameter or activation at bf16).
    #[arg(long = "tensors", required = true)]
    tensors: Vec<PathBuf>,
    #[command(flatten)]
    common: Common,
}

pub fn run(args: Args) -> super::Outcome {
    let (suite, mut opts, reference) = args.common.open(&args.suite)?;
    let mut files = args.common.result_files()?;
    let mut captured = HashMap::new();
    let mut from = HashMap::new();
    let mut skipped = Vec::new();
    for path in &args.tensors {
        // Only the suite's tensors and stage inputs are read (an unused
        // `.npz` member is not inflated); an `INPUT@STAGE` (or `NODE@STAGE`) that names
        // no stage input (or intermediate) is a mistake worth stopping for, not a capture to skip.
        let misnamed = std::cell::RefCell::new(None);
        let wanted = |name: &str| {
            let known = runner::is_captured_name(&suite, name);
            if !known && name.contains('@') {
                misnamed
                    .borrow_mut()
                    .get_or_insert_with(|| name.to_string());
            }
            known
        };
        let capture = vips_sdk::capture::read_selected(path, &wanted).map_err(|e| e.to_string())?;
        if let Some(name) = misnamed.into_inner() {
            return Err(format!(
                "{}: `{name}` names no input or intermediate of a stage (INPUT@STAGE or NODE@STAGE, with INPUT one of the stage's inputs, NODE the output of a node of its graph: see `vips-conformance list {}` and the document)",
                path.display(),
                args.suite
            ));
        }
        skipped.extend(capture.skipped);
        for (name, t) in capture.tensors {
            if let Some(first) = from.insert(name.clone(), path.clone()) {
                return Err(format!(
                    "`{name}` is captured twice: in {} and in {}",
                    first.display(),
                    path.display()
                ));
            }
            captured.insert(name, t);
        }
    }
    if captured.is_empty() {
        skipped.truncate(5);
        return Err(format!(
            "no captured tensor is named after a tensor of suite `{}` (found: {}): name them as `vips-conformance inspect {}` lists",
            args.suite,
            if skipped.is_empty() { "none".into() } else { skipped.join(", ") },
            args.suite
        ));
    }
    // As the engine ran: chained where it captured what fed its stages
    // (said after the table).
    let chosen = args.common.mode().is_none().then(|| {
        let (mode, why) = runner::check_mode(&suite, &captured, &runner::select(&suite, &opts));
        opts.mode = mode;
        why
    });
    let label = args
        .tensors
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let report = runner::check(
        &suite,
        &captured,
        &format!("captured: {label}"),
        &reference,
        &opts,
    )
    .map_err(|e| e.to_string())?;
    for t in &report.tiers {
        for s in &t.stages {
            files.stage(opts.mode, s);
        }
    }
    let code = args.common.finish(&report, &suite, &mut files)?;
    if let Some(why) = chosen {
        super::say(&why, args.common.json);
    }
    Ok(code)
}
