//! deqp-runner's files: one CSV row per stage result (written as the run
//! goes, so a run that dies leaves what it finished), JUnit XML for CI
//! dashboards, and the baseline: a results CSV of a previous run whose
//! failures are expected. An expected failure that now passes is an
//! UNEXPECTED PASS, a failure: baselines only tighten. And the JSON results
//! file read back (`vips-conformance report`).

use super::{Execution, Mode, RunReport, StageResult, Status};
use std::collections::HashMap;
use std::fmt::Write as _;

pub const CSV_COLUMNS: [&str; 9] = [
    "tier",
    "mode",
    "round",
    "stage",
    "status",
    "execution",
    "max_e",
    "seconds",
    "reason",
];

fn label<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One CSV record of a stage result, in [`CSV_COLUMNS`] order.
pub fn csv_record(mode: Mode, r: &StageResult) -> [String; 9] {
    let max_e = r
        .outputs
        .iter()
        .map(|o| o.judgement.max_e)
        .fold(None, |m: Option<f64>, e| Some(m.map_or(e, |m| m.max(e))));
    [
        r.tier.name().to_string(),
        label(&mode),
        label(&r.round),
        r.stage.clone(),
        r.status.label().to_string(),
        r.execution.map_or("", Execution::name).to_string(),
        max_e.map(|e| format!("{e:.4e}")).unwrap_or_default(),
        format!("{:.3}", r.seconds),
        r.reason.clone().unwrap_or_default().replace('\n', " "),
    ]
}

/// Expected results by (tier, stage or contract case), from a results CSV.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    expected: HashMap<(String, bool, String), Status>,
}

/// A stage's main and differential rounds share its baseline row; a kernel
/// contract case (or the concurrency row) has its own.
fn is_contract(round: &str) -> bool {
    round == "contract"
}

/// A baseline file's size limit.
pub const MAX_BASELINE_BYTES: u64 = 16 << 20;

impl Baseline {
    /// Reads the main-round and kernel-contract rows of a results CSV: each
    /// stage that failed there (not UNEXPECTED PASS, FLAKY or MISSING) is
    /// expected to fail, in both rounds; each contract case that failed, as
    /// that case.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let headers = reader
            .headers()
            .map_err(|e| format!("header: {e}"))?
            .clone();
        let column = |name: &str| {
            headers
                .iter()
                .position(|h| h == name)
                .ok_or_else(|| format!("no `{name}` column (a baseline is a results CSV)"))
        };
        let (tier, round, stage, status) = (
            column("tier")?,
            column("round")?,
            column("stage")?,
            column("status")?,
        );
        let mut expected = HashMap::new();
        for (i, record) in reader.records().enumerate() {
            let line = i + 2;
            let record = record.map_err(|e| format!("line {line}: {e}"))?;
            let field = |c: usize| record.get(c).unwrap_or("");
            if field(round) != "main" && !is_contract(field(round)) {
                continue;
            }
            let s = Status::from_label(field(status))
                .ok_or_else(|| format!("line {line}: unknown status {:?}", field(status)))?;
            // Failures the provider produced are expected; an UNEXPECTED
            // PASS, a FLAKY stage or one never run (MISSING) is not one.
            let s = match s {
                Status::ExpectedFail => Status::Fail,
                other => other,
            };
            if s.is_failure()
                && !matches!(s, Status::UnexpectedPass | Status::Flaky | Status::Missing)
            {
                expected.insert(
                    (
                        field(tier).to_string(),
                        is_contract(field(round)),
                        field(stage).to_string(),
                    ),
                    s,
                );
            }
        }
        Ok(Baseline { expected })
    }

    pub fn len(&self) -> usize {
        self.expected.len()
    }

    pub fn is_empty(&self) -> bool {
        self.expected.is_empty()
    }

    /// Turns a failure the baseline expects into EXPECTED FAIL, and a pass
    /// it does not into UNEXPECTED PASS.
    pub fn apply(&self, r: &mut StageResult) {
        let key = (
            r.tier.name().to_string(),
            is_contract(&label(&r.round)),
            r.stage.clone(),
        );
        let Some(&expected) = self.expected.get(&key) else {
            return;
        };
        if r.status.is_failure() && r.status != Status::Missing {
            r.reason = Some(format!(
                "{} as the baseline expects{}",
                r.status.label(),
                r.reason
                    .as_deref()
                    .map(|x| format!(": {x}"))
                    .unwrap_or_default()
            ));
            r.status = Status::ExpectedFail;
        } else if r.status == Status::Pass {
            r.status = Status::UnexpectedPass;
            r.reason = Some(format!(
                "the baseline expects {}: update the baseline",
                expected.label()
            ));
        }
    }
}

