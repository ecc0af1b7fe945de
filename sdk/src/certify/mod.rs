//! Certification reports: an in-toto Statement v1 about two subjects (the
//! provider library file and the golden vector set, by SHA-256) whose
//! predicate records a run and its verdict, in a DSSE envelope signed with
//! Ed25519. Anyone can check one offline with standard tools
//! (docs/report-format.md); `verify` is that check, with the subjects'
//! files compared when given.
//!
//! - `dsse`: the envelope and the PAE the signatures cover;
//! - `keys`: key generation and PEM files (PKCS#8 v1, SPKI);
//! - `predicate`: what a report says, and the verdict rule;
//! - `merge`: shards of one run into one report;
//! - `compose`: a model certified from its components' reports.

pub mod compose;
pub mod dsse;
pub mod keys;
pub mod merge;
pub mod predicate;

pub use dsse::{DsseError, Envelope, TrustedKey};
pub use predicate::{Predicate, Verdict};

use crate::runner::RunReport;
use crate::suite::Suite;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The DSSE payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The in-toto Statement layer, v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Our predicate: VIPS certification, version 1 (docs/report-format.md).
pub const PREDICATE_TYPE: &str = "https://vips-sdk.dev/attestation/certification/v1";

/// Largest report file read (a report of the full DINOv2 suite is ~60 KB).
pub const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The statement: subjects and the predicate about them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    #[serde(rename = "_type")]
    pub statement_type: String,
    pub subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub predicate: Predicate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub name: String,
    /// `{"sha256": hex}`.
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    fn sha256(name: &str, hex: &str) -> Subject {
        Subject {
            name: name.to_string(),
            digest: BTreeMap::from([("sha256".to_string(), hex.to_string())]),
        }
    }
}

/// The subjects in a statement, in this order.
pub const PROVIDER_SUBJECT: usize = 0;
pub const GOLDEN_SUBJECT: usize = 1;

impl Statement {
    pub fn new(predicate: Predicate) -> Statement {
        Statement {
            statement_type: STATEMENT_TYPE.to_string(),
            subject: vec![
                Subject::sha256(
                    &predicate.provider.library,
                    &predicate.provider.library_sha256,
                ),
                Subject::sha256(
                    &predicate.component.golden,
                    &predicate.component.golden_sha256,
                ),
            ],
            predicate_type: PREDICATE_TYPE.to_string(),
            predicate,
        }
    }

    /// One statement per tier of a provider run (none for `check` reports,
    /// which certify no provider).
    pub fn of_run(suite: &Suite, report: &RunReport) -> Vec<Statement> {
        report
            .tiers
            .iter()
            .filter_map(|t| Predicate::of_run(suite, report, t))
            .map(Statement::new)
            .collect()
    }

    /// The envelope: signed when a key is given, else with no signature
    /// (which `verify` refuses as unsigned).
    pub fn envelope(&self, key: Option<&SigningKey>) -> Result<Envelope, String> {
        let payload = serde_json::to_vec_pretty(self)
            .map_err(|e| format!("cannot encode the statement: {e}"))?;
        Ok(match key {
            Some(k) => {
                let id = keys::key_id(&k.verifying_key());
                Envelope::sign(PAYLOAD_TYPE, &payload, &[(&id, k)])
            }
            None => Envelope::sign(PAYLOAD_TYPE, &payload, &[]),
        })
    }

    /// Checks the statement is ours and agrees with itself: the subjects are
    /// the predicate's provider and golden set.
    fn check_shape(&self) -> Result<(), VerifyError> {
        let bad = |m: String| Err(VerifyError::Statement(m));
        if self.statement_type != STATEMENT_TYPE {
            return bad(format!(
                "`_type` is `{}`, not `{STATEMENT_TYPE}`",
                self.statement_type
            ));
        }
        if self.predicate_type != PREDICATE_TYPE {
            return bad(format!(
                "`predicateType` is `{}`, not `{PREDICATE_TYPE}`",
                self.predicate_type
            ));
        }
        let p = &self.predicate;
        let expected = [
            (&p.provider.library, &p.provider.library_sha256),
            (&p.component.golden, &p.component.golden_sha256),
        ];
        if self.subject.len() != 2
            || expected
                .iter()
                .zip(&self.subject)
                .any(|((name, hash), s)| &&s.name != name || s.digest.get("sha256") != Some(hash))
        {
            return bad(
                "the subjects are not the predicate's provider library and golden set".into(),
            );
        }
        Ok(())
    }
}

