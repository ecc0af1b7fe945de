//! `run`: a suite on a provider, stage by stage.

use crate::progress::Bars;
use crate::reports::{KeySource, ReportFiles};
use crate::results::ResultFiles;
use crate::{suites, table};
use clap::ValueEnum;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use vips_sdk::certify::Statement;
use vips_sdk::compare::Tier;
use vips_sdk::execution::Backend;
use vips_sdk::isolation::{Failure, Worker};
use vips_sdk::runner::{self, Baseline, Event, Mode, RunOptions, RunReport};
use vips_sdk::suite::Suite;
use vips_sdk::{HostTensor, Provider};

#[derive(Clone, Copy, ValueEnum)]
enum AfterTimeout {
    Run,
    Skip,
}

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
    /// Load the provider in this process instead of a worker process (for
    /// debugging a driver: a crash then ends the run).
    #[arg(long)]
    no_isolate: bool,
    /// Seconds a stage may take (it runs twice); default: 2 s plus 50 times
    /// what the float64 reference took for the same stage on this host.
    /// Enforced only with isolation.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Seconds added to that when a stage calls a kernel for the first time
    /// in its worker process (a GPU driver compiles its kernels and sets up
    /// its device on first use; a restarted worker pays again); default 30.
    #[arg(long, value_name = "SECONDS")]
    first_call_allowance: Option<f64>,
    /// After a kernel timed out: `run` every later stage anyway (each judged,
    /// as deqp-runner does), or `skip` those using that kernel (TIMEOUT, not
    /// run; the results and report say so).
    #[arg(long, value_enum, default_value = "run")]
    after_timeout: AfterTimeout,
    /// The run-time seed (the differential round's inputs, the guard
    /// layouts); default: fresh. Recorded in the results.
    #[arg(long)]
    seed: Option<u64>,
    /// The differential round's nonce, mixed with the seed (default: fresh,
    /// recorded). Given with --seed, it repeats a run's differential inputs
    /// exactly; a run with a given nonce is never certified.
    #[arg(long)]
    nonce: Option<u64>,
    /// Skip the differential round (fresh inputs): the run is then no
    /// evidence against a provider that replays stored outputs.
    #[arg(long)]
    no_differential: bool,
    /// Skip the kernel contract (each kernel with strided, broadcast and
    /// extreme inputs, and concurrent calls): the run then certifies nothing.
    #[arg(long)]
    no_contract: bool,
    /// Fail stages whose two runs differ bitwise (default: reported only).
    #[arg(long)]
    require_deterministic: bool,
    /// Re-run a failing stage up to N times; one that then passes is FLAKY
    /// (never a pass).
    #[arg(long, value_name = "N", default_value_t = 0)]
    flake_retries: u32,
    /// Stop after N failing stages; the rest are MISSING.
    #[arg(long, value_name = "N")]
    max_fails: Option<usize>,
    /// Expected failures: a results CSV written by an earlier run
    /// (`--output F` writes `F.csv`).
    #[arg(long, value_name = "CSV")]
    baseline: Option<PathBuf>,
    /// Write the certification report (a DSSE envelope, docs/report-format.md)
    /// here; with several tiers, one per tier: put `{tier}` in the path.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Sign the report with this Ed25519 private key (PKCS#8 PEM, from
    /// `keygen`); default: the file $VIPS_SIGN_KEY names. Without a key the
    /// report is written unsigned. The key is read only after every worker
    /// is gone, and hidden from them.
    #[arg(long, value_name = "KEY.pem", requires = "report")]
    sign_key: Option<PathBuf>,
    /// Read the signing key from this open file descriptor (e.g. `3<key.pem`)
    /// after the run; never passed to a worker.
    #[arg(
        long,
        value_name = "FD",
        requires = "report",
        conflicts_with = "sign_key"
    )]
    sign_key_fd: Option<i32>,
    /// The most memory (MiB) the provider's worker may use; default: 1 GiB
    /// plus 16 times the largest stage's tensors (docs/runner.md).
    #[arg(long, value_name = "MIB")]
    memory_limit: Option<u64>,
    /// Also show this path to the worker, read-only (a driver's firmware or
    /// configuration outside its library's directory); repeatable.
    #[arg(long, value_name = "PATH")]
    sandbox_bind: Vec<PathBuf>,
    /// Also show this directory to the worker, writable (a kernel cache);
    /// repeatable; recorded in the report.
    #[arg(long, value_name = "DIR")]
    sandbox_bind_rw: Vec<PathBuf>,
    /// Also write every stage's outputs, as the provider computed them, to
    /// this .safetensors file (`check --tensors` reads it back); with several
    /// tiers put `{tier}` in the path.
    #[arg(long, value_name = "FILE.safetensors")]
    save_outputs: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
}

