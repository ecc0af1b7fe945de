//! A suite: a VIPS document and its golden vector file, checked against each
//! other (document hash, every tensor's dtype and shape, every graph's shapes),
//! with tensors materialised once and shared.

use crate::document::{Document, DocumentError, Location, TensorSource};
use crate::golden::{GoldenError, GoldenFile, Source};
use crate::{HostTensor, Node, TensorSpec};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error(transparent)]
    Document(#[from] DocumentError),
    #[error(transparent)]
    Golden(#[from] GoldenError),
    #[error("{}:{location}: {message}", file.display())]
    Mismatch {
        file: PathBuf,
        location: Location,
        message: String,
    },
    #[error("{0}")]
    Layout(String),
    /// The golden file was made from another version of the document.
    #[error("{}: made from another version of {} (document sha256 {document_sha256}, the golden file records {recorded}): re-run `vips-conformance generate` if its golden values come from the reference, or `vips-conformance pack` if they were captured on a reference system", golden.display(), document.display())]
    Stale {
        golden: PathBuf,
        document: PathBuf,
        document_sha256: String,
        recorded: String,
    },
}

pub struct Suite {
    pub document: Document,
    pub golden: GoldenFile,
    /// The spec of every tensor, stage outputs and graph intermediates included.
    specs: HashMap<String, TensorSpec>,
    cache: Mutex<HashMap<String, Arc<HostTensor>>>,
    /// Seeded tensors whose values matched their recorded hash once: the
    /// generator is deterministic, so a regeneration after [`Suite::release`]
    /// is not hashed again.
    verified: Mutex<HashSet<String>>,
}

/// The files of a suite directory.
pub fn suite_files(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("suite.yaml"), dir.join("suite.golden"))
}

impl Suite {
    /// Opens a suite directory (`suite.yaml` + `suite.golden`) or a document
    /// path (its golden file beside it, same stem, `.golden`).
    pub fn open(path: &Path) -> Result<Suite, SuiteError> {
        let (doc, golden) = if path.is_dir() {
            suite_files(path)
        } else {
            (path.to_path_buf(), path.with_extension("golden"))
        };
        Suite::from_files(&doc, &golden)
    }

    pub fn from_files(doc: &Path, golden: &Path) -> Result<Suite, SuiteError> {
        let document = Document::open(doc)?;
        let golden = GoldenFile::open(golden)?;
        Suite::new(document, golden)
    }