/// Why a report does not verify.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Envelope(#[from] DsseError),
    #[error("the signed payload is not a VIPS certification statement: {0}")]
    Statement(String),
    /// A file given to compare differs from the certified one.
    #[error("the {what} {path} is not the certified one: its SHA-256 is {actual}, the report certifies `{name}` with {certified}")]
    Subject {
        what: &'static str,
        path: PathBuf,
        name: String,
        actual: String,
        certified: String,
    },
}

/// Reads an envelope from a file (bounded, JSON).
pub fn read_envelope(path: &Path) -> Result<Envelope, VerifyError> {
    let file_error = |message: String| VerifyError::File {
        path: path.to_path_buf(),
        message,
    };
    let bytes = crate::limits::read_regular_file(path, MAX_REPORT_BYTES).map_err(file_error)?;
    parse_envelope(&bytes).map_err(file_error)
}

/// Parses an envelope from JSON bytes.
pub fn parse_envelope(bytes: &[u8]) -> Result<Envelope, String> {
    serde_json::from_slice(bytes).map_err(|e| {
        format!("not a DSSE envelope (JSON with payload, payloadType, signatures): {e}")
    })
}

/// The statement inside an envelope, signature not checked (for merging
/// shards, whose reports are often unsigned).
pub fn read_statement(envelope: &Envelope) -> Result<Statement, VerifyError> {
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(DsseError::PayloadType(envelope.payload_type.clone()).into());
    }
    let payload =
        dsse::decode_base64(&envelope.payload).map_err(|e| DsseError::Payload(e.to_string()))?;
    parse_statement(&payload)
}

fn parse_statement(payload: &[u8]) -> Result<Statement, VerifyError> {
    let statement: Statement =
        serde_json::from_slice(payload).map_err(|e| VerifyError::Statement(e.to_string()))?;
    statement.check_shape()?;
    Ok(statement)
}

/// Files to compare with a report's subjects, hashed once (see
/// [`SubjectFiles::hash`]) for any number of reports.
#[derive(Debug, Clone, Default)]
pub struct SubjectFiles {
    /// The provider library: its path and SHA-256.
    pub provider: Option<(PathBuf, String)>,
    /// The golden file: its path and SHA-256.
    pub golden: Option<(PathBuf, String)>,
}

impl SubjectFiles {
    /// Hashes the files given (regular files, bounded).
    pub fn hash(
        provider: Option<&Path>,
        golden: Option<&Path>,
    ) -> Result<SubjectFiles, VerifyError> {
        let hash = |path: &Path, cap| {
            crate::limits::sha256_regular_file(path, cap)
                .map(|h| (path.to_path_buf(), h))
                .map_err(|message| VerifyError::File {
                    path: path.to_path_buf(),
                    message,
                })
        };
        Ok(SubjectFiles {
            provider: provider
                .map(|p| hash(p, crate::limits::MAX_HASHED_FILE_BYTES))
                .transpose()?,
            golden: golden
                .map(|g| hash(g, crate::limits::MAX_GOLDEN_BYTES))
                .transpose()?,
        })
    }
}

/// Checks an envelope: a signature by one of `keys` over its PAE, a VIPS
/// certification statement inside whose verdict follows from its records
/// (the rule of [`Predicate::assess`]), and each given file's SHA-256 equal
/// to its subject's. The verdict is the predicate's: a verified report may
/// say NOT CERTIFIED.
pub fn verify(
    envelope: &Envelope,
    keys: &[VerifyingKey],
    files: &SubjectFiles,
) -> Result<Statement, VerifyError> {
    let trusted: Vec<TrustedKey> = keys
        .iter()
        .map(|k| TrustedKey {
            id: keys::key_id(k),
            key: *k,
        })
        .collect();
    let payload = envelope.verify(&[PAYLOAD_TYPE], &trusted, 1)?;
    let statement = parse_statement(&payload)?;
    let mut again = statement.predicate.clone();
    again.assess();
    if (again.verdict, &again.reasons)
        != (statement.predicate.verdict, &statement.predicate.reasons)
    {
        return Err(VerifyError::Statement(format!(
            "the verdict `{}` does not follow from the report's own records, which give `{}`{}",
            statement.predicate.verdict.label(),
            again.verdict.label(),
            if again.reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", again.reasons.join("; "))
            }
        )));
    }
    let subjects = [
        (PROVIDER_SUBJECT, "provider library", &files.provider),
        (GOLDEN_SUBJECT, "golden vector set", &files.golden),
    ];
    for (index, what, file) in subjects {
        let Some((path, actual)) = file else { continue };
        let subject = &statement.subject[index];
        let certified = subject.digest.get("sha256").cloned().unwrap_or_default();
        if *actual != certified {
            return Err(VerifyError::Subject {
                what,
                path: path.clone(),
                name: subject.name.clone(),
                actual: actual.clone(),
                certified,
            });
        }
    }
    Ok(statement)
}
