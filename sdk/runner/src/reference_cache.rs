//! The reference cache (docs/runner.md, "The reference cache"): a stage's
//! float64 reference, bounds and σ depend only on the document, the golden
//! file, the tier and the reference itself when the stage is fed golden
//! inputs, so they are kept on disk between runs. Entries are
//! content-checked when read (a damaged or altered entry is dropped and
//! recomputed), written atomically (concurrent runs never see half an
//! entry), and the directory is bounded (least recently used first out).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use vips_data::HostTensor;
use vips_verdict::error_model::StageReference;
use vsdk_catalog::TensorSpec;

/// Bumped whenever the float64 reference, the bounds or σ change for the
/// same inputs (an error-model change): older entries then miss.
pub const REFERENCE_VERSION: &str = concat!("vips-sdk ", env!("CARGO_PKG_VERSION"), " ref 5");

/// The environment variable that sets the cache directory (default
/// `$XDG_CACHE_HOME/vips-sdk/reference`, else `~/.cache/vips-sdk/reference`).
pub const CACHE_DIR_ENV: &str = "VSDK_REFERENCE_CACHE";
/// The cache's size bound, in bytes, by default (2 GiB).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
const MAGIC: &[u8; 8] = b"VSDKREF1";
/// The extension of a regenerated anchored golden value's entry.
const ANCHORED: &str = "anchored";

/// What identifies a stage reference: everything it is a function of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub document_sha256: [u8; 32],
    pub golden_sha256: [u8; 32],
    pub stage: String,
    pub tier: String,
    /// The reference provider's library hash and name.
    pub reference: String,
}

impl Key {
    fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for part in [
            REFERENCE_VERSION.as_bytes(),
            &self.document_sha256,
            &self.golden_sha256,
            self.stage.as_bytes(),
            self.tier.as_bytes(),
            self.reference.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().into()
    }
}

#[derive(Serialize, Deserialize)]
struct Entry {
    key: [u8; 32],
    /// What computing it took: the run's timeouts derive from it.
    seconds: f64,
    values: Vec<(String, vips_execution::execution::Spec, Vec<u8>)>,
    bounds: Vec<(String, Vec<f64>)>,
    sigmas: Vec<(String, Vec<f64>)>,
    coverage: Vec<String>,
    summed: Vec<String>,
}

/// A cache directory and its bound.
#[derive(Debug, Clone)]
pub struct ReferenceCache {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// How a lookup went, for the run's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Hit,
    Miss,
    /// An entry was there but did not check out: dropped, recomputed.
    Damaged,
}

impl ReferenceCache {
    /// The default directory, from the environment; `None` when no home
    /// directory is known.
    pub fn from_env() -> Option<ReferenceCache> {
        let dir = match std::env::var_os(CACHE_DIR_ENV) {
            Some(d) => PathBuf::from(d),
            None => std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?
                .join("vips-sdk")
                .join("reference"),
        };
        Some(ReferenceCache {
            dir,
            max_bytes: DEFAULT_MAX_BYTES,
        })
    }

    /// A cache for the running program's build alone: `dir/<program>/<build>`
    /// (the build named by the executable's size and modification time), the
    /// program's entries from earlier builds removed. Test suites share
    /// references between their processes this way, and a change to the
    /// error model that did not bump [`REFERENCE_VERSION`] never reads an
    /// entry computed before it. Bounded at `max_bytes`; `None` where the
    /// executable is unknown.
    pub fn for_this_build(dir: &Path, max_bytes: u64) -> Option<ReferenceCache> {
        let exe = std::env::current_exe().ok()?;
        let meta = std::fs::metadata(&exe).ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        let program = dir.join(exe.file_name()?);
        let build = format!("{:x}-{modified:x}", meta.len());
        if let Ok(entries) = std::fs::read_dir(&program) {
            for e in entries.flatten().filter(|e| e.file_name() != *build) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        Some(ReferenceCache {
            dir: program.join(build),
            max_bytes,
        })
    }

    fn path(&self, digest: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}.ref", hex::encode(digest)))
    }

    /// The cached reference of `key`, if there is a sound one, and the
    /// seconds computing it took.
    pub fn get(&self, key: &Key) -> (Option<(StageReference, f64)>, Lookup) {
        let digest = key.digest();
        let path = self.path(&digest);
        let Ok(bytes) = vips_data::limits::read_regular_file(&path, self.max_bytes) else {
            return (None, Lookup::Miss);
        };
        match decode(&bytes, &digest) {
            Some(r) => {
                touch(&path);
                (Some(r), Lookup::Hit)
            }
            None => {
                let _ = std::fs::remove_file(&path);
                (None, Lookup::Damaged)
            }
        }
    }

    /// Stores `reference` under `key` (best effort: a cache that cannot be
    /// written costs time, never a verdict).
    pub fn put(&self, key: &Key, reference: &StageReference, seconds: f64) {
        let digest = key.digest();
        let Some(bytes) = encode(reference, digest, seconds) else {
            return;
        };
        if bytes.len() as u64 > self.max_bytes || std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        self.write(&digest, &bytes, &self.path(&digest));
    }

