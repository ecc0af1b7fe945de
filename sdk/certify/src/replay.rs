//! Replay packs (docs/golden-format.md, "Replay packs"): what a device needs
//! to judge its own outputs on a suite's stages in isolated mode, with no
//! host in the loop: the inputs at the tier, and per output element the
//! float64 reference, the error model's bound and σ, and the verdict's rules.
//! In isolated mode these depend only on the golden inputs, so the host
//! computes them once; `vips_verify_core` reads them on the device.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use vips_data::document::Stage;
use vips_data::HostTensor;
use vips_execution::Device;
use vips_runner::run::to_tier;
use vips_runner::suite::Suite;
use vips_verdict::compare::Tier;
use vips_verdict::error_model;
use vips_verify_core::format::{self as vrp, Frame, Name, Shape};
use vsdk_catalog::{DType, Op};

/// What went wrong writing a pack.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{0}")]
    Suite(#[from] vips_runner::suite::SuiteError),
    #[error("stage `{stage}`: {reason}")]
    Stage { stage: String, reason: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct PackSummary {
    pub stages: Vec<String>,
    /// Judged outputs: (stage, tensor, elements).
    pub outputs: Vec<(String, String, u64)>,
    pub bytes: u64,
    pub frames: u32,
    pub max_frame: u32,
}

pub fn dtype(d: DType) -> vrp::DType {
    match d {
        DType::F16 => vrp::DType::F16,
        DType::BF16 => vrp::DType::BF16,
        DType::F32 => vrp::DType::F32,
        DType::F64 => vrp::DType::F64,
        DType::U8 => vrp::DType::U8,
        DType::I32 => vrp::DType::I32,
        DType::I64 => vrp::DType::I64,
    }
}

fn name(text: &str, what: &str) -> Result<Name, String> {
    Name::try_from(text).map_err(|_| {
        format!(
            "{what} `{text}` is longer than a replay pack's {} bytes",
            vrp::NAME
        )
    })
}

fn shape(dims: &[usize]) -> Result<Shape, String> {
    Shape::from_slice(&dims.iter().map(|&d| d as u64).collect::<Vec<_>>())
        .map_err(|_| format!("rank {} exceeds a replay pack's {}", dims.len(), vrp::RANK))
}

/// Frames with their length prefixes, hashed as they go.
struct Writer<W: Write> {
    out: W,
    sha: Sha256,
    frames: u32,
    bytes: u64,
    max_frame: u32,
}

/// The largest frame this writer produces: a chunk of data and the fields
/// around it (names, a shape, varints).
const MAX_FRAME: u32 = (vrp::CHUNK_BYTES + 160) as u32;

impl<W: Write> Writer<W> {
    fn new(mut out: W) -> std::io::Result<Self> {
        let header = vrp::Header {
            version: vrp::VERSION,
            max_frame: MAX_FRAME,
        }
        .encode();
        out.write_all(&header)?;
        let mut sha = Sha256::new();
        sha.update(header);
        Ok(Writer {
            out,
            sha,
            frames: 0,
            bytes: header.len() as u64,
            max_frame: 0,
        })
    }

    fn frame(&mut self, f: &Frame) -> std::io::Result<()> {
        let payload = postcard::to_stdvec(f).map_err(std::io::Error::other)?;
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&l| l <= MAX_FRAME)
            .ok_or_else(|| std::io::Error::other("a replay frame past the declared limit"))?;
        let prefix = len.to_le_bytes();
        self.out.write_all(&prefix)?;
        self.out.write_all(&payload)?;
        if !matches!(f, Frame::End { .. }) {
            self.sha.update(prefix);
            self.sha.update(&payload);
            self.frames += 1;
        }
        self.bytes += 4 + u64::from(len);
        self.max_frame = self.max_frame.max(len);
        Ok(())
    }

    fn end(mut self) -> std::io::Result<(u64, u32, u32)> {
        let sha256 = self.sha.clone().finalize().into();
        let frames = self.frames;
        self.frame(&Frame::End { frames, sha256 })?;
        self.out.flush()?;
        Ok((self.bytes, self.frames, self.max_frame))
    }
}

/// Writes the pack of `stages` of `suite` at `tier` (empty: every stage)
/// to `out`, the references computed on `reference`.
pub fn write(
    suite: &Suite,
    tier: Tier,
    stages: &[String],
    reference: &Device,
    out: impl Write,
) -> Result<PackSummary, ReplayError> {
    let doc = &suite.document;
    let selected: Vec<&Stage> = if stages.is_empty() {
        doc.stages.iter().collect()
    } else {
        stages
            .iter()
            .map(|s| {
                doc.stages
                    .iter()
                    .find(|st| &st.name == s)
                    .ok_or_else(|| ReplayError::Stage {
                        stage: s.clone(),
                        reason: format!(
                            "not a stage of `{}` (its stages: {})",
                            doc.component.id,
                            doc.stages
                                .iter()
                                .map(|s| s.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })
            })
            .collect::<Result<_, _>>()?
    };
    let err = |stage: &Stage, reason: String| ReplayError::Stage {
        stage: stage.name.clone(),
        reason,
    };
    let mut w = Writer::new(out)?;
    let head = |text: &str, what: &str| {
        name(text, what).map_err(|r| ReplayError::Stage {
            stage: String::new(),
            reason: r,
        })
    };
    w.frame(&Frame::Pack {
        suite: head(&doc.component.id, "the suite id")?,
        suite_version: head(&doc.component.version, "the suite version")?,
        tier: head(tier.name(), "the tier")?,
        document_sha256: doc.sha256,
        golden_sha256: suite.golden.file_sha256,
        stages: selected.len() as u32,
    })?;
    let mut summary = PackSummary {
        stages: Vec::new(),
        outputs: Vec::new(),
        bytes: 0,
        frames: 0,
        max_frame: 0,
    };
    for stage in selected {
        if let Some(n) = stage.graph.iter().find(|n| n.op == Op::Rasterize) {
            return Err(err(
                stage,
                format!(
                    "its output `{}` is a rasterizer's: the verdict on triangle ids depends on the device's own output (docs/error-model.md, 6a), which a pack cannot hold in advance",
                    n.output
                ),
            ));
        }
        let t = stage.arithmetic(tier);
        let params = &stage.tolerances[&t];
        let mut inputs: HashMap<String, HostTensor> = HashMap::new();
        for n in &stage.inputs {
            inputs.insert(n.clone(), to_tier(suite.tensor(n)?.as_ref(), t));
        }
        let sr = error_model::stage_reference(stage, t, &inputs, reference, params)
            .map_err(|e| err(stage, format!("the reference could not run: {e}")))?;
        w.frame(&Frame::Stage {
            name: name(&stage.name, "the stage").map_err(|r| err(stage, r))?,
            inputs: stage.inputs.len() as u32,
            outputs: stage.outputs.len() as u32,
        })?;
        for n in &stage.inputs {
            let x = &inputs[n];
            if x.bytes.is_empty() {
                return Err(err(
                    stage,
                    format!("input `{n}` is empty: a pack holds no empty tensors"),
                ));
            }
            let tensor = name(n, "the input").map_err(|r| err(stage, r))?;
            let dims = shape(&x.spec.shape).map_err(|r| err(stage, r))?;
            for (k, bytes) in x.bytes.chunks(vrp::CHUNK_BYTES).enumerate() {
                w.frame(&Frame::Input {
                    name: tensor.clone(),
                    dtype: dtype(x.spec.dtype),
                    shape: dims.clone(),
                    offset: (k * vrp::CHUNK_BYTES) as u64,
                    bytes,
                })?;
            }
        }
        for o in &stage.outputs {
            let spec = vips_data::tier::tier_spec(
                suite
                    .spec(o)
                    .ok_or_else(|| err(stage, format!("output `{o}` has no declaration")))?,
                t,
            );
            let n = spec.numel() as u64;
            if n == 0 {
                return Err(err(
                    stage,
                    format!("output `{o}` is empty: a pack holds no empty tensors"),
                ));
            }
            let rules =
                error_model::Rules::of_stage(stage, params, sr.summed.contains(o)).for_elements(n);
            if rules.allowed_over >= vips_verify_core::tally::TOP as u64 {
                return Err(err(
                    stage,
                    format!(
                        "`{o}` allows {} elements past their bound; a device keeps the {} largest errors",
                        rules.allowed_over,
                        vips_verify_core::tally::TOP - 1
                    ),
                ));
            }
            w.frame(&Frame::Output {
                name: name(o, "the output").map_err(|r| err(stage, r))?,
                dtype: dtype(spec.dtype),
                shape: shape(&spec.shape).map_err(|r| err(stage, r))?,
                rules,
            })?;
            let (values, bound, sigma) = (sr.values[o].f64_values(), &sr.bounds[o], &sr.sigmas[o]);
            let mut chunk = Vec::with_capacity(vrp::CHUNK_BYTES);
            for first in (0..values.len()).step_by(vrp::CHUNK_ELEMENTS) {
                let end = (first + vrp::CHUNK_ELEMENTS).min(values.len());
                chunk.clear();
                for i in first..end {
                    for v in [values[i], bound[i], sigma[i]] {
                        chunk.extend_from_slice(&v.to_le_bytes());
                    }
                }
                w.frame(&Frame::Expected {
                    first: first as u64,
                    values: &chunk,
                })?;
            }
            summary.outputs.push((stage.name.clone(), o.clone(), n));
        }
        summary.stages.push(stage.name.clone());
    }
    let (bytes, frames, max_frame) = w.end()?;
    summary.bytes = bytes;
    summary.frames = frames;
    summary.max_frame = max_frame;
    Ok(summary)
}
