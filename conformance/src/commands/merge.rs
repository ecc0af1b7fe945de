//! `merge`: the reports of `run --shard k/n` runs (one machine or a fleet)
//! combined into one report, checked to be shards of the same run, with the
//! verdict assessed over all of them (a missing shard leaves it NOT
//! CERTIFIED), signed here.

use crate::reports::{describe, signer, signing, write_envelope};
use std::fs::File;
use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::certify::{self, keys, merge, Statement, Verdict};

#[derive(clap::Args)]
pub struct Args {
    /// The shards' report files (often unsigned: shards run on machines
    /// without the key, and the merge signs).
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// Where to write the merged report.
    #[arg(long, value_name = "FILE")]
    report: PathBuf,
    /// Sign with this private key; default: the file $VIPS_SIGN_KEY names.
    #[arg(long, value_name = "KEY.pem")]
    sign_key: Option<PathBuf>,
    /// Require every shard report to be signed by this key (repeatable).
    #[arg(long = "pubkey", value_name = "PUB.pem")]
    pubkeys: Vec<PathBuf>,
}

pub fn run(args: Args) -> super::Outcome {
    let signer = signer(args.sign_key.as_deref())?;
    let trusted = args
        .pubkeys
        .iter()
        .map(|p| keys::read_public(p).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    if args.shards.len() > merge::MAX_SHARDS {
        return Err(format!(
            "{} shard reports, more than the {} merged at once",
            args.shards.len(),
            merge::MAX_SHARDS
        ));
    }
    let mut predicates = Vec::with_capacity(args.shards.len());
    for path in &args.shards {
        let at = |e: certify::VerifyError| format!("{}: {e}", path.display());
        let envelope = certify::read_envelope(path).map_err(|e| e.to_string())?;
        let statement = if trusted.is_empty() {
            certify::read_statement(&envelope).map_err(at)?
        } else {
            certify::verify(&envelope, &trusted, &Default::default()).map_err(at)?
        };
        predicates.push(statement.predicate);
    }
    let merged = merge::merge(predicates).map_err(|e| e.to_string())?;
    let statement = Statement::new(merged);
    let mut file = File::create(&args.report)
        .map_err(|e| format!("{}: cannot write: {e}", args.report.display()))?;
    let envelope = statement.envelope(signer.as_ref().map(|s| &s.key))?;
    write_envelope(&args.report, &mut file, &envelope)?;
    if trusted.is_empty() {
        eprintln!("note: the shard reports' signatures were not checked (no --pubkey)");
    }
    println!(
        "merged {} shard report(s) into {}, {}",
        args.shards.len(),
        args.report.display(),
        signing(signer.as_ref())
    );
    for line in describe(&statement) {
        println!("  {line}");
    }
    Ok(if statement.predicate.verdict == Verdict::Certified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
