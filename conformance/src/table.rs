//! The results table printed by `run` and `check`. It keeps to [`WIDTH`]
//! columns: the execution, `p99|e|` and drift columns, the full library
//! hash and each coverage warning are shown with `--wide`, which also
//! leaves long lines unwrapped.

use vips_sdk::document::Document;
use vips_sdk::error_model::Judgement;
use vips_sdk::runner::{self, RunReport, StageResult, Status, TierReport};

/// The columns the table and the lines about it keep to, without `--wide`.
const WIDTH: usize = 100;

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

/// The least tolerance that would pass a failing judgement, in words.
fn least(j: &Judgement) -> String {
    match j.tolerance_factor {
        Some(k) if k.is_finite() => format!(" (passes with the bound ×{})", e(k)),
        Some(_) => " (no bound passes it)".into(),
        None => String::new(),
    }
}

/// `text` in lines of at most `width` columns (`None`: unwrapped), the
/// first indented by `indent` spaces and the rest by two more. A word longer
/// than a line (a path) keeps its own line.
fn wrap(text: &str, indent: usize, width: Option<usize>) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, paragraph) in text.lines().enumerate() {
        let mut line = " ".repeat(if i == 0 { indent } else { indent + 2 });
        let Some(width) = width else {
            // As it is (a stderr tail keeps its spacing).
            lines.push(line + paragraph);
            continue;
        };
        let mut empty = true;
        for word in paragraph.split(' ').filter(|w| !w.is_empty()) {
            let fits = line.chars().count() + usize::from(!empty) + word.chars().count() <= width;
            if !empty && !fits {
                lines.push(std::mem::replace(&mut line, " ".repeat(indent + 2)));
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            line.push_str(word);
            empty = false;
        }
        lines.push(line);
    }
    if lines.is_empty() {
        lines.push(" ".repeat(indent));
    }
    lines
}

/// How the table is printed.
struct Printer<'a> {
    wide: bool,
    timings: bool,
    document: Option<&'a Document>,
}

impl Printer<'_> {
    fn shows(&self, c: &Column) -> bool {
        match c.show {
            Show::Always => true,
            Show::Wide => self.wide,
            Show::Timings => self.timings,
        }
    }

    fn width(&self) -> Option<usize> {
        (!self.wide).then_some(WIDTH)
    }

    /// A line of prose, wrapped to the width.
    fn say(&self, indent: usize, text: &str) {
        for line in wrap(text, indent, self.width()) {
            println!("{line}");
        }
    }
}

/// When a column is shown.
#[derive(Clone, Copy)]
enum Show {
    Always,
    /// With `--wide`.
    Wide,
    /// With `--timings`.
    Timings,
}

/// A column: its header, whether it aligns right, when it is shown.
struct Column {
    head: &'static str,
    right: bool,
    show: Show,
}

const fn col(head: &'static str, right: bool, wide: bool) -> Column {
    Column {
        head,
        right,
        show: if wide { Show::Wide } else { Show::Always },
    }
}

const fn timing(head: &'static str) -> Column {
    Column {
        head,
        right: true,
        show: Show::Timings,
    }
}

const COLUMNS: [Column; 15] = [
    col("stage", false, false),
    col("execution", false, true),
    col("status", false, false),
    col("max|e|", true, false),
    col("p99|e|", true, true),
    col("rms t", true, false),
    col("tolerance", true, false),
    // The tightest operator and its own |e| (against its own bound, not
    // the stage's): the legend says so.
    col("tightest op", false, false),
    col("own|e|", true, false),
    col("drift L2", true, true),
    col("time", true, false),
    timing("provider"),
    timing("reference"),
    timing("judgement"),
    timing("I/O"),
];

/// What `--timings` adds, in the legend.
const LEGEND_TIMINGS: &str = "provider: inside the provider's kernels (both guarded runs; the \
    worker's measure); reference: the stage's float64 reference, bounds and σ; judgement: the \
    verdict, each node's reference included; I/O: running the program less the kernels (inputs \
    placed, guards, the worker's pipes).";

/// The legend under the tables: what the numbers are.
const LEGEND: &str = "max|e|: the stage's largest |e| = |actual − reference| / bound (below 1 \
    passes). own|e|: the tightest operator's |e| against its own bound (fed the provider's own \
    inputs), not the stage's. rms t: the error's rms over a correct implementation's σ. tolerance: \
    the least factor on the bound that passes.";

/// What `--wide` adds, in the legend.
const LEGEND_WIDE: &str =
    "p99|e|: the 99th percentile of |e|; drift L2: ‖actual − golden‖ / ‖golden‖.";
