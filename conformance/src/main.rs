//! `vips-conformance`: the command line of the VIPS SDK.
//!
//! Exit codes: 0 everything passed, 1 a stage failed or is not supported,
//! 2 a usage or input error (bad file, provider that does not load, ...).

mod commands;
mod html;
mod progress;
mod reports;
mod results;
mod suites;
mod table;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "vips-conformance",
    version,
    about = "Verify accelerator providers against VIPS golden vectors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a suite on a provider and print the per-stage results.
    Run(Box<commands::run::Args>),
    /// Judge stage outputs computed elsewhere (captured tensors) against a suite.
    Check(commands::check::Args),
    /// List the suites found, or the stages of one.
    List {
        /// A suite name, directory or document; without it, every suite found.
        suite: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show what a document or golden file holds: tensors, shapes, hashes, sizes.
    Inspect {
        /// A suite name, a suite directory, a document or a golden file.
        file: String,
        #[arg(long)]
        json: bool,
    },
    /// Build a golden file from a document and captured tensors (.npy, .npz, .safetensors).
    Pack(commands::pack::Args),
    /// Write a replay pack: a suite's stages at one tier, for a device to judge itself (docs/embedded.md).
    PackReplay(commands::pack_replay::Args),
    /// Compute a suite's golden file with the CPU reference provider in float64.
    Generate(commands::generate::Args),
    /// Write every tensor of a suite (inputs, weights, golden outputs) to a .safetensors file.
    Export {
        /// A suite name or directory.
        suite: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// List providers on the search path (and any given with --provider), their devices and kernels.
    Providers {
        /// Also load this provider library (a path or a name on the search path); repeatable.
        #[arg(long = "provider", value_name = "PATH|NAME")]
        providers: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// Write an Ed25519 key pair for signing reports (PKCS#8 and SPKI PEM).
    Keygen(commands::keygen::Args),
    /// Check certification reports: signature, provider and golden files, a model's components.
    Verify(commands::verify::Args),
    /// Merge the reports of `run --shard k/n` runs into one report.
    Merge(commands::merge::Args),
    /// Write the HTML page of a results file or a certification report.
    Report(commands::report::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => commands::run::run(*args),
        Command::List { suite, json } => commands::list::run(suite, json),
        Command::Check(args) => commands::check::run(args),
        Command::Inspect { file, json } => suites::locate(&file)
            .and_then(|l| commands::inspect::run(&l.path, json).map_err(|e| l.context(e))),
        Command::Pack(args) => commands::pack::run(args),
        Command::PackReplay(args) => commands::pack_replay::run(args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Export { suite, out } => commands::export::run(&suite, &out),
        Command::Providers { providers, json } => commands::providers::run(providers, json),
        Command::Keygen(args) => commands::keygen::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Merge(args) => commands::merge::run(args),
        Command::Report(args) => commands::report::run(args),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
