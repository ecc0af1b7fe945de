//! A stage's kernels as plain data: what the runner asks a provider to run,
//! in process or through the worker protocol, and what comes back.

use crate::loader::Layout;
use serde::{Deserialize, Serialize};
use vips_data::golden::MAX_TENSOR_BYTES;
use vips_data::HostTensor;
use vsdk_catalog::{AttrValue, Attrs, DType, TensorSpec};

/// A tensor's dtype (catalog name) and shape, as it crosses the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    pub dtype: String,
    pub shape: Vec<u64>,
}

impl Spec {
    pub fn of(s: &TensorSpec) -> Spec {
        Spec {
            dtype: s.dtype.name().to_string(),
            shape: s.shape.iter().map(|&d| d as u64).collect(),
        }
    }

    /// The catalog spec, refused when the dtype is unknown or the size
    /// overflows or passes [`MAX_TENSOR_BYTES`].
    pub fn to_spec(&self) -> Result<TensorSpec, String> {
        let dtype = DType::ALL
            .into_iter()
            .find(|d| d.name() == self.dtype)
            .ok_or_else(|| format!("unknown dtype {:?}", self.dtype))?;
        let bytes = self
            .shape
            .iter()
            .try_fold(dtype.size_bytes() as u64, |acc, &d| acc.checked_mul(d))
            .filter(|&b| b <= MAX_TENSOR_BYTES)
            .ok_or_else(|| {
                format!(
                    "shape {:?} of {} passes the {MAX_TENSOR_BYTES}-byte tensor limit",
                    self.shape, self.dtype
                )
            })?;
        let shape = self
            .shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} overflows")))
            .collect::<Result<Vec<_>, _>>()?;
        usize::try_from(bytes).map_err(|_| "tensor size overflows".to_string())?;
        Ok(TensorSpec::new(dtype, &shape))
    }
}

/// A kernel attribute as it crosses the protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Attr {
    Int(i64),
    Float(f64),
    Str(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
}

/// One kernel call: named inputs to named outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub kernel: String,
    pub version: u32,
    pub attrs: Vec<(String, Attr)>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    /// The outputs of a kernel outside the catalog (a fused stage kernel);
    /// `None`: inferred by the catalog from the inputs.
    pub out_specs: Option<Vec<Spec>>,
}

impl Step {
    pub fn new(kernel: &str, version: u32, attrs: &Attrs) -> Step {
        Step {
            kernel: kernel.to_string(),
            version,
            attrs: attrs
                .0
                .iter()
                .map(|(n, v)| {
                    let v = match v {
                        AttrValue::Int(i) => Attr::Int(*i),
                        AttrValue::Float(f) => Attr::Float(*f),
                        AttrValue::Str(s) => Attr::Str(s.clone()),
                        AttrValue::Ints(v) => Attr::Ints(v.clone()),
                        AttrValue::Floats(v) => Attr::Floats(v.clone()),
                    };
                    (n.clone(), v)
                })
                .collect(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            out_specs: None,
        }
    }

    pub fn attrs(&self) -> Attrs {
        Attrs(
            self.attrs
                .iter()
                .map(|(n, v)| {
                    let v = match v {
                        Attr::Int(i) => AttrValue::Int(*i),
                        Attr::Float(f) => AttrValue::Float(*f),
                        Attr::Str(s) => AttrValue::Str(s.clone()),
                        Attr::Ints(v) => AttrValue::Ints(v.clone()),
                        Attr::Floats(v) => AttrValue::Floats(v.clone()),
                    };
                    (n.clone(), v)
                })
                .collect(),
        )
    }
}

/// The kernels of one stage in execution order. Every step output is
/// downloaded: a decomposed run judges each node by its own error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub steps: Vec<Step>,
    /// Inputs placed as views rather than compact (the kernel contract's
    /// strided, padded and broadcast tensors), by input name.
    pub layouts: Vec<(String, Layout)>,
    /// More than 1: the steps are independent (each reads only program
    /// inputs) and run on this many threads at once, overlapping.
    pub threads: u32,
}

