//! Certification report files: the signing key (`--sign-key`, `--sign-key-fd`,
//! else the file `$VIPS_SIGN_KEY` names: located before a run, read only
//! after every worker is gone), report files written atomically (a
//! temporary file, made before the run so that an unwritable directory fails
//! at once, renamed into place after it), and the lines that describe a
//! report on screen.

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
    KeySource::locate(arg, None)?
        .map(KeySource::read)
        .transpose()
}

/// Where the signing key is, found (not read) before a run.
pub enum KeySource {
    Path {
        path: PathBuf,
        source: String,
    },
    /// An open descriptor (`--sign-key-fd`), close-on-exec from the start.
    Fd(std::os::fd::OwnedFd),
}

impl KeySource {
    /// `--sign-key`, `--sign-key-fd`, else `$VIPS_SIGN_KEY`: checked to exist
    /// (a regular file, an open descriptor) without reading the key.
    pub fn locate(path: Option<&Path>, fd: Option<i32>) -> Result<Option<KeySource>, String> {
        if let Some(fd) = fd {
            use std::os::fd::FromRawFd;
            // SAFETY: F_GETFD/F_SETFD on a descriptor number the user gave;
            // an invalid one answers -1 (EBADF) and is refused before use.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            if fd < 3 || flags < 0 {
                return Err(format!(
                    "--sign-key-fd {fd}: not an open descriptor of this process (3 or above)"
                ));
            }
            // SAFETY: as above; the descriptor is open and this process
            // takes it over (no other code of ours uses it).
            unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
            // SAFETY: an open descriptor handed to this process, owned from here.
            return Ok(Some(KeySource::Fd(unsafe {
                std::os::fd::OwnedFd::from_raw_fd(fd)
            })));
        }
        let (path, source) = match path {
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
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(Some(KeySource::Path { path, source })),
            Ok(_) => Err(format!("signing key ({source}): not a regular file")),
            Err(e) => Err(format!("signing key ({source}): {e}")),
        }
    }

    /// The key file's path, to hide from workers.
    pub fn path(&self) -> Option<&Path> {
        match self {
            KeySource::Path { path, .. } => Some(path),
            KeySource::Fd(_) => None,
        }
    }

    /// Reads the key: call only once no worker is left.
    pub fn read(self) -> Result<Signer, String> {
        let (key, source) = match self {
            KeySource::Path { path, source } => (
                keys::read_private(&path).map_err(|e| format!("signing key ({source}): {e}"))?,
                source,
            ),
            KeySource::Fd(fd) => {
                use ed25519_dalek::pkcs8::DecodePrivateKey;
                use std::io::Read;
                let mut text = String::new();
                std::fs::File::from(fd)
                    .take(keys::MAX_KEY_BYTES + 1)
                    .read_to_string(&mut text)
                    .map_err(|e| format!("signing key (--sign-key-fd): {e}"))?;
                if text.len() as u64 > keys::MAX_KEY_BYTES {
                    return Err(format!(
                        "signing key (--sign-key-fd): more than {} bytes",
                        keys::MAX_KEY_BYTES
                    ));
                }
                let key = SigningKey::from_pkcs8_pem(&text).map_err(|e| {
                    format!("signing key (--sign-key-fd): not an Ed25519 private key in PKCS#8 PEM: {e}")
                })?;
                (key, "--sign-key-fd".to_string())
            }
        };
        Ok(Signer {
            id: keys::key_id(&key.verifying_key()),
            key,
            source,
        })
    }
}

/// The report files of a run, one per tier: each written to a temporary
/// file beside its path (made before the run) and renamed into place, so a
/// report is whole or absent; temporaries never renamed are removed.
pub struct ReportFiles {
    files: Vec<(Tier, PathBuf, PathBuf, File)>,
}

impl Drop for ReportFiles {
    fn drop(&mut self) {
        for (_, _, temp, _) in self.files.drain(..) {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// `{tier}` in `template` replaced by the tier's name.
fn tier_path(template: &Path, tier: Tier) -> PathBuf {
    PathBuf::from(template.to_string_lossy().replace("{tier}", tier.name()))
}

/// A temporary name beside `path`, unique to this process and not
/// guessable (a directory the worker may write must not let it plant one).
fn temp_beside(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".tmp-{}-{:016x}",
        std::process::id(),
        vips_sdk::execution::runtime_seed()
    ));
    path.with_file_name(name)
}

impl ReportFiles {
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(_, p, _, _)| p.as_path())
    }

    /// One file per tier: with several tiers the path must hold `{tier}`.
    pub fn create(template: &Path, tiers: &[Tier]) -> Result<ReportFiles, String> {
        if tiers.len() > 1 && !template.to_string_lossy().contains("{tier}") {
            return Err(format!(
                "--report {}: a report certifies one tier; with several tiers put `{{tier}}` in the path (e.g. report-{{tier}}.json)",
                template.display()
            ));
        }
        let mut files = ReportFiles { files: Vec::new() };
        for &t in tiers {
            let path = tier_path(template, t);
            let temp = temp_beside(&path);
            let file = File::options()
                .write(true)
                .create_new(true)
                .open(&temp)
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            files.files.push((t, path, temp, file));
        }
        Ok(files)
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
            let (tier, path, temp, mut file) = self.files.remove(0);
            let Some(statement) = statements.iter().find(|s| s.predicate.tier == tier) else {
                let _ = std::fs::remove_file(&temp);
                continue;
            };
            let written = statement
                .envelope(signer.map(|s| &s.key))
                .and_then(|e| write_envelope(&path, &mut file, &e))
                .and_then(|()| {
                    file.sync_all()
                        .and_then(|()| std::fs::rename(&temp, &path))
                        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
                });
            if let Err(e) = written {
                let _ = std::fs::remove_file(&temp);
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
