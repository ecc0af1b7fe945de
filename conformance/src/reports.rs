//! Certification report files: the signing key (`--sign-key`, else the file
//! `$VIPS_SIGN_KEY` names), report paths created before a run (so an
//! unwritable path fails at once instead of after the run), and the lines
//! that describe a report on screen.

use ed25519_dalek::SigningKey;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use vips_sdk::certify::{keys, Envelope, Statement, Verdict};
use vips_sdk::compare::Tier;

/// The signing key and where it came from, if one was given.
pub struct Signer {
    pub key: SigningKey,
    pub id: String,
    pub source: String,
}

/// The key from `--sign-key`, else from the file `$VIPS_SIGN_KEY` names.
pub fn signer(arg: Option<&Path>) -> Result<Option<Signer>, String> {
    let (path, source) = match arg {
        Some(p) => (p.to_path_buf(), format!("--sign-key {}", p.display())),
        None => match std::env::var_os(keys::SIGN_KEY_ENV) {
            Some(v) if !v.is_empty() => {
                let p = PathBuf::from(v);
                let source = format!("${} = {}", keys::SIGN_KEY_ENV, p.display());
                (p, source)
            }
            _ => return Ok(None),
        },
    };
    let key = keys::read_private(&path).map_err(|e| format!("signing key ({source}): {e}"))?;
    Ok(Some(Signer {
        id: keys::key_id(&key.verifying_key()),
        key,
        source,
    }))
}

/// The report files of a run, one per tier, created before the run; those
/// never written (the run failed) are removed, so no empty report is left
/// for `merge` or `verify` to trip on.
pub struct ReportFiles {
    files: Vec<(Tier, PathBuf, File)>,
}

impl Drop for ReportFiles {
    fn drop(&mut self) {
        for (_, path, _) in self.files.drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `{tier}` in `template` replaced by the tier's name.
fn tier_path(template: &Path, tier: Tier) -> PathBuf {
    PathBuf::from(template.to_string_lossy().replace("{tier}", tier.name()))
}

impl ReportFiles {
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(_, p, _)| p.as_path())
    }

    /// One file per tier: with several tiers the path must hold `{tier}`.
    pub fn create(template: &Path, tiers: &[Tier]) -> Result<ReportFiles, String> {
        if tiers.len() > 1 && !template.to_string_lossy().contains("{tier}") {
            return Err(format!(
                "--report {}: a report certifies one tier; with several tiers put `{{tier}}` in the path (e.g. report-{{tier}}.json)",
                template.display()
            ));
        }
        let files = tiers
            .iter()
            .map(|&t| {
                let path = tier_path(template, t);
                File::create(&path)
                    .map(|f| (t, path.clone(), f))
                    .map_err(|e| format!("{}: cannot write: {e}", path.display()))
            })
            .collect::<Result<_, _>>()?;
        Ok(ReportFiles { files })
    }

    /// Writes each tier's statement, signed when `signer` is given; prints
    /// where each went and its verdict.
    pub fn write(
        mut self,
        statements: &[Statement],
        signer: Option<&Signer>,
        to_stderr: bool,
    ) -> Result<(), String> {
        while !self.files.is_empty() {
            let (tier, path, mut file) = self.files.remove(0);
            let Some(statement) = statements.iter().find(|s| s.predicate.tier == tier) else {
                let _ = std::fs::remove_file(&path);
                continue;
            };
            let written = statement
                .envelope(signer.map(|s| &s.key))
                .and_then(|e| write_envelope(&path, &mut file, &e));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
            announce(&path, statement, signer, to_stderr);
        }
        Ok(())
    }
}

pub fn write_envelope(path: &Path, file: &mut File, envelope: &Envelope) -> Result<(), String> {
    let text = serde_json::to_string_pretty(envelope).map_err(|e| e.to_string())?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// One line on screen for a report just written.
pub fn announce(path: &Path, statement: &Statement, signer: Option<&Signer>, to_stderr: bool) {
    let p = &statement.predicate;
    let signed = signing(signer);
    let line = format!(
        "report {}: {} {} at {}, {signed}",
        path.display(),
        p.verdict.label(),
        p.component.id,
        p.tier.name()
    );
    if to_stderr {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    if p.verdict == Verdict::NotCertified {
        for r in &p.reasons {
            let line = format!("  - {r}");
            if to_stderr {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
    }
}

/// How a report was signed, for the screen.
pub fn signing(signer: Option<&Signer>) -> String {
    match signer {
        Some(s) => format!("signed with key {} ({})", short(&s.id), s.source),
        None => format!(
            "UNSIGNED: no --sign-key and no ${}; `verify` will refuse it",
            keys::SIGN_KEY_ENV
        ),
    }
}

/// A key id shortened for people (the full id is in the report).
pub fn short(id: &str) -> &str {
    id.get(..16).unwrap_or(id)
}

/// What a report says, in lines: verdict, component, tier, provider, device, date.
pub fn describe(statement: &Statement) -> Vec<String> {
    let p = &statement.predicate;
    let mut lines = vec![
        format!("verdict:   {}", p.verdict.label()),
        format!(
            "component: {} {} (document {}), golden set {} {}",
            p.component.id,
            p.component.version,
            short(&p.component.document_sha256),
            p.component.golden,
            short(&p.component.golden_sha256)
        ),
        format!(
            "tier:      {} ({} mode, {} stage(s), seed {}, nonce {})",
            p.tier.name(),
            p.mode.name(),
            p.must_pass.len(),
            p.run.seed,
            p.run.nonce
        ),
        format!(
            "provider:  {} {} by {} (ABI {}), {} sha256 {}",
            p.provider.name,
            p.provider.version,
            p.provider.vendor,
            p.provider.abi_version,
            p.provider.library,
            p.provider.library_sha256
        ),
        format!(
            "device:    {} (driver {}, {} MiB, id {})",
            p.device.name,
            p.device.driver_version,
            p.device.memory_bytes >> 20,
            p.device.stable_id
        ),
        format!(
            "host:      {}, {} x {}",
            p.host.os, p.host.logical_cpus, p.host.cpu
        ),
        format!(
            "reference: {} {} sha256 {}",
            p.reference.name, p.reference.version, p.reference.library_sha256
        ),
        format!("date:      {} to {}", p.run.started, p.run.finished),
    ];
    if !p.shards.is_empty() {
        lines.push(format!(
            "shards:    {}",
            p.shards
                .iter()
                .map(|s| s.shard.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for r in &p.reasons {
        lines.push(format!("  - {r}"));
    }
    lines
}