/// Which guard region a kernel wrote into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Before,
    After,
}

/// Something a provider did that no correct kernel does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finding {
    /// A kernel wrote into the guard region around one of its tensors
    /// (`kernel` empty: found at the end of the run, by a later kernel):
    /// `first` and `last` are byte distances from the tensor's edge (0 is
    /// the first byte past the end, or the last byte before the start).
    OutOfBounds {
        kernel: String,
        tensor: String,
        side: Side,
        first: u64,
        last: u64,
    },
    /// A tensor's bytes changed after it was written (uploaded, or produced
    /// by its kernel): some later kernel wrote outside its own tensors.
    Corrupted { tensor: String, first_byte: u64 },
    /// Output elements still holding the poison written before the kernel.
    Unwritten {
        kernel: String,
        tensor: String,
        count: u64,
        first_index: u64,
    },
    /// The two runs of the program gave different bits.
    Nondeterministic {
        tensor: String,
        count: u64,
        first_index: u64,
    },
    /// The repeat (run 2 of 2, same inputs) is out of bounds where the first
    /// run was not: every execution is judged.
    RepeatOutOfBounds { tensor: String },
}

impl Finding {
    /// Found by the guards: a write outside the kernel's own tensors.
    pub fn scribbled(&self) -> bool {
        matches!(
            self,
            Finding::OutOfBounds { .. } | Finding::Corrupted { .. }
        )
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::OutOfBounds {
                kernel,
                tensor,
                side,
                first,
                last,
            } => {
                let (lo, hi) = (first.min(last), first.max(last));
                let who = if kernel.is_empty() {
                    "a later kernel".to_string()
                } else {
                    format!("`{kernel}`")
                };
                match side {
                    Side::After => write!(
                        f,
                        "{who} wrote past the end of `{tensor}` (bytes +{lo}..+{hi} after it)"
                    ),
                    Side::Before => write!(
                        f,
                        "{who} wrote before the start of `{tensor}` (bytes -{}..-{} before it)",
                        hi + 1,
                        lo + 1
                    ),
                }
            }
            Finding::Corrupted { tensor, first_byte } => write!(
                f,
                "`{tensor}` changed after it was written (first at byte {first_byte}): a kernel wrote outside its own tensors"
            ),
            Finding::Unwritten {
                kernel,
                tensor,
                count,
                first_index,
            } => write!(
                f,
                "`{kernel}` left {count} element(s) of `{tensor}` unwritten (first at flat index {first_index})"
            ),
            Finding::Nondeterministic {
                tensor,
                count,
                first_index,
            } => write!(
                f,
                "`{tensor}` differs between two runs on the same inputs in {count} element(s) (first at flat index {first_index})"
            ),
            Finding::RepeatOutOfBounds { tensor } => write!(
                f,
                "`{tensor}` is out of bounds in the repeat (run 2 of 2 on the same inputs)"
            ),

        }
    }
}

/// What a program produced: every step output of both runs, and what the
/// poison, the guards and the comparison of the runs revealed.
#[derive(Debug, Clone)]
pub struct Executed {
    pub values: Vec<(String, HostTensor)>,
    /// The second run on the same inputs: judged like the first (a driver
    /// right once and wrong on the repeat fails).
    pub repeat: Vec<(String, HostTensor)>,
    pub findings: Vec<Finding>,
    /// Seconds inside the provider's `execute` calls, both runs (as the
    /// process that ran them measured: the worker's word in isolated mode).
    pub kernel_seconds: f64,
    /// Added to the caller's timeout for kernels the worker process had not
    /// run yet (the isolation worker's first-call allowance; zero in
    /// process, where timeouts are not enforced).
    pub allowance: std::time::Duration,
}
