//! `keygen`: an Ed25519 key pair for signing reports: the private key as
//! PKCS#8 v1 PEM (mode 0600), the public key as SPKI PEM, both readable by
//! OpenSSL and Python's `cryptography` as they are.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vips_sdk::certify::keys;

#[derive(clap::Args)]
pub struct Args {
    /// The private key file to write (e.g. vips-key.pem).
    key: PathBuf,
    /// The public key file; default: the key's path with `.pub.pem` for `.pem`.
    #[arg(long, value_name = "PUB.pem")]
    public: Option<PathBuf>,
    /// Replace existing files.
    #[arg(long, conflicts_with = "if_missing")]
    force: bool,
    /// Keep a key that already exists (and write its public key if that is
    /// missing); create one only where there is none.
    #[arg(long)]
    if_missing: bool,
}

/// `vips-key.pem` -> `vips-key.pub.pem`.
pub fn public_path(key: &Path) -> PathBuf {
    let name = key
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".pem").unwrap_or(&name);
    key.with_file_name(format!("{stem}.pub.pem"))
}

pub fn run(args: Args) -> super::Outcome {
    let public = args
        .public
        .clone()
        .unwrap_or_else(|| public_path(&args.key));
    if public == args.key {
        return Err("the public key path is the private key's".into());
    }
    let e = |e: keys::KeyError| e.to_string();
    if args.if_missing && args.key.symlink_metadata().is_ok() {
        let key = keys::read_private(&args.key).map_err(e)?;
        let id = keys::key_id(&key.verifying_key());
        if public.symlink_metadata().is_err() {
            keys::write_public_file(
                &public,
                &keys::public_pem(&key.verifying_key()).map_err(e)?,
                false,
            )
            .map_err(e)?;
        } else if keys::read_public(&public).map_err(e)? != key.verifying_key() {
            return Err(format!(
                "{}: not the public key of {} (remove it, or give --public)",
                public.display(),
                args.key.display()
            ));
        }
        println!(
            "using the existing signing key {} (key id {}); public key {}",
            args.key.display(),
            id,
            public.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if !args.force {
        for p in [&args.key, &public] {
            if p.symlink_metadata().is_ok() {
                return Err(keys::KeyError::Exists { path: p.clone() }.to_string());
            }
        }
    }
    let key = keys::generate().map_err(e)?;
    keys::write_private_file(&args.key, &keys::private_pem(&key).map_err(e)?, args.force)
        .map_err(e)?;
    let public_pem = keys::public_pem(&key.verifying_key()).map_err(e)?;
    keys::write_public_file(&public, &public_pem, args.force).map_err(e)?;
    println!(
        "created a new signing key {} (mode 0600, key id {}); public key {}: give it to whoever verifies your reports",
        args.key.display(),
        keys::key_id(&key.verifying_key()),
        public.display()
    );
    Ok(ExitCode::SUCCESS)
}
