//! Input limits: every bound the SDK enforces on the files it reads, checked
//! before anything is allocated, generated or parsed (docs/vips-format.md,
//! "Input limits", lists each one and where it is enforced).

use std::io::Read;
use std::path::Path;

/// Largest tensor of any kind, in bytes (2^34, 16 GiB): stored, captured,
/// declared or produced by a graph node (the catalog's limit).
pub use vsdk_catalog::MAX_TENSOR_BYTES;

/// Largest seeded tensor, in bytes once generated (2^28, 256 MiB): a few
/// bytes of recipe must not stand for gigabytes.
pub const MAX_SEEDED_TENSOR_BYTES: u64 = 1 << 28;

/// Largest total of the seeded tensors of one document or golden file, in
/// bytes once generated (2^31, 2 GiB).
pub const MAX_SEEDED_TOTAL_BYTES: u64 = 1 << 31;

/// Largest golden vector file, in bytes (2^32, 4 GiB; it is read whole. The
/// full DINOv2 ViT-S/14 suite's is 6.6 MiB: golden files are compact).
pub const MAX_GOLDEN_BYTES: u64 = 1 << 32;

/// Largest VIPS document, in bytes (4 MiB; the DINOv2 documents are 82 KB).
/// The YAML parser keeps about 100 bytes per scalar: a 4 MiB flow list of
/// zeros peaks at about 420 MB, 16 MiB would take 1.7 GB.
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;

/// Deepest nesting of a VIPS document's YAML: block collections (indentation
/// levels and `- ` sequence entries) plus flow collections (`[`, `{`).
pub const MAX_YAML_DEPTH: usize = 64;

/// Largest header of a `.npy` array (64 KiB; NumPy writes a few hundred bytes).
pub const MAX_NPY_HEADER_BYTES: u64 = 64 << 10;

/// Deepest bracket nesting (`{`, `(`, `[`) in a `.npy` header (a plain
/// array's header nests 2 deep).
pub const MAX_NPY_HEADER_NESTING: usize = 8;

/// Largest ratio of an `.npz` member's uncompressed to compressed size:
/// deflate never expands data by more than about 1032 times, so a member
/// declaring more is corrupt or hostile.
pub const MAX_DEFLATE_RATIO: u64 = 1032;

/// Largest JSON header of a `.safetensors` file (16 MiB; a checkpoint of a
/// thousand tensors has a header of about 100 KB).
pub const MAX_SAFETENSORS_HEADER_BYTES: u64 = 16 << 20;

/// Largest file hashed as a whole (provider libraries, the runner, files
/// compared with a report's subjects): 16 GiB. Hashing streams, so this
/// bounds time only; GPU driver libraries reach a gigabyte.
pub const MAX_HASHED_FILE_BYTES: u64 = 1 << 34;

/// Hex SHA-256 of a regular file of at most `cap` bytes, read in chunks
/// (never more than `cap` bytes, whatever the file does meanwhile).
pub fn sha256_regular_file(path: &Path, cap: u64) -> Result<String, String> {
    use sha2::{Digest, Sha256};
    let (file, _) = open_regular_file(path, cap)?;
    let mut file = file.take(cap);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The size of `path` if it is a regular file (symbolic links followed) no
/// larger than `cap` bytes; otherwise why not, in words that follow the path.
/// Checked with `metadata`, so a FIFO or a device is refused before it is
/// opened (opening a FIFO blocks; `/dev/zero` never ends).
pub fn regular_file_size(path: &Path, cap: u64) -> Result<u64, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    check_kind(&meta)?;
    if meta.len() > cap {
        return Err(format!(
            "is {} bytes, larger than the {cap}-byte limit for this kind of file",
            meta.len()
        ));
    }
    Ok(meta.len())
}

fn check_kind(meta: &std::fs::Metadata) -> Result<(), String> {
    if meta.is_file() {
        return Ok(());
    }
    let kind = if meta.is_dir() {
        "a directory".to_string()
    } else {
        describe_special(meta)
    };
    Err(format!("not a regular file ({kind})"))
}

#[cfg(unix)]
fn describe_special(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO".into()
    } else if t.is_char_device() {
        "a character device".into()
    } else if t.is_block_device() {
        "a block device".into()
    } else if t.is_socket() {
        "a socket".into()
    } else {
        "a special file".into()
    }
}

#[cfg(not(unix))]
fn describe_special(_: &std::fs::Metadata) -> String {
    "a special file".into()
}

/// Opens `path` for reading if it is a regular file of at most `cap` bytes;
/// returns the file and its size. The kind is checked on the path first,
/// then again on the open file (opened non-blocking on Unix, so a path
/// swapped for a FIFO in between cannot hang the open).
pub fn open_regular_file(path: &Path, cap: u64) -> Result<(std::fs::File, u64), String> {
    regular_file_size(path, cap)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| format!("cannot read: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    check_kind(&meta)?;
    if meta.len() > cap {
        return Err(format!(
            "is {} bytes, larger than the {cap}-byte limit for this kind of file",
            meta.len()
        ));
    }
    Ok((file, meta.len()))
}

/// Reads `path` whole if it is a regular file of at most `cap` bytes, never
/// reading more than `cap` bytes whatever the file does meanwhile.
pub fn read_regular_file(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let (file, len) = open_regular_file(path, cap)?;
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!(
            "grew past the {cap}-byte limit for this kind of file while being read"
        ));
    }
    Ok(bytes)
}
