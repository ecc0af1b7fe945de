//! `run`: a suite on a provider, stage by stage.

use crate::suites;
use clap::ValueEnum;
use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode, RunOptions, RunReport, Status};
use vips_sdk::suite::Suite;
use vips_sdk::Provider;

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Isolated,
    Chained,
}

#[derive(clap::Args)]
pub struct Args {
    /// A suite name (see `list`), a suite directory or a document.
    suite: String,
    /// The provider: a name on the search path or a library path.
    #[arg(long, default_value = "cpu")]
    provider: String,
    #[arg(long, default_value_t = 0)]
    device: u32,
    #[command(flatten)]
    common: Common,
}

/// What `run` and `check` share: the selection, the reference, the output.
#[derive(clap::Args)]
pub struct Common {
    /// isolated: golden inputs for every stage; chained: the provider's own outputs flow on.
    #[arg(long, value_enum, default_value = "isolated")]
    mode: ModeArg,
    /// Precision tiers (fp32, fp16, bf16, exact); repeatable.
    #[arg(long = "tier", default_value = "fp32")]
    tiers: Vec<String>,
    /// Only stages whose name matches this glob.
    #[arg(long)]
    stage: Option<String>,
    /// Run shard k of n (1-based), e.g. 2/4.
    #[arg(long)]
    shard: Option<String>,
    /// The reference provider: computes, in float64, the reference and the
    /// error bounds every verdict is made against.
    #[arg(long, default_value = "cpu")]
    reference: String,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    output: Option<PathBuf>,
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard `{s}`: expected k/n with 1 <= k <= n");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

impl Common {
    /// The suite, the run options and the reference device.
    pub fn open(&self, suite: &str) -> Result<(Suite, RunOptions, vips_sdk::Device), String> {
        let args = self;
        let tiers = args
            .tiers
            .iter()
            .map(|t| {
                Tier::from_name(t)
                    .ok_or_else(|| format!("--tier `{t}`: expected fp32, fp16, bf16 or exact"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let stage_glob = args
            .stage
            .as_deref()
            .map(|g| {
                globset::Glob::new(g)
                    .map(|g| g.compile_matcher())
                    .map_err(|e| format!("--stage: {e}"))
            })
            .transpose()?;
        let shard = args.shard.as_deref().map(parse_shard).transpose()?;
        let mode = match args.mode {
            ModeArg::Isolated => Mode::Isolated,
            ModeArg::Chained => Mode::Chained,
        };
        let suite = Suite::open(&suites::resolve(suite)?).map_err(|e| e.to_string())?;
        let reference = Provider::open_by_name(&args.reference)
            .and_then(|p| p.device(0))
            .map_err(|e| format!("reference provider: {e}"))?;
        let opts = RunOptions {
            mode,
            tiers,
            stage_glob,
            shard,
        };
        if runner::select(&suite, &opts).is_empty() {
            return Err("no stage matches the --stage/--shard selection".into());
        }
        Ok((suite, opts, reference))
    }

    /// Writes the report where asked, prints it, and gives the exit code.
    pub fn finish(&self, report: &RunReport) -> super::Outcome {
        let args = self;
        if let Some(path) = &args.output {
            let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
            std::fs::write(path, text)
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        }
        if args.json {
            super::print_json(report)?;
        } else {
            print_table(report);
        }
        Ok(if report.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

pub fn run(args: Args) -> super::Outcome {
    let (suite, opts, reference) = args.common.open(&args.suite)?;
    let device = Provider::open_by_name(&args.provider)
        .and_then(|p| p.device(args.device))
        .map_err(|e| e.to_string())?;
    let report = runner::run(&suite, &device, &reference, &opts).map_err(|e| e.to_string())?;
    args.common.finish(&report)
}

fn sci(v: f64) -> String {
    format!("{v:.2e}")
}

/// A normalised error: plain below 1000, scientific above.
fn e(v: f64) -> String {
    if v < 1e3 {
        format!("{v:.3}")
    } else {
        sci(v)
    }
}

fn print_table(r: &RunReport) {
    println!(
        "{} {} on {} {} ({})",
        r.component, r.component_version, r.provider, r.provider_version, r.device
    );
    for t in &r.tiers {
        println!(
            "\ntier {}, {} mode",
            t.tier.name(),
            serde_json::to_value(t.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        );
        // |e| is the error over its bound: below 1 passes; 1 − max|e| is the margin.
        println!(
            "{:<22} {:<10} {:<13} {:>8} {:>8} {:>8}  {:<28} {:>10} {:>9}",
            "stage",
            "execution",
            "status",
            "max|e|",
            "p99|e|",
            "rms e",
            "tightest operator (max|e|)",
            "drift L2",
            "time"
        );
        let (mut pass, mut fail, mut unsupported) = (0, 0, 0);
        for s in &t.stages {
            match s.status {
                Status::Pass => pass += 1,
                Status::NotSupported => unsupported += 1,
                _ => fail += 1,
            }
            let exec = s.execution.map_or("-", |e| match e {
                runner::Execution::Fused => "fused",
                runner::Execution::Decomposed => "decomposed",
                runner::Execution::Captured => "captured",
            });
            let worst_output = s
                .outputs
                .iter()
                .max_by(|a, b| a.judgement.max_e.total_cmp(&b.judgement.max_e));
            let (max_e, p99, rms, drift) = match worst_output {
                Some(o) => (
                    e(o.judgement.max_e),
                    e(o.judgement.p99_e),
                    e(o.judgement.rms_e),
                    sci(o.drift.rel_l2_error),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let tight = s.tightest_node.as_ref().map_or(String::new(), |n| {
                format!(
                    "{} {}",
                    n.op.trim_start_matches("vsdk."),
                    e(n.judgement.max_e)
                )
            });
            println!(
                "{:<22} {:<10} {:<13} {max_e:>8} {p99:>8} {rms:>8}  {tight:<28} {drift:>10} {:>7.1}ms",
                s.stage,
                exec,
                s.status.label(),
                s.seconds * 1e3
            );
            if let Some(reason) = &s.reason {
                println!("    {reason}");
            }
            for o in s.outputs.iter().filter(|o| !o.judgement.passed) {
                println!(
                    "    `{}`: {}",
                    o.tensor,
                    o.judgement.reason.as_deref().unwrap_or("")
                );
                if let Some(w) = &o.judgement.worst {
                    println!(
                        "      worst {:?}: {:.7} vs reference {:.7}, bound {}",
                        w.index,
                        w.actual,
                        w.reference,
                        sci(w.bound)
                    );
                }
            }
            for inv in s.invariants.iter().filter(|i| !i.held) {
                println!(
                    "    invariant {} does not hold: {}",
                    inv.invariant, inv.detail
                );
            }
            if let Some(d) = &s.drill_down {
                let j = &d.judgement;
                println!(
                    "    drill-down: first operator out of its bound is node {} `{}` -> `{}`: {}",
                    d.node,
                    d.op,
                    d.output,
                    j.reason.as_deref().unwrap_or("")
                );
            }
            if let Some(n) = &s.drill_down_note {
                println!("    drill-down: {n}");
            }
        }
        if let Some(first) = &t.first_divergent_stage {
            println!("first divergent stage: {first}");
        }
        for e2e in &t.end_to_end {
            println!(
                "end to end `{}`: rel L2 {} (limit {}), cosine {:.7} (limit {}): {}",
                e2e.tensor,
                sci(e2e.drift.rel_l2_error),
                sci(e2e.criterion.rel_l2),
                e2e.drift.cosine_similarity,
                e2e.criterion.cosine,
                if e2e.passed { "PASS" } else { "FAIL" }
            );
        }
        println!("{pass} passed, {fail} failed, {unsupported} not supported");
    }
    println!("\nverdict: {}", if r.passed { "PASS" } else { "FAIL" });
}
