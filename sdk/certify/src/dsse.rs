//! DSSE, the Dead Simple Signing Envelope (secure-systems-lab/dsse,
//! protocol v1): a payload, its type, and signatures over the
//! pre-authentication encoding (PAE) of both, so a signature can never be
//! replayed for another payload type.

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine;
use ed25519_dalek::{Signature as Ed25519Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The most signatures an envelope may carry (each is tried against every
/// trusted key).
pub const MAX_SIGNATURES: usize = 64;

/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, LEN the byte length
/// in ASCII decimal: the bytes every signature covers.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + payload.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// The JSON envelope (`envelope.md`): payload and signatures in base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Envelope {
    pub payload: String,
    pub payload_type: String,
    pub signatures: Vec<Signature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// A hint naming the key (ours: hex SHA-256 of its SPKI DER, see
    /// `keys::key_id`); never trusted, only reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyid: Option<String>,
    pub sig: String,
}

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsseError {
    #[error("the payload is not base64: {0}")]
    Payload(String),
    #[error("payload type `{0}` is not one this verifier accepts")]
    PayloadType(String),
    #[error("the report is unsigned (it carries no signature)")]
    Unsigned,
    #[error("{0} signatures, more than the {MAX_SIGNATURES} an envelope may carry")]
    TooManySignatures(usize),
    /// No signature verifies with a trusted key, though one names the key:
    /// the signed bytes (payload or type) or the signature changed.
    #[error("the signature by key {0} does not verify: the payload, its type or the signature was modified after signing")]
    Modified(String),
    /// No signature verifies and none names a trusted key.
    #[error("not signed by the given key (signed by {signers}; the given key is {trusted})")]
    WrongKey { signers: String, trusted: String },
    #[error("{verified} of the {threshold} distinct trusted keys needed verify a signature")]
    Threshold { verified: usize, threshold: usize },
}

/// Decodes standard or URL-safe base64 (verifiers must accept both).
pub fn decode_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    STANDARD
        .decode(text)
        .or_else(|e| URL_SAFE.decode(text).map_err(|_| e))
}

/// A trusted key and its id (the id only names it in messages and keyids).
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub id: String,
    pub key: VerifyingKey,
}

impl Envelope {
    /// An envelope of `payload` signed by each of `signers`, with their key ids.
    pub fn sign(payload_type: &str, payload: &[u8], signers: &[(&str, &SigningKey)]) -> Envelope {
        let message = pae(payload_type, payload);
        Envelope {
            payload: STANDARD.encode(payload),
            payload_type: payload_type.to_string(),
            signatures: signers
                .iter()
                .map(|(id, key)| Signature {
                    keyid: Some(id.to_string()),
                    sig: STANDARD.encode(key.sign(&message).to_bytes()),
                })
                .collect(),
        }
    }

    /// The payload, once at least `threshold` distinct trusted keys verify a
    /// signature over its PAE and its type is one of `payload_types`. The
    /// keyids are hints: every signature is tried against every key.
    pub fn verify(
        &self,
        payload_types: &[&str],
        trusted: &[TrustedKey],
        threshold: usize,
    ) -> Result<Vec<u8>, DsseError> {
        let payload =
            decode_base64(&self.payload).map_err(|e| DsseError::Payload(e.to_string()))?;
        if self.signatures.is_empty() {
            return Err(DsseError::Unsigned);
        }
        if self.signatures.len() > MAX_SIGNATURES {
            return Err(DsseError::TooManySignatures(self.signatures.len()));
        }
        if !payload_types.contains(&self.payload_type.as_str()) {
            return Err(DsseError::PayloadType(self.payload_type.clone()));
        }
        let message = pae(&self.payload_type, &payload);
        let signatures: Vec<Option<Ed25519Signature>> = self
            .signatures
            .iter()
            .map(|s| {
                let bytes = decode_base64(&s.sig).ok()?;
                Ed25519Signature::from_slice(&bytes).ok()
            })
            .collect();
        let verified: Vec<&TrustedKey> = trusted
            .iter()
            .filter(|k| {
                signatures
                    .iter()
                    .flatten()
                    .any(|s| k.key.verify_strict(&message, s).is_ok())
            })
            .collect();
        let mut distinct: Vec<[u8; 32]> = verified.iter().map(|k| k.key.to_bytes()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() >= threshold.max(1) {
            return Ok(payload);
        }
        if threshold > 1 && !distinct.is_empty() {
            return Err(DsseError::Threshold {
                verified: distinct.len(),
                threshold,
            });
        }
        let named = self
            .signatures
            .iter()
            .filter_map(|s| s.keyid.as_deref())
            .find(|id| trusted.iter().any(|k| k.id == *id));
        match named {
            Some(id) => Err(DsseError::Modified(id.to_string())),
            None => Err(DsseError::WrongKey {
                signers: list(
                    self.signatures
                        .iter()
                        .map(|s| s.keyid.as_deref().unwrap_or("an unnamed key")),
                ),
                trusted: list(trusted.iter().map(|k| k.id.as_str())),
            }),
        }
    }
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let items: Vec<&str> = items.collect();
    if items.is_empty() {
        "no key".into()
    } else {
        items.join(", ")
    }
}