/// Text for XML or HTML: the five markup characters escaped, control
/// characters XML 1.0 cannot carry made spaces.
pub fn markup_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML: one test suite per tier and round, one test case per stage.
pub fn junit(report: &RunReport) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    for t in &report.tiers {
        for (round, stages) in [
            ("main", &t.stages),
            ("differential", &t.differential),
            ("contract", &t.contract),
        ] {
            if stages.is_empty() {
                continue;
            }
            let failures = stages.iter().filter(|s| s.status.is_failure()).count();
            let seconds: f64 = stages.iter().map(|s| s.seconds).sum();
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}.{}.{round}\" tests=\"{}\" failures=\"{failures}\" time=\"{seconds:.3}\">",
                markup_text(&report.component),
                t.tier.name(),
                stages.len()
            );
            for s in stages.iter() {
                let _ = write!(
                    out,
                    "    <testcase classname=\"{}.{}.{round}\" name=\"{}\" time=\"{:.3}\"",
                    markup_text(&report.component),
                    t.tier.name(),
                    markup_text(&s.stage),
                    s.seconds
                );
                let reason = markup_text(s.reason.as_deref().unwrap_or(""));
                match s.status {
                    Status::Pass => out.push_str("/>\n"),
                    Status::ExpectedFail | Status::NotCaptured => {
                        let _ = writeln!(
                            out,
                            ">\n      <skipped message=\"{}: {reason}\"/>\n    </testcase>",
                            s.status.label()
                        );
                    }
                    status => {
                        let _ = writeln!(
                            out,
                            ">\n      <failure type=\"{}\" message=\"{}: {reason}\"/>\n    </testcase>",
                            status.label(),
                            status.label()
                        );
                    }
                }
            }
            out.push_str("  </testsuite>\n");
        }
    }
    out.push_str("</testsuites>\n");
    out
}

/// A JSON results file (`run --output`) is at most this many bytes. Each
/// error map is bounded (at most about 2 MB as written, one value a line),
/// and a map is kept per failing output and operator: a run of every DINOv2
/// stage failing at three tiers writes a few hundred MB at most.
pub const MAX_JSON_BYTES: u64 = 1 << 30;

/// A JSON results file read back, untrusted: it must decode as a run's
/// report and every error map in it must be one a page can draw
/// ([`vips_verdict::error_map::ErrorMap::validate`]).
pub fn read_json(bytes: &[u8]) -> Result<RunReport, String> {
    let report: RunReport = serde_json::from_slice(bytes).map_err(|e| {
        format!("not a results file (`run --output`) nor a certification report: {e}")
    })?;
    for t in &report.tiers {
        for s in t.stages.iter().chain(&t.differential).chain(&t.contract) {
            let outputs = s.outputs.iter().map(|o| (&o.tensor, &o.error_map));
            let nodes = s.nodes.iter().chain(&s.drill_down);
            for (name, map) in outputs.chain(nodes.map(|n| (&n.output, &n.error_map))) {
                if let Some(m) = map {
                    m.validate().map_err(|e| {
                        format!(
                            "tier {}, stage `{}`: the error map of `{name}`: {e}",
                            t.tier.name(),
                            s.stage
                        )
                    })?;
                }
            }
        }
    }
    Ok(report)
}