const LEGEND_NARROW: &str =
    "--wide adds the execution, p99|e| and drift L2 columns and every coverage warning.";

/// A stage's row, one cell per column of [`COLUMNS`].
fn row(s: &StageResult) -> Vec<String> {
    let worst_output = s
        .outputs
        .iter()
        .max_by(|a, b| a.judgement.max_e.total_cmp(&b.judgement.max_e));
    let (max_e, p99, drift) = match worst_output {
        Some(o) => (
            e(o.judgement.max_e),
            e(o.judgement.p99_e),
            sci(o.drift.rel_l2_error),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    let rms = s
        .outputs
        .iter()
        .filter_map(|o| o.judgement.rms_t)
        .reduce(f64::max)
        .map_or("-".into(), e);
    let (op, own) = s
        .tightest_node
        .as_ref()
        .map_or((String::new(), String::new()), |n| {
            (
                n.op.trim_start_matches("vsdk.").to_string(),
                e(n.judgement.max_e),
            )
        });
    vec![
        s.stage.clone(),
        s.execution.map_or("-", runner::Execution::name).to_string(),
        s.status.label().to_string(),
        max_e,
        p99,
        rms,
        s.least_tolerance().to_string(),
        op,
        own,
        drift,
        ms(s.seconds),
        ms(s.timings.provider),
        ms(s.timings.reference),
        ms(s.timings.judgement),
        ms(s.timings.io),
    ]
}

fn ms(seconds: f64) -> String {
    format!("{:.1}ms", seconds * 1e3)
}

/// A line under a stage's row: its indent and text.
type Detail = (usize, String);

/// The lines under a stage's row: why it did not pass, what was found.
/// Coverage warnings only with `--wide` (the table counts them).
fn details(s: &StageResult, notes: &[String], wide: bool) -> Vec<Detail> {
    let mut lines = Vec::new();
    // A failure on the stage's own data is detailed below (outputs,
    // drill-down); its one-line reason is for the records.
    let detailed = s.outputs.iter().any(|o| !o.judgement.passed) || s.drill_down.is_some();
    if let Some(reason) = s
        .reason
        .as_ref()
        .filter(|r| !detailed || s.findings.iter().any(|f| f.to_string() == **r))
    {
        lines.push((4, reason.clone()));
    }
    for f in s
        .findings
        .iter()
        .filter(|f| Some(f.to_string()) != s.reason)
    {
        lines.push((4, f.to_string()));
    }
    for n in &s.notes {
        lines.push((4, format!("note: {n}")));
    }
    for o in s.outputs.iter().filter(|o| !o.judgement.passed) {
        lines.push((
            4,
            format!(
                "`{}`: {}{}",
                o.tensor,
                o.judgement.reason.as_deref().unwrap_or(""),
                least(&o.judgement)
            ),
        ));
        if let Some(w) = &o.judgement.worst {
            lines.push((
                6,
                format!(
                    "worst {:?}: {:.7} vs reference {:.7}, bound {}",
                    w.index,
                    w.actual,
                    w.reference,
                    sci(w.bound)
                ),
            ));
        }
    }
    // A rasterizer's ids, as the verdict counted them (docs/error-model.md,
    // "Discrete outputs").
    for o in s.outputs.iter().filter(|o| wide || !o.judgement.passed) {
        if let Some(px) = &o.pixels {
            lines.push((4, format!("`{}`: {px}", o.tensor)));
        }
    }
    for inv in s.invariants.iter().filter(|i| !i.held) {
        lines.push((
            4,
            format!("invariant {} does not hold: {}", inv.invariant, inv.detail),
        ));
    }
    if let Some(d) = &s.drill_down {
        let j = &d.judgement;
        lines.push((
            4,
            format!(
                "drill-down: first operator that fails its own check is node {} `{}` -> `{}`: {}{}",
                d.node,
                d.op,
                d.output,
                j.reason.as_deref().unwrap_or(""),
                least(j)
            ),
        ));
    }
    if let Some(n) = &s.drill_down_note {
        lines.push((4, format!("drill-down: {n}")));
    }
    // The document's notes on the stage: its known traps, where they help.
    if s.status.is_failure() {
        for n in notes {
            lines.push((4, format!("stage note: {n}")));
        }
    }
    if wide {
        for c in &s.coverage {
            lines.push((4, format!("coverage: {c}")));
        }
    }
    lines
}

fn tier(p: &Printer, r: &RunReport, t: &TierReport) {
    println!(
        "\ntier {}, {} mode",
        t.tier.name(),
        serde_json::to_value(t.mode)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    );
    let shown: Vec<&Column> = COLUMNS.iter().filter(|c| p.shows(c)).collect();
    let keep = |cells: Vec<String>| -> Vec<String> {
        cells
            .into_iter()
            .zip(&COLUMNS)
            .filter(|(_, c)| p.shows(c))
            .map(|(v, _)| v)
            .collect()
    };
    let rows: Vec<(Vec<String>, Vec<Detail>)> = t
        .stages
        .iter()
        .map(|s| {
            let notes = p
                .document
                .and_then(|d| d.stages.iter().find(|d| d.name == s.stage))
                .map_or(&[][..], |d| &d.notes[..]);
            (keep(row(s)), details(s, notes, p.wide))
        })
        .collect();
    let widths: Vec<usize> = shown
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .map(|(cells, _)| cells[i].chars().count())
                .chain([c.head.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, (cell, c)) in cells.iter().zip(&shown).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let pad = " ".repeat(widths[i] - cell.chars().count());
            if c.right {
                out.push_str(&pad);
                out.push_str(cell);
            } else {
                out.push_str(cell);
                out.push_str(&pad);
            }
        }
        println!("{}", out.trim_end());
    };
    line(&shown.iter().map(|c| c.head.to_string()).collect::<Vec<_>>());
    for (cells, details) in &rows {
        line(cells);
        for (indent, text) in details {
            p.say(*indent, text);
        }
    }
    let (mut pass, mut fail, mut unsupported, mut expected) = (0, 0, 0, 0);
    for s in &t.stages {
        match s.status {
            Status::Pass => pass += 1,
            Status::NotSupported => unsupported += 1,
            Status::ExpectedFail => expected += 1,
            _ => fail += 1,
        }
    }
    let warned: Vec<&str> = t
        .stages
        .iter()
        .filter(|s| !s.coverage.is_empty())
        .map(|s| s.stage.as_str())
        .collect();
    if !p.wide && !warned.is_empty() {
        let count: usize = t.stages.iter().map(|s| s.coverage.len()).sum();
        let stages = match warned.as_slice() {
            [one] => (*one).to_string(),
            [first, .., last] => format!("{} stages, {first} to {last}", warned.len()),
            [] => String::new(),
        };
        p.say(
            0,
            &format!(
                "coverage: {count} warning(s) on {stages}: what the data cannot show, not failures (--wide lists them)"
            ),
        );
    }
    if let Some(first) = &t.first_divergent_stage {
        p.say(0, &format!("first divergent stage: {first}"));
    }
    for e2e in &t.end_to_end {
        p.say(
            0,
            &format!(
                "end to end `{}`: rel L2 {} (limit {}), cosine {:.7} (limit {}): {}",
                e2e.tensor,
                sci(e2e.drift.rel_l2_error),
                sci(e2e.criterion.rel_l2),
                e2e.drift.cosine_similarity,
                e2e.criterion.cosine,
                if e2e.passed { "PASS" } else { "FAIL" }
            ),
        );
    }
    let expected = if expected > 0 {
        format!(", {expected} expected failures")
    } else {
        String::new()
    };
    println!("{pass} passed, {fail} failed, {unsupported} not supported{expected}");
    if !t.differential.is_empty() {
        round(
            p,
            &t.differential,
            &format!(
                "differential round (fresh inputs from seed {}, nonce {})",
                r.seed, r.settings.nonce
            ),
            "stages",
            "out of bounds on fresh inputs",
        );
    }
    if !t.contract.is_empty() {
        round(
            p,
            &t.contract,
            &format!(
                "kernel contract (views, broadcasts, odd sizes, extreme values, then {} threads at once)",
                vips_sdk::runner::CONCURRENCY_THREADS
            ),
            "cases",
            "out of bounds",
        );
        for note in t.contract.iter().flat_map(|s| &s.notes) {
            p.say(4, note);
        }
    }
}

/// A round after the main one: how many of its rows passed, then each
/// failing row and why.
fn round(p: &Printer, rows: &[StageResult], title: &str, what: &str, default: &str) {
    let failed: Vec<_> = rows.iter().filter(|s| s.status.is_failure()).collect();
    p.say(
        0,
        &format!(
            "{title}: {} of {} {what} passed",
            rows.len() - failed.len(),
            rows.len()
        ),
    );
    for s in failed {
        p.say(
            4,
            &format!(
                "{} {}: {}",
                s.stage,
                s.status.label(),
                s.reason.as_deref().unwrap_or(default)
            ),
        );
    }
}

/// Who computed the outputs: a provider and its device, or the files a
/// `check` read (said once).
fn provider(r: &RunReport) -> String {
    let mut who = r.provider.clone();
    if !r.provider_version.is_empty() {
        who = format!("{who} {}", r.provider_version);
    }
    if !r.device.is_empty() && r.device != "-" {
        who = format!("{who} ({})", r.device);
    }
    who
}

/// Prints the results; `wide`: every column and detail, lines unwrapped.
/// `document`: the suite's, whose stage notes follow a failing stage.
/// `timings`: the columns of where each stage's time went.
pub fn print(r: &RunReport, document: Option<&Document>, wide: bool, timings: bool) {
    let p = Printer {
        wide,
        timings,
        document,
    };
    p.say(
        0,
        &format!("{} {} on {}", r.component, r.component_version, provider(r)),
    );
    if let Some(id) = &r.identity {
        let hash = if wide {
            id.library_sha256.clone()
        } else {
            let short: String = id.library_sha256.chars().take(16).collect();
            format!("{short}…")
        };
        p.say(
            0,
            &format!(
                "provider library {} (sha256 {hash}){}",
                id.library,
                if id.isolated {
                    ", in a worker process"
                } else {
                    ", in process"
                }
            ),
        );
        if let Some(sandbox) = &id.sandbox {
            p.say(0, &format!("worker sandbox: {}", sandbox.summary()));
        }
        if let Some(note) = &id.claim_note {
            p.say(0, &format!("note: {note}"));
        }
        if let Some(d) = &id.device {
            p.say(
                0,
                &format!(
                    "device {} (driver {}, id {}, {} MiB); seed {}",
                    d.name,
                    d.driver_version,
                    d.stable_id,
                    d.memory_bytes >> 20,
                    r.seed
                ),
            );
        }
    }
    for t in &r.tiers {
        tier(&p, r, t);
    }
    if !r.tiers.is_empty() {
        println!();
        p.say(0, LEGEND);
        p.say(0, if wide { LEGEND_WIDE } else { LEGEND_NARROW });
        if timings {
            p.say(0, LEGEND_TIMINGS);
            families(&p, r);
        }
    }
    if let Some(stop) = &r.stopped_early {
        println!();
        p.say(0, stop);
    }
    if let Some(teardown) = &r.teardown {
        println!();
        p.say(0, &format!("releasing the provider failed: {teardown}"));
    }
    println!("\nverdict: {}", if r.passed { "PASS" } else { "FAIL" });
}

/// With `--timings`: the verdict's float64 seconds by operator family,
/// every tier's stages and differential round summed, the largest first.
fn families(p: &Printer, r: &RunReport) {
    let stages = r
        .tiers
        .iter()
        .flat_map(|t| t.stages.iter().chain(&t.differential));
    let mut sum: Vec<_> = runner::Timings::by_family(stages).into_iter().collect();
    if sum.is_empty() {
        return;
    }
    sum.sort_by(|a, b| (b.1.reference + b.1.judgement).total_cmp(&(a.1.reference + a.1.judgement)));
    let total: f64 = sum.iter().map(|(_, t)| t.reference + t.judgement).sum();
    let parts: Vec<String> = sum
        .iter()
        .map(|(family, t)| {
            format!(
                "{family} {} (reference {}, node checks {})",
                ms(t.reference + t.judgement),
                ms(t.reference),
                ms(t.judgement)
            )
        })
        .collect();
    println!();
    p.say(
        0,
        &format!(
            "the verdict's float64 work by operator family ({} in all, stages from the reference cache not counted): {}.",
            ms(total),
            parts.join("; ")
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_keeps_to_the_width_and_indents_what_follows() {
        let text = "a reason that goes on and on, well past the width of a line of the table";
        let lines = wrap(text, 4, Some(30));
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 30), "{lines:?}");
        assert!(lines[0].starts_with("    a ") && lines[1].starts_with("      "));
        assert_eq!(
            lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "),
            text
        );
        // A word longer than the line keeps its own line; `None` wraps nothing.
        let path = format!("see /{}", "x".repeat(40));
        assert_eq!(
            wrap(&path, 0, Some(20)),
            ["see", &format!("  /{}", "x".repeat(40))]
        );
        assert_eq!(wrap(text, 2, None), [format!("  {text}")]);
        assert_eq!(wrap("a  b\n   c", 0, None), ["a  b", "     c"]);
        // Lines of the text stay lines.
        assert_eq!(wrap("one\ntwo", 0, Some(80)), ["one", "  two"]);
    }
}