    fn anchored_path(&self, sha256: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}.{ANCHORED}", hex::encode(sha256)))
    }

    /// A regenerated anchored golden value (docs/golden-format.md) by its
    /// recorded SHA-256, the entry's name: content-addressed, so an entry
    /// whose bytes do not hash to its name (damaged, tampered) is dropped
    /// and never used.
    pub fn get_anchored(
        &self,
        sha256: &[u8; 32],
        spec: &TensorSpec,
    ) -> (Option<HostTensor>, Lookup) {
        let path = self.anchored_path(sha256);
        let Ok(bytes) = vips_data::limits::read_regular_file(&path, spec.size_bytes() as u64)
        else {
            return (None, Lookup::Miss);
        };
        match HostTensor::from_bytes(spec.clone(), bytes)
            .ok()
            .filter(|t| vips_data::golden::canonical_sha256(t) == *sha256)
        {
            Some(t) => {
                touch(&path);
                (Some(t), Lookup::Hit)
            }
            None => {
                let _ = std::fs::remove_file(&path);
                (None, Lookup::Damaged)
            }
        }
    }

    /// Stores a regenerated anchored value (best effort, as [`Self::put`]).
    pub fn put_anchored(&self, sha256: &[u8; 32], t: &HostTensor) {
        if t.bytes.len() as u64 > self.max_bytes || std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        self.write(sha256, &t.bytes, &self.anchored_path(sha256));
    }

    /// Writes an entry whole under a unique name, then renames it into
    /// place (a concurrent reader sees the old entry, the new one, or none),
    /// then evicts.
    fn write(&self, digest: &[u8; 32], bytes: &[u8], path: &Path) {
        let tmp = self.dir.join(format!(
            ".{}.{}.{}.tmp",
            hex::encode(&digest[..8]),
            std::process::id(),
            vips_execution::execution::runtime_seed()
        ));
        if std::fs::write(&tmp, bytes).is_err() || std::fs::rename(&tmp, path).is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        self.evict();
    }

    /// Removes the least recently used entries until the directory is
    /// within its bound.
    fn evict(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| {
                e.path()
                    .extension()
                    .is_some_and(|x| x == "ref" || x == ANCHORED)
            })
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// Least recently used goes first: a hit is a use.
fn touch(path: &Path) {
    let _ = std::fs::File::options()
        .append(true)
        .open(path)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
}

fn encode(r: &StageReference, key: [u8; 32], seconds: f64) -> Option<Vec<u8>> {
    let sorted = |m: &std::collections::HashMap<String, Vec<f64>>| {
        let mut v: Vec<(String, Vec<f64>)> =
            m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let mut values: Vec<_> = r
        .values
        .iter()
        .map(|(k, t)| {
            (
                k.clone(),
                vips_execution::execution::Spec::of(&t.spec),
                t.bytes.to_vec(),
            )
        })
        .collect();
    values.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summed: Vec<String> = r.summed.iter().cloned().collect();
    summed.sort();
    let entry = Entry {
        key,
        seconds,
        values,
        bounds: sorted(&r.bounds),
        sigmas: sorted(&r.sigmas),
        coverage: r.coverage.clone(),
        summed,
    };
    let mut out = MAGIC.to_vec();
    out = postcard::to_extend(&entry, out).ok()?;
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    Some(out)
}

/// The entry's reference, if its checksum, its key and every tensor's size
/// check out.
fn decode(bytes: &[u8], key: &[u8; 32]) -> Option<(StageReference, f64)> {
    let body = bytes.len().checked_sub(32)?;
    if bytes.get(..MAGIC.len())? != MAGIC || Sha256::digest(&bytes[..body])[..] != bytes[body..] {
        return None;
    }
    let entry: Entry = postcard::from_bytes(&bytes[MAGIC.len()..body]).ok()?;
    if entry.key != *key || !(entry.seconds.is_finite() && entry.seconds >= 0.0) {
        return None;
    }
    let mut values = std::collections::HashMap::new();
    for (name, spec, data) in entry.values {
        let spec: TensorSpec = spec.to_spec().ok()?;
        values.insert(name, HostTensor::from_bytes(spec, data).ok()?);
    }
    let sized =
        |m: Vec<(String, Vec<f64>)>| -> Option<std::collections::HashMap<String, Vec<f64>>> {
            m.into_iter()
                .map(|(k, v)| {
                    let n = values.get(&k)?.spec.numel();
                    (v.len() == n).then_some((k, v))
                })
                .collect()
        };
    let r = StageReference {
        bounds: sized(entry.bounds)?,
        sigmas: sized(entry.sigmas)?,
        values,
        coverage: entry.coverage,
        summed: entry.summed.into_iter().collect::<HashSet<_>>(),
        node_seconds: Vec::new(),
    };
    Some((r, entry.seconds))
}
