//! The results table printed by `run` and `check`.

use vips_sdk::error_model::Judgement;
use vips_sdk::runner::{self, RunReport, Status};

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

pub fn print(r: &RunReport) {
    println!(
        "{} {} on {} {} ({})",
        r.component, r.component_version, r.provider, r.provider_version, r.device
    );
    if let Some(id) = &r.identity {
        println!(
            "provider library {} (sha256 {}){}",
            id.library,
            id.library_sha256,
            if id.isolated {
                ", in a worker process"
            } else {
                ", in process"
            }
        );
        if let Some(sandbox) = &id.sandbox {
            println!("worker sandbox: {}", sandbox.summary());
        }
        if let Some(note) = &id.claim_note {
            println!("note: {note}");
        }
        if let Some(d) = &id.device {
            println!(
                "device {} (driver {}, id {}, {} MiB); seed {}",
                d.name,
                d.driver_version,
                d.stable_id,
                d.memory_bytes >> 20,
                r.seed
            );
        }
    }
    for t in &r.tiers {
        println!(
            "\ntier {}, {} mode",
            t.tier.name(),
            serde_json::to_value(t.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        );
        // |e| is the error over its bound: below 1 passes; 1 − max|e| is the
        // margin. rms t is the error over a correct implementation's σ (the
        // limit is the tier's rms_factor); tolerance the least factor by which
        // the bound would have to grow for a failing stage to pass.
        println!(
            "{:<22} {:<10} {:<13} {:>8} {:>8} {:>8} {:>9}  {:<28} {:>10} {:>9}",
            "stage",
            "execution",
            "status",
            "max|e|",
            "p99|e|",
            "rms t",
            "tolerance",
            "tightest operator (max|e|)",
            "drift L2",
            "time"
        );
        let (mut pass, mut fail, mut unsupported, mut expected) = (0, 0, 0, 0);
        for s in &t.stages {
            match s.status {
                Status::Pass => pass += 1,
                Status::NotSupported => unsupported += 1,
                Status::ExpectedFail => expected += 1,
                _ => fail += 1,
            }
            let exec = s.execution.map_or("-", runner::Execution::name);
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
            let tol = s.least_tolerance().to_string();
            let tight = s.tightest_node.as_ref().map_or(String::new(), |n| {
                format!(
                    "{} {}",
                    n.op.trim_start_matches("vsdk."),
                    e(n.judgement.max_e)
                )
            });
            println!(
                "{:<22} {:<10} {:<13} {max_e:>8} {p99:>8} {rms:>8} {tol:>9}  {tight:<28} {drift:>10} {:>7.1}ms",
                s.stage,
                exec,
                s.status.label(),
                s.seconds * 1e3
            );
            // A failure on the stage's own data is detailed below (outputs,
            // drill-down); its one-line reason is for the records.
            let detailed = s.outputs.iter().any(|o| !o.judgement.passed) || s.drill_down.is_some();
            if let Some(reason) = s
                .reason
                .as_ref()
                .filter(|r| !detailed || s.findings.iter().any(|f| f.to_string() == **r))
            {
                println!("    {reason}");
            }
            for f in s
                .findings
                .iter()
                .filter(|f| Some(f.to_string()) != s.reason)
            {
                println!("    {f}");
            }
            for n in &s.notes {
                println!("    note: {n}");
            }
            for o in s.outputs.iter().filter(|o| !o.judgement.passed) {
                println!(
                    "    `{}`: {}{}",
                    o.tensor,
                    o.judgement.reason.as_deref().unwrap_or(""),
                    least(&o.judgement)
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
                    "    drill-down: first operator that fails its own check is node {} `{}` -> `{}`: {}{}",
                    d.node,
                    d.op,
                    d.output,
                    j.reason.as_deref().unwrap_or(""),
                    least(j)
                );
            }
            if let Some(n) = &s.drill_down_note {
                println!("    drill-down: {n}");
            }
            for c in &s.coverage {
                println!("    coverage: {c}");
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
        let expected = if expected > 0 {
            format!(", {expected} expected failures")
        } else {
            String::new()
        };
        println!("{pass} passed, {fail} failed, {unsupported} not supported{expected}");
        if !t.differential.is_empty() {
            let failed: Vec<_> = t
                .differential
                .iter()
                .filter(|s| s.status.is_failure())
                .collect();
            println!(
                "differential round (fresh inputs from seed {}, nonce {}): {} of {} stages passed",
                r.seed,
                r.settings.nonce,
                t.differential.len() - failed.len(),
                t.differential.len()
            );
            for s in failed {
                println!(
                    "    {} {}: {}",
                    s.stage,
                    s.status.label(),
                    s.reason
                        .as_deref()
                        .unwrap_or("out of bounds on fresh inputs")
                );
            }
        }
    }
    if let Some(stop) = &r.stopped_early {
        println!("\n{stop}");
    }
    if let Some(teardown) = &r.teardown {
        println!("\nreleasing the provider failed: {teardown}");
    }
    println!("\nverdict: {}", if r.passed { "PASS" } else { "FAIL" });
}
