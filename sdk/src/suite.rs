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

/// Why a suite argument is a path rather than a name (docs/runner.md,
/// "Naming a suite"): it contains `/`, or ends in `.yaml` (`.yml`: a
/// document) or `.golden` (a golden file). Anything else is a name, looked
/// up in the suite directories, even when the working directory holds a file
/// or directory of that name.
pub fn path_reason(arg: &str) -> Option<&'static str> {
    if arg.contains('/') || arg.contains(std::path::MAIN_SEPARATOR) {
        Some("it contains `/`")
    } else if arg.ends_with(".yaml") || arg.ends_with(".yml") {
        Some("it ends in `.yaml`")
    } else if arg.ends_with(".golden") {
        Some("it ends in `.golden`")
    } else {
        None
    }
}

/// A suite argument located: where it is, and how it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The argument as given.
    pub arg: String,
    /// The suite directory or document.
    pub path: PathBuf,
    /// Read as a name: the suite directory it was found in; `None`: read as
    /// a path.
    pub found_in: Option<PathBuf>,
}

impl Located {
    /// How the argument was read, for messages.
    pub fn reading(&self) -> String {
        match &self.found_in {
            Some(dir) => format!(
                "suite `{}` (read as a name, found in {})",
                self.arg,
                dir.display()
            ),
            None => format!(
                "`{}` (read as a path: {})",
                self.arg,
                path_reason(&self.arg).unwrap_or("given as one")
            ),
        }
    }

    /// `message` (an error about this suite's files) with how the argument
    /// was read in front.
    pub fn context(&self, message: impl std::fmt::Display) -> String {
        format!("{}: {message}", self.reading())
    }

    /// The document and the golden file: a suite directory's two files, or a
    /// document's golden file beside it (same stem), or a golden file's
    /// document.
    pub fn files(&self) -> (PathBuf, PathBuf) {
        if self.path.is_dir() {
            suite_files(&self.path)
        } else if self.path.extension().is_some_and(|e| e == "golden") {
            (self.path.with_extension("yaml"), self.path.clone())
        } else {
            (self.path.clone(), self.path.with_extension("golden"))
        }
    }

    /// Opens the suite; an error says how the argument was read.
    pub fn open(&self) -> Result<Suite, String> {
        let (doc, golden) = self.files();
        Suite::from_files(&doc, &golden).map_err(|e| self.context(e))
    }

    /// Reads the document alone; an error says how the argument was read.
    pub fn document(&self) -> Result<Document, String> {
        Document::open(&self.files().0).map_err(|e| self.context(e))
    }
}

/// Locates a suite argument: a path when [`path_reason`] says so (it must
/// exist), else the name of a suite directory in `dirs` (the first of that
/// name). Errors say how the argument was read and where it was looked for.
pub fn locate(arg: &str, dirs: &[PathBuf]) -> Result<Located, String> {
    if let Some(why) = path_reason(arg) {
        let p = Path::new(arg);
        if !p.exists() {
            return Err(format!(
                "no suite at `{arg}`: read as a path ({why}), and nothing is there"
            ));
        }
        return Ok(Located {
            arg: arg.to_string(),
            path: p.to_path_buf(),
            found_in: None,
        });
    }
    let all = find_all(dirs);
    if let Some((_, p)) = all.iter().find(|(n, _)| n == arg) {
        return Ok(Located {
            arg: arg.to_string(),
            path: std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()),
            found_in: p.parent().map(Path::to_path_buf),
        });
    }
    let known: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    let here = if arg.is_empty() || !Path::new(arg).exists() {
        String::new()
    } else {
        format!(
            "; `{arg}` in the working directory is not used: write `./{arg}` to open it as a path"
        )
    };
    Err(format!(
        "no suite `{arg}`: read as a name (it has no `/` and does not end in `.yaml`), and not among the suites found ({}) in {}{here}",
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

/// The suite directory or document of a suite argument ([`locate`]).
pub fn resolve(arg: &str, dirs: &[PathBuf]) -> Result<PathBuf, String> {
    locate(arg, dirs).map(|l| l.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slash_or_a_document_ending_makes_a_path() {
        for arg in ["./x", "a/b", "/abs", "x.yaml", "x.yml", "x.golden"] {
            assert!(path_reason(arg).is_some(), "{arg}");
        }
        for arg in ["demo-mlp", "dinov2-vits14", "x.yaml.d", "yaml"] {
            assert_eq!(path_reason(arg), None, "{arg}");
        }
    }

    #[test]
    fn a_name_is_found_in_the_suite_directories_and_says_where() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        for dir in [&a, &b] {
            std::fs::create_dir_all(dir.join("s")).unwrap();
            std::fs::write(dir.join("s/suite.yaml"), "").unwrap();
        }
        std::fs::create_dir_all(b.join("t")).unwrap();
        std::fs::write(b.join("t/suite.yaml"), "").unwrap();
        let dirs = [a.clone(), b.clone()];
        let s = locate("s", &dirs).unwrap();
        assert_eq!(s.found_in.as_deref(), Some(a.as_path()));
        assert_eq!(s.files().0, a.join("s/suite.yaml").canonicalize().unwrap());
        assert!(s
            .reading()
            .starts_with("suite `s` (read as a name, found in "));
        let e = locate("u", &dirs).unwrap_err();
        assert!(
            e.starts_with("no suite `u`: read as a name (it has no `/` and does not end in `.yaml`), and not among the suites found (s, t) in "),
            "{e}"
        );
        // The same suite given as a path, and its golden file.
        let p = a.join("s");
        let as_path = locate(p.to_str().unwrap(), &[]).unwrap();
        assert_eq!(as_path.found_in, None);
        assert_eq!(
            as_path.reading(),
            format!("`{}` (read as a path: it contains `/`)", p.display())
        );
        let golden = a.join("s/suite.golden");
        let g = Located {
            arg: golden.display().to_string(),
            path: golden.clone(),
            found_in: None,
        };
        assert_eq!(g.files(), (a.join("s/suite.yaml"), golden));
        let e = locate(a.join("gone").to_str().unwrap(), &dirs).unwrap_err();
        assert!(
            e.ends_with("read as a path (it contains `/`), and nothing is there"),
            "{e}"
        );
        // Opening an empty document: the error says how the argument was read.
        let e = s.open().err().unwrap();
        assert!(e.starts_with("suite `s` (read as a name, found in "), "{e}");
    }
}
