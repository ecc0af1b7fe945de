//! VIPS documents: the human-readable YAML specification of a component
//! (docs/vips-format.md). Loading parses, checks every reference and name, and
//! reports problems as `file:line:column: field.path: message`.

mod check;
mod depth;
mod raw;

use crate::golden::{Distribution, Seeded};
use crate::limits::{
    read_regular_file, MAX_DOCUMENT_BYTES, MAX_GRID_TOKENS, MAX_SEEDED_TENSOR_BYTES,
    MAX_SEEDED_TOTAL_BYTES, MAX_YAML_DEPTH,
};
use crate::tier::{NanPolicy, Tier, TierParams};
use check::Validator;
use indexmap::IndexMap;
use marked_yaml::{LoaderOptions, Spanned};
use raw::*;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use vsdk_catalog::{AttrValue, Attrs, DType, Op, TensorSpec};

/// The schema version this SDK reads.
pub const SCHEMA_VERSION: u32 = 1;

/// A place in a document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

fn at<T>(s: &Spanned<T>) -> Location {
    s.span()
        .start()
        .map(|m| Location {
            line: m.line(),
            column: m.column(),
        })
        .unwrap_or_default()
}

/// A document that cannot be used: where, which field, and why; `also`
/// holds more problems of the same kind found in the same pass (every
/// unknown kernel of the document), each shown on a line of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentError {
    pub file: PathBuf,
    pub location: Location,
    pub path: String,
    pub message: String,
    pub also: Vec<DocumentError>,
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = if self.path.is_empty() { "" } else { ": " };
        write!(
            f,
            "{}:{}: {}{sep}{}",
            self.file.display(),
            self.location,
            self.path,
            self.message
        )?;
        for e in &self.also {
            write!(f, "\n{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DocumentError {}

#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    pub id: String,
    pub version: String,
    pub title: String,
    pub paper: Option<String>,
    pub notes: Vec<String>,
}

/// A component this document builds on, pinned by the hash of its document.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub component: String,
    pub version: String,
    pub sha256: [u8; 32],
    pub path: PathBuf,
    pub at: Location,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TensorSource {
    /// Stored in the golden file.
    Golden,
    /// Regenerated from a seed (weights, random inputs).
    Seeded(Seeded),
    /// A tensor of a weights file, under this key: the document's pinned
    /// file ([`Document::weights`]), else one given to `generate`.
    Weights(String),
    /// Written in the document, row-major (small constants).
    Values(Vec<f64>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TensorDecl {
    pub name: String,
    pub dtype: DType,
    /// None: taken from the golden file.
    pub shape: Option<Vec<usize>>,
    pub source: TensorSource,
    pub description: Option<String>,
    pub at: Location,
}

/// One operator application of a stage's graph.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphNode {
    pub op: Op,
    pub attrs: Attrs,
    pub inputs: Vec<String>,
    pub output: String,
    pub at: Location,
}

impl GraphNode {
    /// The node's attributes when floats are computed in `float`: a cast to
    /// a float type casts to that one instead (the graph says float32; the
    /// fp16 tier and the float64 reference compute in their own type).
    pub fn attrs_at(&self, float: Option<DType>) -> Attrs {
        let mut attrs = self.attrs.clone();
        if let (Op::Cast, Some(f)) = (self.op, float) {
            for (name, value) in &mut attrs.0 {
                if let AttrValue::Str(to) = value {
                    if name == "dtype" && DType::from_name(to).is_some_and(DType::is_float) {
                        *to = f.name().to_string();
                    }
                }
            }
        }
        attrs
    }
}

/// A property the actual output must have, whatever the golden values.
#[derive(Debug, Clone, PartialEq)]
pub enum Invariant {
    Finite { tensor: String },
    Range { tensor: String, min: f64, max: f64 },
    SumsToOne { tensor: String, axis: i64, tol: f64 },
    NonzeroFraction { tensor: String, min: f64, max: f64 },
}

impl Invariant {
    pub fn tensor(&self) -> &str {
        match self {
            Invariant::Finite { tensor }
            | Invariant::Range { tensor, .. }
            | Invariant::SumsToOne { tensor, .. }
            | Invariant::NonzeroFraction { tensor, .. } => tensor,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub name: String,
    pub algorithm: String,
    pub implementation: String,
    pub paper: Option<String>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub graph: Vec<GraphNode>,
    /// A fused kernel for the whole stage: (name, version).
    pub kernel: Option<(String, u32)>,
    /// The error model's parameters per tier: the SDK's defaults, overridden
    /// field by field by the document's `tolerances`, then by the stage's.
    pub tolerances: BTreeMap<Tier, TierParams>,
    pub mismatch_fraction: f64,
    pub nan: NanPolicy,
    /// `precision`: the tier whose float type the stage computes in at every
    /// float tier (host code in the model's own implementation, such as
    /// numpy preprocessing); None: the run's tier.
    pub precision: Option<Tier>,
    pub verify: Vec<Invariant>,
    pub notes: Vec<String>,
    /// The document's `layout.tokens`: how this stage's token sequences
    /// are drawn (error maps).
    pub token_grid: Option<TokenGrid>,
    pub at: Location,
}

impl Stage {
    /// The tier the stage computes at in a run at `tier`: its `precision`
    /// at every float tier, else `tier` (the exact tier keeps the document's
    /// dtypes either way).
    pub fn arithmetic(&self, tier: Tier) -> Tier {
        match self.precision {
            Some(p) if tier != Tier::Exact => p,
            _ => tier,
        }
    }

    /// The index of the last node that reads each tensor: what a walk over
    /// the graph may free after that node (unless it is a stage output).
    pub fn last_reads(&self) -> std::collections::HashMap<&str, usize> {
        let mut last = std::collections::HashMap::new();
        for (i, node) in self.graph.iter().enumerate() {
            for n in &node.inputs {
                last.insert(n.as_str(), i);
            }
        }
        last
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub path: PathBuf,
    /// SHA-256 of the file's bytes: what golden files and reports cite.
    pub sha256: [u8; 32],
    pub component: Component,
    pub uses: Vec<Use>,
    pub tensors: Vec<TensorDecl>,
    pub stages: Vec<Stage>,
    /// `golden.budget_bytes`: the golden file's size limit, past which the
    /// reference's stage outputs are stored anchored (docs/golden-format.md);
    /// `None`: every value stored in full.
    pub golden_budget: Option<u64>,
    /// `weights`: the file `weights` tensors are read from, pinned by its
    /// hash; the golden file then records only their hashes. `None`: they
    /// come from `generate --weights` and are stored in the golden file.
    pub weights: Option<WeightsPin>,
}

/// A weights file pinned by a document (`weights: { file, sha256 }`).
#[derive(Debug, Clone, PartialEq)]
pub struct WeightsPin {
    /// As the document writes it.
    pub file: String,
    /// Resolved against the document's directory.
    pub path: PathBuf,
    /// SHA-256 of the whole file.
    pub sha256: [u8; 32],
    pub at: Location,
}

impl TensorDecl {
    /// The document defines this tensor by itself ([`TensorDecl::intrinsic`]
    /// gives its values).
    pub fn intrinsic_source(&self) -> bool {
        self.shape.is_some()
            && matches!(
                self.source,
                TensorSource::Seeded(_) | TensorSource::Values(_)
            )
    }

    /// The tensor a document defines by itself: seeded or literal values.
    /// None for golden and weights tensors.
    pub fn intrinsic(&self) -> Option<Result<crate::HostTensor, String>> {
        let shape = self.shape.as_deref()?;
        match &self.source {
            TensorSource::Seeded(s) => Some(s.generate(self.dtype, shape)),
            TensorSource::Values(v) => Some(
                crate::HostTensor::from_vec(shape, v.clone())
                    .map(|t| t.cast(self.dtype))
                    .map_err(|e| e.to_string()),
            ),
            _ => None,
        }
    }
}

impl Document {
    pub fn open(path: impl AsRef<Path>) -> Result<Document, DocumentError> {
        let path = path.as_ref();
        let text = read_text(path).map_err(|message| DocumentError {
            file: path.to_path_buf(),
            location: Location::default(),
            path: String::new(),
            message,
            also: Vec::new(),
        })?;
        let doc = Document::parse(path, &text)?;
        doc.check_uses()?;
        Ok(doc)
    }

    /// Every component this document uses exists, is the pinned version, and
    /// hashes to the pinned SHA-256 (composition by id and hash).
    pub fn check_uses(&self) -> Result<(), DocumentError> {
        for (i, u) in self.uses.iter().enumerate() {
            let fail = |message: String| DocumentError {
                file: self.path.clone(),
                location: u.at.clone(),
                path: format!("uses[{i}]"),
                message,
                also: Vec::new(),
            };
            let text =
                read_text(&u.path).map_err(|e| fail(format!("{}: {e}", u.path.display())))?;
            let got: [u8; 32] = Sha256::digest(text.as_bytes()).into();
            if got != u.sha256 {
                return Err(fail(format!(
                    "{} has sha256 {}, this document pins {}",
                    u.path.display(),
                    hex::encode(got),
                    hex::encode(u.sha256)
                )));
            }
            let used = Document::parse(&u.path, &text)?;
            if (used.component.id.as_str(), used.component.version.as_str())
                != (u.component.as_str(), u.version.as_str())
            {
                return Err(fail(format!(
                    "{} is {} {}, not {} {}",
                    u.path.display(),
                    used.component.id,
                    used.component.version,
                    u.component,
                    u.version
                )));
            }
        }
        Ok(())
    }

    /// Parses `text`; `path` names the file in errors and anchors `uses` paths.
    pub fn parse(path: &Path, text: &str) -> Result<Document, DocumentError> {
        let fail = |location: Location, field: &str, message: String| DocumentError {
            file: path.to_path_buf(),
            location,
            path: field.to_string(),
            message,
            also: Vec::new(),
        };
        // The parser recurses and buffers: bound the input before it runs.
        if text.len() as u64 > MAX_DOCUMENT_BYTES {
            return Err(fail(
                Location::default(),
                "",
                format!(
                    "the document is {} bytes, larger than the {MAX_DOCUMENT_BYTES}-byte limit",
                    text.len()
                ),
            ));
        }
        depth::check(text, MAX_YAML_DEPTH)
            .map_err(|(location, message)| fail(location, "", message))?;
        let options = LoaderOptions::default().error_on_duplicate_keys(true);
        let node = marked_yaml::parse_yaml_with_options(0, text, options).map_err(|e| {
            let (location, message) = split_location(&e.to_string());
            fail(location, "", format!("YAML syntax error: {message}"))
        })?;
        let raw: RawDocument = marked_yaml::from_node(&node).map_err(|e| {
            let location = e
                .start_mark()
                .map(|m| Location {
                    line: m.line(),
                    column: m.column(),
                })
                .unwrap_or_default();
            fail(location, e.path().unwrap_or(""), (*e).to_string())
        })?;
        let mut v = Validator::new(&fail);
        let doc = v.document(path, raw)?;
        Ok(Document {
            sha256: Sha256::digest(text.as_bytes()).into(),
            ..doc
        })
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorDecl> {
        self.tensors.iter().find(|t| t.name == name)
    }

    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }
}

/// The text of a document file: a regular file of at most
/// [`MAX_DOCUMENT_BYTES`], in UTF-8.
fn read_text(path: &Path) -> Result<String, String> {
    let bytes = read_regular_file(path, MAX_DOCUMENT_BYTES)?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// "3:7: message" → (3:7, "message").
fn split_location(s: &str) -> (Location, String) {
    let mut parts = s.splitn(3, ':');
    match (
        parts.next().map(str::parse),
        parts.next().map(str::parse),
        parts.next(),
    ) {
        (Some(Ok(line)), Some(Ok(column)), Some(rest)) => {
            (Location { line, column }, rest.trim().to_string())
        }
        _ => (Location::default(), s.to_string()),
    }
}

/// Where a component's token sequences lie (the document's
/// `layout.tokens`): `prefix` tokens, then a grid in row-major order, its
/// first axis slowest (TRELLIS's 16³ latent flattened from `[D, H, W]`). A
/// token count alone cannot tell 16³ from 64².
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenGrid {
    pub prefix: usize,
    /// `[depth, height, width]`; depth 1 for a 2-D grid.
    pub grid: [usize; 3],
}

impl TokenGrid {
    pub fn tokens(&self) -> usize {
        self.prefix + self.grid.iter().product::<usize>()
    }
}