/// What `run` and `check` share: the selection, the reference, the output.
#[derive(clap::Args)]
pub struct Common {
    /// isolated: golden inputs for every stage; chained: the provider's own
    /// outputs flow on. Default: isolated for `run`; for `check`, chained
    /// where the captures hold what fed the stages, else isolated.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
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
    /// Compute every golden-fed stage's reference afresh, and keep none:
    /// without it they are kept between runs in `$VSDK_REFERENCE_CACHE`
    /// (default `$XDG_CACHE_HOME/vips-sdk/reference`, 2 GiB at most).
    #[arg(long)]
    no_reference_cache: bool,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print every column of the table (execution, p99|e|, drift) and every
    /// coverage warning, with long lines unwrapped; without it the table
    /// keeps to 100 columns.
    #[arg(long, conflicts_with = "json")]
    wide: bool,
    /// Add where each stage's time went to the table: the provider's
    /// kernels, the float64 reference, the judgement, the isolation I/O
    /// (the JSON results always carry them, as `timings`).
    #[arg(long, conflicts_with = "json")]
    timings: bool,
    /// No progress bars (they are drawn only when stderr is a terminal, and
    /// never with --json).
    #[arg(long, short)]
    pub quiet: bool,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Also write the HTML report (docs/report.md) to this file.
    #[arg(long, value_name = "OUT.html")]
    html: Option<PathBuf>,
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
            .map(|t| super::parse_tier(t))
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
        let mode = self.mode().unwrap_or(Mode::Isolated);
        let suite = suites::locate(suite)?.open()?;
        let reference = Provider::open_by_name(&args.reference)
            .and_then(|p| p.device(0))
            .map_err(|e| format!("reference provider: {e}"))?;
        let opts = RunOptions {
            mode,
            tiers,
            stage_glob,
            shard,
            reference_cache: (!args.no_reference_cache)
                .then(vips_sdk::reference_cache::ReferenceCache::from_env)
                .flatten(),
            return_freed_memory: true,
            ..RunOptions::default()
        };
        if runner::select(&suite, &opts).is_empty() {
            return Err("no stage matches the --stage/--shard selection".into());
        }
        Ok((suite, opts, reference))
    }

    /// The mode asked for with `--mode`.
    pub fn mode(&self) -> Option<Mode> {
        self.mode.map(|m| match m {
            ModeArg::Isolated => Mode::Isolated,
            ModeArg::Chained => Mode::Chained,
        })
    }

    /// The results files, created now (see `ResultFiles`).
    pub fn result_files(&self) -> Result<ResultFiles, String> {
        ResultFiles::create(self.output.as_deref(), self.html.as_deref())
    }

    /// Writes the report where asked, prints it, and gives the exit code:
    /// 0 only for a passing verdict.
    pub fn finish(
        &self,
        report: &RunReport,
        suite: &Suite,
        files: &mut ResultFiles,
    ) -> super::Outcome {
        let written = files.finish(report, &suite.document);
        if self.json {
            super::print_json(report)?;
        } else {
            table::print(report, Some(&suite.document), self.wide, self.timings);
        }
        // Where each file went, after the table (on stderr beside JSON).
        for line in files.written() {
            super::say(&line, self.json);
        }
        written?;
        Ok(if report.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// `--save-outputs`'s file for `tier`.
fn saved_path(template: &std::path::Path, tier: Tier) -> PathBuf {
    PathBuf::from(template.to_string_lossy().replace("{tier}", tier.name()))
}

pub fn run(args: Args) -> super::Outcome {
    // Before anything else: no process of this user may read or write this
    // one's memory (the key, once read, and the results).
    vips_sdk::sandbox::tree::protect_runner();
    let (suite, mut opts, reference) = args.common.open(&args.suite)?;
    opts.differential = !args.no_differential;
    opts.contract = !args.no_contract;
    opts.require_deterministic = args.require_deterministic;
    opts.flake_retries = args.flake_retries;
    opts.max_fails = args.max_fails;
    opts.skip_after_timeout = matches!(args.after_timeout, AfterTimeout::Skip);
    if let Some(seed) = args.seed {
        opts.seed = seed;
    }
    if let Some(nonce) = args.nonce {
        opts.nonce = nonce;
        opts.nonce_given = true;
    }
    if let Some(t) = args.timeout {
        if !(t.is_finite() && t > 0.0 && t <= 86_400.0) {
            return Err(format!("--timeout {t}: expected seconds in (0, 86400]"));
        }
        opts.timeout = Some(Duration::from_secs_f64(t));
    }
    if let Some(path) = &args.baseline {
        let text = crate::results::read_baseline(path)?;
        opts.baseline =
            Some(Baseline::parse(&text).map_err(|e| format!("baseline {}: {e}", path.display()))?);
    }
    // Where the key is and the report files, before the run: a missing key
    // or an unwritable path fails now, not after the run. The key itself is
    // read once every worker is gone.
    let key = match &args.report {
        Some(_) => KeySource::locate(args.sign_key.as_deref(), args.sign_key_fd)?,
        None => None,
    };
    let report_files = args
        .report
        .as_deref()
        .map(|p| ReportFiles::create(p, &opts.tiers))
        .transpose()?;
    if let Some(p) = &args.save_outputs {
        if opts.tiers.len() > 1 && !p.to_string_lossy().contains("{tier}") {
            return Err(format!(
                "--save-outputs {}: with several tiers put `{{tier}}` in the path (e.g. outputs-{{tier}}.safetensors)",
                p.display()
            ));
        }
        // An unwritable path fails now, not after the run.
        for &tier in &opts.tiers {
            let path = saved_path(p, tier);
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| format!("--save-outputs {}: cannot write: {e}", path.display()))?;
        }
    }
    let mut files = args.common.result_files()?;
    let backend = if args.no_isolate {
        let device = Provider::open_by_name(&args.provider)
            .and_then(|p| p.device(args.device))
            .map_err(|e| e.to_string())?;
        Backend::InProcess(device)
    } else {
        let library = Provider::locate(&args.provider).map_err(|e| e.to_string())?;
        let memory = args
            .memory_limit
            .map(|m| {
                m.checked_mul(1 << 20)
                    .filter(|&b| b >= 16 << 20)
                    .ok_or_else(|| format!("--memory-limit {m}: expected MiB, at least 16"))
            })
            .transpose()?;
        let mut command = vips_sdk::runner::worker_command(&suite, &opts, &library, memory)?;
        for (paths, writable) in [(&args.sandbox_bind, false), (&args.sandbox_bind_rw, true)] {
            for p in paths {
                if !p.exists() {
                    return Err(format!("--sandbox-bind {}: no such path", p.display()));
                }
                command.policy.bind(p, writable);
            }
        }
        if let Some(path) = key.as_ref().and_then(KeySource::path) {
            command.policy.mask(path);
        }
        let mut worker = Worker::new(command, library, args.device);
        if let Some(t) = args.first_call_allowance {
            if !(t.is_finite() && (0.0..=86_400.0).contains(&t)) {
                return Err(format!(
                    "--first-call-allowance {t}: expected seconds in [0, 86400]"
                ));
            }
            worker = worker.with_first_call_allowance(Duration::from_secs_f64(t));
        }
        // A library that does not load is a usage error, as in process; one
        // that crashes while loading gets its verdict (CRASHED).
        if let Err(Failure::Provider(m)) = worker.open() {
            return Err(m);
        }
        Backend::Isolated(Box::new(worker))
    };
    let mode = opts.mode;
    let bars = Bars::new(&opts.tiers, args.common.quiet || args.common.json);
    let mut saved: BTreeMap<Tier, Vec<(String, HostTensor)>> = BTreeMap::new();
    let report = runner::run_on(&suite, backend, &reference, &opts, &mut |e| {
        bars.event(&e);
        match e {
            Event::Finished(r) => files.stage(mode, r),
            Event::Outputs { tier, outputs, .. } if args.save_outputs.is_some() => {
                let tensors = saved.entry(tier).or_default();
                tensors.extend(outputs.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            _ => {}
        }
    });
    bars.clear();
    let report = report.map_err(|e| e.to_string())?;
    if let Some(template) = &args.save_outputs {
        for (tier, tensors) in &mut saved {
            tensors.sort_by(|a, b| a.0.cmp(&b.0));
            let path = saved_path(template, *tier);
            super::export::write(&path, tensors)?;
            files.wrote(&path, format!("the outputs, {} tensors", tensors.len()));
        }
    }
    // Every worker is gone (run_on released the provider and confirmed its
    // processes ended): only now is the key read, and only if that was
    // confirmed.
    let confirmed = report
        .identity
        .as_ref()
        .and_then(|id| id.sandbox.as_ref())
        .is_none_or(|s| s.tree_confirmed_dead);
    let signer = match key {
        Some(_) if !confirmed => {
            eprintln!("warning: a worker's processes could not be confirmed gone: the signing key is not read, the report is written unsigned");
            None
        }
        key => key.map(KeySource::read).transpose()?,
    };
    if let Some(reports) = &report_files {
        let paths: Vec<String> = reports.paths().map(|p| p.display().to_string()).collect();
        files.remark(format!(
            "This run also wrote its certification report ({}), {}: its page, with the verdict and the signature checked, is `vips-conformance report REPORT --html OUT --pubkey PUB.pem`.",
            paths.join(", "),
            match &signer {
                Some(s) => format!("signed by {}", s.id),
                None => "unsigned".into(),
            }
        ));
    }
    let code = args.common.finish(&report, &suite, &mut files)?;
    if let Some(report_files) = report_files {
        let statements = Statement::of_run(&suite, &report);
        report_files.write(&statements, signer.as_ref(), args.common.json)?;
    }
    Ok(code)
}
