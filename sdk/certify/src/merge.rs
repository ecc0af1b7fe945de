//! Shards of one run (`run --shard k/n`, on one machine or a fleet) merged
//! into one predicate. Merging checks the shards are parts of the same run
//! (component, golden set, tier, mode, seed, provider binary, device model
//! and driver, SDK) and keeps every shard's own facts; the verdict is then
//! assessed as for one run, so stages no shard ran leave it NOT CERTIFIED.

use super::predicate::{Predicate, ShardFacts, ShardId};
use vips_runner::run::Mode;

/// The most shards merged at once.
pub const MAX_SHARDS: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("{0} reports, more than the {MAX_SHARDS} merged at once")]
    TooMany(usize),
    #[error("report {index} is not a shard (`run --shard k/n` writes shard reports): {what}")]
    NotAShard { index: usize, what: String },
    #[error("report {index} (shard {shard}) differs from report 1 in {field}: `{theirs}` vs `{ours}`: shards of different runs cannot be merged")]
    Mismatch {
        index: usize,
        shard: String,
        field: &'static str,
        ours: String,
        theirs: String,
    },
    #[error("shard {shard} appears twice (reports {first} and {second})")]
    Duplicate {
        shard: String,
        first: usize,
        second: usize,
    },
    #[error("report {index} is chained: a chained run follows the whole pipeline and cannot be sharded (shard isolated runs)")]
    Chained { index: usize },
}

fn shard_of(p: &Predicate, index: usize) -> Result<ShardId, MergeError> {
    let not = |what: String| MergeError::NotAShard { index, what };
    if !p.shards.is_empty() {
        return Err(not("it is already a merge".into()));
    }
    match p.run.shard {
        None => Err(not("it ran every selected stage".into())),
        Some(id) if id.k >= 1 && id.k <= id.n && id.n <= MAX_SHARDS => Ok(id),
        Some(id) => Err(not(format!(
            "shard {id} (expected 1 <= k <= n <= {MAX_SHARDS})"
        ))),
    }
}