    pub fn new(document: Document, golden: GoldenFile) -> Result<Suite, SuiteError> {
        let mismatch = |location: &Location, message: String| SuiteError::Mismatch {
            file: document.path.clone(),
            location: location.clone(),
            message,
        };
        if golden.document_sha256 != document.sha256 {
            return Err(SuiteError::Stale {
                golden: golden.path.clone(),
                document: document.path.clone(),
                document_sha256: hex::encode(document.sha256),
                recorded: hex::encode(golden.document_sha256),
            });
        }
        let mut specs = HashMap::new();
        for t in &document.tensors {
            let Some(g) = golden.tensor(&t.name) else {
                return Err(mismatch(
                    &t.at,
                    format!(
                        "tensor `{}` is missing from {}",
                        t.name,
                        golden.path.display()
                    ),
                ));
            };
            if g.spec.dtype != t.dtype || t.shape.as_ref().is_some_and(|s| *s != g.spec.shape) {
                return Err(mismatch(
                    &t.at,
                    format!(
                        "tensor `{}` is declared {} {} but {} holds {} {:?}",
                        t.name,
                        t.dtype,
                        t.shape
                            .as_ref()
                            .map_or("(any shape)".to_string(), |s| format!("{s:?}")),
                        golden.path.display(),
                        g.spec.dtype,
                        g.spec.shape
                    ),
                ));
            }
            match &t.source {
                TensorSource::Seeded(s) if g.source != Source::Seeded(*s) => {
                    return Err(mismatch(&t.at, format!("tensor `{}`: the golden file's recipe differs from the document's seed", t.name)));
                }
                TensorSource::Values(_) => {
                    let literal = t
                        .intrinsic()
                        .expect("values are intrinsic")
                        .map_err(|e| mismatch(&t.at, e))?;
                    if crate::golden::canonical_sha256(&literal) != g.sha256 {
                        return Err(mismatch(
                            &t.at,
                            format!(
                                "tensor `{}`: the golden file's values differ from the document's",
                                t.name
                            ),
                        ));
                    }
                }
                _ => {}
            }
            specs.insert(t.name.clone(), g.spec.clone());
        }
        // Every graph must type-check with the golden shapes, and produce
        // exactly the declared outputs.
        for stage in &document.stages {
            for node in &stage.graph {
                let inputs: Vec<TensorSpec> =
                    node.inputs.iter().map(|i| specs[i].clone()).collect();
                let (_, out) = Node::infer(node.op, &node.attrs, &inputs)
                    .map_err(|e| mismatch(&node.at, format!("stage `{}`: {e}", stage.name)))?;
                let out = out
                    .into_iter()
                    .next()
                    .expect("catalog v1 kernels have one output");
                if let Some(declared) = specs.get(&node.output) {
                    if *declared != out {
                        return Err(mismatch(
                            &node.at,
                            format!(
                                "stage `{}`: `{}` comes out {} {:?}, declared {} {:?}",
                                stage.name,
                                node.output,
                                out.dtype,
                                out.shape,
                                declared.dtype,
                                declared.shape
                            ),
                        ));
                    }
                }
                specs.insert(node.output.clone(), out);
            }
        }
        Ok(Suite {
            document,
            golden,
            specs,
            cache: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashSet::new()),
        })
    }

    pub fn spec(&self, name: &str) -> Option<&TensorSpec> {
        self.specs.get(name)
    }

    /// A declared tensor's values (regenerated or read, hash-checked, cached).
    pub fn tensor(&self, name: &str) -> Result<Arc<HostTensor>, SuiteError> {
        if let Some(t) = lock(&self.cache).get(name) {
            return Ok(Arc::clone(t));
        }
        let g = self.golden.tensor(name).ok_or_else(|| {
            SuiteError::Layout(format!(
                "tensor `{name}` is not in {}",
                self.golden.path.display()
            ))
        })?;
        let verified = lock(&self.verified).contains(name);
        let t = Arc::new(if verified {
            self.golden.regenerate(g)?
        } else {
            self.golden.materialize(g)?
        });
        lock(&self.verified).insert(name.to_string());
        lock(&self.cache).insert(name.to_string(), Arc::clone(&t));
        Ok(t)
    }

    /// Drops these tensors from the cache (a later [`Suite::tensor`] reads or
    /// regenerates them): a runner holds one stage's weights at a time
    /// rather than a whole model's.
    pub fn release<'a>(&self, names: impl IntoIterator<Item = &'a String>) {
        let mut cache = lock(&self.cache);
        for name in names {
            cache.remove(name);
        }
    }
}

/// The cache's maps stay consistent whatever panicked while one was held
/// (each update is a single insert or remove).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The environment variable naming directories of suites (colon-separated).
pub const SUITES_PATH_ENV: &str = "VSDK_SUITES_PATH";

/// Every suite directory (one holding a `suite.yaml`) in `dirs`, in search
/// order, the first of each name.
pub fn find_all(dirs: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("suite.yaml").is_file())
            .collect();
        names.sort();
        for p in names {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !found.iter().any(|(n, _)| *n == name) {
                found.push((name, p));
            }
        }
    }
    found
}

/// A suite argument as a path: an existing path (a suite directory or a
/// document), or the name of a suite directory in `dirs`.
pub fn resolve(arg: &str, dirs: &[PathBuf]) -> Result<PathBuf, String> {
    let p = Path::new(arg);
    if p.exists() {
        return Ok(p.to_path_buf());
    }
    let all = find_all(dirs);
    if let Some((_, p)) = all.iter().find(|(n, _)| n == arg) {
        return Ok(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
    }
    let known: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    Err(format!(
        "no suite `{arg}`: not a path, and not among the suites found ({}) in {}",
        if known.is_empty() {
            "none".into()
        } else {
            known.join(", ")
        },
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
