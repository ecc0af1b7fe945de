//! The document as written: serde types mirroring the YAML, with spans on
//! every value a later check may need to point at.

use indexmap::IndexMap;
use marked_yaml::Spanned;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDocument {
    pub vips: Spanned<u32>,
    pub component: RawComponent,
    #[serde(default)]
    pub uses: Vec<RawUse>,
    pub tensors: IndexMap<Spanned<String>, RawTensor>,
    #[serde(default)]
    pub tolerances: IndexMap<Spanned<String>, RawTolerance>,
    pub stages: Vec<RawStage>,
    #[serde(default)]
    pub golden: Option<RawGolden>,
    #[serde(default)]
    pub layout: Option<RawLayout>,
    #[serde(default)]
    pub weights: Option<RawWeights>,
}

/// The weights file `weights` tensors are read from, pinned by its hash.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWeights {
    /// A `.safetensors` file, relative to the document.
    pub file: Spanned<String>,
    /// SHA-256 of the whole file, 64 hex digits.
    pub sha256: Spanned<String>,
}

/// How the component's tensors are drawn in reports (docs/vips-format.md).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLayout {
    pub tokens: RawTokenGrid,
}

/// Token sequences of `prefix` + the grid's product tokens lie on the grid.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTokenGrid {
    #[serde(default)]
    pub prefix: Option<Spanned<u64>>,
    pub grid: Vec<Spanned<u64>>,
}

/// How the golden file stores the document's tensors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGolden {
    /// The golden file's size limit: reference-computed stage outputs past
    /// it are stored as hashes (anchored) and regenerated.
    pub budget_bytes: Spanned<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawComponent {
    pub id: Spanned<String>,
    pub version: Spanned<String>,
    pub title: String,
    #[serde(default)]
    pub paper: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUse {
    pub component: Spanned<String>,
    pub version: Spanned<String>,
    pub sha256: Spanned<String>,
    /// Where the component document lives, relative to this one.
    pub path: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTensor {
    pub dtype: Spanned<String>,
    #[serde(default)]
    pub shape: Option<Vec<u64>>,
    pub source: Spanned<RawSource>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RawSource {
    Golden,
    Seeded(RawSeeded),
    /// A tensor of a weights file given at run time, by key.
    Weights(String),
    /// The values themselves, row-major (constants such as normalisation means).
    Values(Vec<f64>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSeeded {
    pub seed: u64,
    #[serde(default)]
    pub uniform: Option<[f64; 2]>,
    #[serde(default)]
    pub normal: Option<[f64; 2]>,
    /// The procedural uint8 test image (docs/golden-format.md).
    #[serde(default)]
    pub test_image: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTolerance {
    /// Confidence factor of the accumulation bounds (docs/error-model.md).
    #[serde(default)]
    pub lambda: Option<f64>,
    /// Largest allowed bias z-score of the errors.
    #[serde(default)]
    pub bias_z: Option<f64>,
    /// Largest allowed |mean t| / rms t.
    #[serde(default)]
    pub bias_ratio: Option<f64>,
    /// Largest allowed rms of the error in units of a correct implementation's.
    #[serde(default)]
    pub rms_factor: Option<f64>,
    /// Integer outputs: allowed difference in units.
    #[serde(default)]
    pub lsb: Option<u64>,
    /// Rasterizers: the sub-pixel bits a vertex may be snapped to.
    #[serde(default)]
    pub subpixel_bits: Option<u32>,
    /// Chained mode: the component's outputs against the golden values.
    #[serde(default)]
    pub end_to_end: Option<RawEndToEnd>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndToEnd {
    #[serde(default)]
    pub rel_l2: Option<f64>,
    #[serde(default)]
    pub cosine: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStage {
    pub stage: Spanned<String>,
    pub algorithm: String,
    #[serde(rename = "impl")]
    pub implementation: String,
    #[serde(default)]
    pub paper: Option<String>,
    pub inputs: Vec<Spanned<String>>,
    pub outputs: Vec<Spanned<String>>,
    pub graph: Vec<RawNode>,
    /// A fused kernel for the whole stage, `name@version`.
    #[serde(default)]
    pub kernel: Option<Spanned<String>>,
    #[serde(default)]
    pub tolerances: IndexMap<Spanned<String>, RawTolerance>,
    #[serde(default)]
    pub mismatch_fraction: Option<Spanned<f64>>,
    #[serde(default)]
    pub nan: Option<Spanned<String>>,
    /// The float type the stage computes in at every float tier.
    #[serde(default)]
    pub precision: Option<Spanned<String>>,
    #[serde(default)]
    pub verify: Vec<Spanned<RawInvariant>>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub op: Spanned<String>,
    pub inputs: Vec<Spanned<String>>,
    pub outputs: Vec<Spanned<String>>,
    #[serde(default)]
    pub attrs: IndexMap<String, Spanned<RawAttr>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawInvariant {
    Finite(String),
    Range {
        tensor: String,
        min: f64,
        max: f64,
    },
    SumsToOne {
        tensor: String,
        axis: i64,
        tol: f64,
    },
    NonzeroFraction {
        tensor: String,
        min: f64,
        #[serde(default = "one")]
        max: f64,
    },
}

fn one() -> f64 {
    1.0
}

/// An attribute value; YAML scalars arrive as text and are typed here:
/// an integer, else a number, else a string; a list of integers, else of numbers.
#[derive(Debug, Clone, PartialEq)]
pub enum RawAttr {
    Int(i64),
    Float(f64),
    Str(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
}

fn scalar(s: &str) -> RawAttr {
    if let Ok(i) = s.parse::<i64>() {
        RawAttr::Int(i)
    } else if let Ok(f) = s.parse::<f64>() {
        RawAttr::Float(f)
    } else {
        RawAttr::Str(s.to_string())
    }
}

impl<'de> Deserialize<'de> for RawAttr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawAttr;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, a string, or a list of numbers")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawAttr, E> {
                Ok(scalar(s))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawAttr, E> {
                Ok(RawAttr::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawAttr, E> {
                i64::try_from(v)
                    .map(RawAttr::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawAttr, E> {
                Ok(RawAttr::Float(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawAttr, A::Error> {
                let mut items = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    items.push(s);
                }
                if let Ok(ints) = items.iter().map(|s| s.parse::<i64>()).collect() {
                    return Ok(RawAttr::Ints(ints));
                }
                items
                    .iter()
                    .map(|s| {
                        s.parse::<f64>().map_err(|_| {
                            de::Error::custom(format!("list element `{s}` is not a number"))
                        })
                    })
                    .collect::<Result<_, _>>()
                    .map(RawAttr::Floats)
            }
        }
        d.deserialize_any(V)
    }
}