/// Merges shard predicates (each from `run --shard k/n`) into one, in shard
/// order, with its verdict assessed.
pub fn merge(mut shards: Vec<Predicate>) -> Result<Predicate, MergeError> {
    if shards.is_empty() {
        return Err(MergeError::Empty);
    }
    if shards.len() > MAX_SHARDS {
        return Err(MergeError::TooMany(shards.len()));
    }
    let mut keyed = Vec::with_capacity(shards.len());
    for (i, p) in shards.iter().enumerate() {
        if p.mode == Mode::Chained {
            return Err(MergeError::Chained { index: i + 1 });
        }
        keyed.push((shard_of(p, i + 1)?, i + 1));
    }
    let first = &shards[0];
    let n = keyed[0].0.n;
    for (i, p) in shards.iter().enumerate().skip(1) {
        let fields: [(&'static str, String, String); 13] = [
            (
                "component",
                first.component.id.clone(),
                p.component.id.clone(),
            ),
            (
                "component version",
                first.component.version.clone(),
                p.component.version.clone(),
            ),
            (
                "document SHA-256",
                first.component.document_sha256.clone(),
                p.component.document_sha256.clone(),
            ),
            (
                "golden set SHA-256",
                first.component.golden_sha256.clone(),
                p.component.golden_sha256.clone(),
            ),
            (
                "must-pass list",
                first.must_pass.join(","),
                p.must_pass.join(","),
            ),
            (
                "tier",
                first.tier.name().to_string(),
                p.tier.name().to_string(),
            ),
            ("seed", first.run.seed.to_string(), p.run.seed.to_string()),
            (
                "provider library SHA-256",
                first.provider.library_sha256.clone(),
                p.provider.library_sha256.clone(),
            ),
            (
                "reference provider SHA-256",
                first.reference.library_sha256.clone(),
                p.reference.library_sha256.clone(),
            ),
            ("device", first.device.name.clone(), p.device.name.clone()),
            (
                "device driver version",
                first.device.driver_version.clone(),
                p.device.driver_version.clone(),
            ),
            (
                "SDK version",
                first.sdk.version.clone(),
                p.sdk.version.clone(),
            ),
            ("shard count", n.to_string(), keyed[i].0.n.to_string()),
        ];
        for (field, ours, theirs) in fields {
            if ours != theirs {
                return Err(MergeError::Mismatch {
                    index: i + 1,
                    shard: keyed[i].0.to_string(),
                    field,
                    ours,
                    theirs,
                });
            }
        }
    }
    let mut order: Vec<usize> = (0..shards.len()).collect();
    order.sort_by_key(|&i| keyed[i].0);
    for w in order.windows(2) {
        if keyed[w[0]].0 == keyed[w[1]].0 {
            return Err(MergeError::Duplicate {
                shard: keyed[w[0]].0.to_string(),
                first: keyed[w[0]].1.min(keyed[w[1]].1),
                second: keyed[w[0]].1.max(keyed[w[1]].1),
            });
        }
    }
    let mut merged = shards[order[0]].clone();
    merged.stages.clear();
    merged.differential.stages.clear();
    merged.determinism.nondeterministic_stages.clear();
    merged.run.shard = None;
    let mut notes = (Vec::new(), Vec::new());
    for &i in &order {
        let p = &mut shards[i];
        let shard = keyed[i].0;
        merged.shards.push(ShardFacts {
            shard,
            nonce: p.run.nonce,
            host: p.host.clone(),
            device_stable_id: p.device.stable_id.clone(),
            runner_sha256: p.sdk.runner_sha256.clone(),
            started: p.run.started.clone(),
            finished: p.run.finished.clone(),
        });
        merged.stages.append(&mut p.stages);
        merged
            .differential
            .stages
            .append(&mut p.differential.stages);
        merged.differential.ran &= p.differential.ran;
        // Shard 1 runs the kernel contract for the whole component.
        if shard.k == 1 {
            merged.contract = p.contract.clone();
        }
        merged.determinism.required &= p.determinism.required;
        merged
            .determinism
            .nondeterministic_stages
            .append(&mut p.determinism.nondeterministic_stages);
        merged.run.isolated &= p.run.isolated;
        // What held for every shard's workers: the weakest sandbox.
        merged.run.sandbox = match (merged.run.sandbox.take(), &p.run.sandbox) {
            (Some(a), Some(b)) => Some(a.weakest(b)),
            _ => None,
        };
        merged.run.nonce_given |= p.run.nonce_given;
        merged.run.baseline |= p.run.baseline;
        merged.run.flake_retries = merged.run.flake_retries.min(p.run.flake_retries);
        if p.run.started < merged.run.started {
            merged.run.started = p.run.started.clone();
        }
        if p.run.finished > merged.run.finished {
            merged.run.finished = p.run.finished.clone();
        }
        if merged.run.stage_glob.is_none() {
            merged.run.stage_glob = p.run.stage_glob.clone();
        }
        if let Some(s) = &p.run.stopped_early {
            notes.0.push(format!("shard {shard} {s}"));
        }
        if let Some(t) = &p.run.teardown {
            notes.1.push(format!("shard {shard}: {t}"));
        }
    }
    // Stages in the document's order, whichever shard ran them.
    let position = |name: &str| merged.must_pass.iter().position(|m| m == name);
    merged.stages.sort_by_key(|r| position(&r.stage));
    merged
        .differential
        .stages
        .sort_by_key(|r| position(&r.stage));
    let join = |v: Vec<String>| (!v.is_empty()).then(|| v.join("; "));
    merged.run.stopped_early = join(notes.0);
    merged.run.teardown = join(notes.1);
    // The shards absent from `merged.shards` are a reason of the rule, so
    // that a verifier derives it again.
    merged.assess();
    Ok(merged)
}
