//! Ed25519 keys as files that standard tools read: the private key as
//! PKCS#8 **v1** PEM (`BEGIN PRIVATE KEY`; the v2 form with the public key
//! inside, which ed25519-dalek writes by default, is refused by OpenSSL 3.0
//! and Python's `cryptography`), the public key as SPKI PEM.

use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::spki::der::zeroize::Zeroizing;
use ed25519_dalek::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, KeypairBytes,
};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest key file read (a PEM key is a few hundred bytes).
pub const MAX_KEY_BYTES: u64 = 64 << 10;

/// The environment variable naming the signing key file, for CI (where the
/// key comes from a secret mounted as a file).
pub const SIGN_KEY_ENV: &str = "VIPS_SIGN_KEY";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{path}: already exists (pass --force to overwrite it)")]
    Exists { path: PathBuf },
    #[error("cannot get random bytes from the operating system: {0}")]
    Random(String),
    #[error("cannot encode the key as PEM: {0}")]
    Encode(String),
}

fn file_error(path: &Path, message: impl Into<String>) -> KeyError {
    KeyError::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A fresh key from the operating system's random source.
pub fn generate() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The key's id: hex SHA-256 of its SPKI DER, what
/// `openssl pkey -pubin -in pub.pem -outform DER | sha256sum` prints.
pub fn key_id(key: &VerifyingKey) -> String {
    let der = key
        .to_public_key_der()
        .expect("an Ed25519 SPKI is a fixed 44-byte structure: encoding it cannot fail");
    hex::encode(Sha256::digest(der.as_bytes()))
}

/// PKCS#8 v1 PEM of the private key (no public key inside), wiped from
/// memory when dropped.
pub fn private_pem(key: &SigningKey) -> Result<Zeroizing<String>, KeyError> {
    let pair = KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    };
    pair.to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| KeyError::Encode(e.to_string()))
}

/// SPKI PEM of the public key.
pub fn public_pem(key: &VerifyingKey) -> Result<String, KeyError> {
    key.to_public_key_pem(LineEnding::LF)
        .map_err(|e| KeyError::Encode(e.to_string()))
}

fn read_pem(path: &Path) -> Result<String, KeyError> {
    let bytes = vips_data::limits::read_regular_file(path, MAX_KEY_BYTES)
        .map_err(|m| file_error(path, m))?;
    String::from_utf8(bytes).map_err(|_| file_error(path, "not a PEM file (not UTF-8 text)"))
}

/// Reads a private key: PKCS#8 PEM, v1 or v2.
pub fn read_private(path: &Path) -> Result<SigningKey, KeyError> {
    let pem = read_pem(path)?;
    if pem.contains("PUBLIC KEY-----") {
        return Err(file_error(
            path,
            "holds a public key; signing needs the private key (BEGIN PRIVATE KEY)",
        ));
    }
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        file_error(
            path,
            format!("not an Ed25519 private key in PKCS#8 PEM: {e}"),
        )
    })
}

/// Reads a public key: SPKI PEM (`BEGIN PUBLIC KEY`).
pub fn read_public(path: &Path) -> Result<VerifyingKey, KeyError> {
    let pem = read_pem(path)?;
    if pem.contains("PRIVATE KEY-----") {
        return Err(file_error(
            path,
            "holds a private key; verifying needs the public key (BEGIN PUBLIC KEY)",
        ));
    }
    VerifyingKey::from_public_key_pem(&pem)
        .map_err(|e| file_error(path, format!("not an Ed25519 public key in SPKI PEM: {e}")))
}

/// Writes `contents` to `path` with mode 0600 (private keys). Never replaces
/// an existing file unless `force`; then the new file is written beside it
/// and renamed over it, so the old key is never half overwritten and the
/// mode is 0600 whatever the old file's was.
pub fn write_private_file(path: &Path, contents: &str, force: bool) -> Result<(), KeyError> {
    write_file(path, contents, force, 0o600)
}

/// Writes a public key file (mode 0644), with the same rules.
pub fn write_public_file(path: &Path, contents: &str, force: bool) -> Result<(), KeyError> {
    write_file(path, contents, force, 0o644)
}

fn write_file(path: &Path, contents: &str, force: bool, mode: u32) -> Result<(), KeyError> {
    if !force && path.symlink_metadata().is_ok() {
        return Err(KeyError::Exists {
            path: path.to_path_buf(),
        });
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let target = if force {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{}.tmp", std::process::id()));
        path.with_file_name(name)
    } else {
        path.to_path_buf()
    };
    let written = options
        .open(&target)
        .and_then(|mut f| f.write_all(contents.as_bytes()).and_then(|()| f.sync_all()));
    let result = written.and_then(|()| {
        if force {
            std::fs::rename(&target, path)
        } else {
            Ok(())
        }
    });
    result.map_err(|e| {
        if force {
            let _ = std::fs::remove_file(&target);
        }
        if !force && e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyError::Exists {
                path: path.to_path_buf(),
            }
        } else {
            file_error(path, format!("cannot write: {e}"))
        }
    })
}
