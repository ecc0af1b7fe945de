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
//! - `compose`: a model certified from its components' reports;
//! - `replay`: replay packs, a run's verdicts re-judged by the embedded verifier.
//!
//! The top layer of the SDK: reads a run's results (`vips-runner`) and signs
//! them; nothing below it knows reports or keys.
//!
//! ```no_run
//! use vips_certify::{keys, read_envelope, verify, SubjectFiles};
//! let key = keys::read_public("vips-signing.pub.pem".as_ref())?;
//! let envelope = read_envelope("report.json".as_ref())?;
//! let statement = verify(&envelope, &[key], &SubjectFiles::default())?;
//! println!("{:?}", statement.predicate.verdict);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod compose;
pub mod dsse;
pub mod keys;
pub mod merge;
pub mod predicate;
pub mod replay;

pub use dsse::{DsseError, Envelope, TrustedKey};
pub use predicate::{OutputRecord, Predicate, Verdict};

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use vips_runner::run::RunReport;
use vips_runner::suite::Suite;

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
    let bytes = vips_data::limits::read_regular_file(path, MAX_REPORT_BYTES).map_err(file_error)?;
    parse_envelope(&bytes).map_err(file_error)
}

/// Parses an envelope from JSON bytes: no key twice in any object, and in
/// the form we write it (see [`strict_json`]).
pub fn parse_envelope(bytes: &[u8]) -> Result<Envelope, String> {
    strict_json(bytes, true).map_err(|e| {
        format!("not a DSSE envelope (JSON with payload, payloadType, signatures): {e}")
    })
}

/// The statement inside an envelope, signature not checked (for merging
/// shards, whose reports are often unsigned, and for pages). Lenient about
/// the form (`verify` is not), never about repeated keys.
pub fn read_statement(envelope: &Envelope) -> Result<Statement, VerifyError> {
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(DsseError::PayloadType(envelope.payload_type.clone()).into());
    }
    let payload =
        dsse::decode_base64(&envelope.payload).map_err(|e| DsseError::Payload(e.to_string()))?;
    parse_statement(&payload, false)
}

fn parse_statement(payload: &[u8], strict: bool) -> Result<Statement, VerifyError> {
    let statement: Statement = strict_json(payload, strict).map_err(VerifyError::Statement)?;
    statement.check_shape()?;
    Ok(statement)
}

/// Reads `T` from JSON refusing a key repeated in any object: serde keeps
/// the last of a map's repeated keys, another reader the first, so the same
/// signed bytes could say two things. With `strict`, the JSON must also be
/// in the form `T` is written in: serde would read a struct from an array,
/// an absent optional field as null and an integer as a float; another
/// verifier that refuses those (tools/verify_report.py) would then disagree.
fn strict_json<T>(bytes: &[u8], strict: bool) -> Result<T, String>
where
    T: serde::de::DeserializeOwned + Serialize,
{
    unique_keys(bytes)?;
    if !strict {
        return serde_json::from_slice(bytes).map_err(|e| e.to_string());
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let typed = T::deserialize(&value).map_err(|e| e.to_string())?;
    let written = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    match difference(&value, &written, "") {
        None => Ok(typed),
        Some((path, found, wrote)) => Err(format!(
            "`{path}` is not as the runner writes it: {} where it writes {}",
            clip(found),
            clip(wrote)
        )),
    }
}

type Difference<'a> = (String, Option<&'a Value>, Option<&'a Value>);

/// The first place where `read` and `written` differ: its path
/// (`predicate.run.shard`) and the value each has there.
fn difference<'a>(read: &'a Value, written: &'a Value, path: &str) -> Option<Difference<'a>> {
    let join = |key: &str| match path {
        "" => key.to_string(),
        _ => format!("{path}.{key}"),
    };
    match (read, written) {
        (Value::Object(r), Value::Object(w)) => w
            .iter()
            .find_map(|(k, wv)| match r.get(k) {
                Some(rv) => difference(rv, wv, &join(k)),
                None => Some((join(k), None, Some(wv))),
            })
            .or_else(|| {
                r.iter()
                    .find(|(k, _)| !w.contains_key(*k))
                    .map(|(k, rv)| (join(k), Some(rv), None))
            }),
        (Value::Array(r), Value::Array(w)) if r.len() == w.len() => r
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (rv, wv))| difference(rv, wv, &format!("{path}[{i}]"))),
        _ if read == written => None,
        _ => Some((
            match path {
                "" => "the document".to_string(),
                _ => path.to_string(),
            },
            Some(read),
            Some(written),
        )),
    }
}

/// A JSON value in a message: compact, at most 80 characters.
fn clip(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "nothing".into();
    };
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// Refuses JSON in which an object repeats a key, at any depth, naming the
/// first (`predicate.verdict`); also refuses what is not JSON.
fn unique_keys(bytes: &[u8]) -> Result<(), String> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    UniqueKeys(&JsonPath::Root)
        .deserialize(&mut de)
        .and_then(|()| de.end())
        .map_err(|e| e.to_string())
}

/// Where a value lies in a document, built only when a message needs it.
enum JsonPath<'a> {
    Root,
    Key(&'a JsonPath<'a>, &'a str),
    Index(&'a JsonPath<'a>, usize),
}

impl std::fmt::Display for JsonPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonPath::Root => Ok(()),
            JsonPath::Key(JsonPath::Root, key) => write!(f, "{key}"),
            JsonPath::Key(parent, key) => write!(f, "{parent}.{key}"),
            JsonPath::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// Visits every value, remembering each object's keys.
struct UniqueKeys<'a>(&'a JsonPath<'a>);

impl<'de> serde::de::DeserializeSeed<'de> for UniqueKeys<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueKeys<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(UniqueKeys(&JsonPath::Index(self.0, i)))?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the key `{}` appears twice",
                    JsonPath::Key(self.0, &key)
                )));
            }
            map.next_value_seed(UniqueKeys(&JsonPath::Key(self.0, &key)))?;
            seen.insert(key);
        }
        Ok(())
    }
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
            vips_data::limits::sha256_regular_file(path, cap)
                .map(|h| (path.to_path_buf(), h))
                .map_err(|message| VerifyError::File {
                    path: path.to_path_buf(),
                    message,
                })
        };
        Ok(SubjectFiles {
            provider: provider
                .map(|p| hash(p, vips_data::limits::MAX_HASHED_FILE_BYTES))
                .transpose()?,
            golden: golden
                .map(|g| hash(g, vips_data::limits::MAX_GOLDEN_BYTES))
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
    let statement = parse_statement(&payload, true)?;
    // The verdict is signed, but a signature only says who wrote it: a
    // runner with a bug, an older rule or a leaked key may sign a verdict
    // its records do not give.
    let recorded = &statement.predicate;
    let mut again = recorded.clone();
    again.assess();
    if (again.verdict, &again.reasons) != (recorded.verdict, &recorded.reasons) {
        let listed = |reasons: &[String]| match reasons {
            [] => "none".to_string(),
            _ => reasons.join("; "),
        };
        return Err(VerifyError::Statement(format!(
            "the verdict `{}` does not follow from the report's own records, which give `{}` (reasons: {}); the report's reasons: {}",
            recorded.verdict.label(),
            again.verdict.label(),
            listed(&again.reasons),
            listed(&recorded.reasons)
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
