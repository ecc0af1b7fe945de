//! `inspect`: a document or a golden file, tensor by tensor.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use vips_sdk::document::{Document, TensorSource};
use vips_sdk::golden::{GoldenFile, Source};

fn human(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

pub fn run(file: &Path, json: bool) -> super::Outcome {
    if file.is_dir() {
        return suite(file, json);
    }
    // The magic decides; never read more than it (the file may be huge, or
    // not a regular file at all, which is refused before it is opened).
    let mut head = Vec::new();
    vips_sdk::limits::open_regular_file(file, u64::MAX)
        .and_then(|(f, _)| {
            f.take(vips_sdk::golden::MAGIC.len() as u64)
                .read_to_end(&mut head)
                .map_err(|e| format!("cannot read: {e}"))
        })
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let golden_name = file.extension().is_some_and(|e| e == "golden");
    if golden_name || head.starts_with(vips_sdk::golden::MAGIC) {
        return golden(file, json);
    }
    let doc = Document::open(file).map_err(|e| e.to_string())?;
    let rows: Vec<serde_json::Value> = doc
        .tensors
        .iter()
        .map(|t| {
            let source = match &t.source {
                TensorSource::Golden => "golden".to_string(),
                TensorSource::Seeded(s) => format!("seeded {:?} seed {}", s.distribution, s.seed),
                TensorSource::Weights(k) => match &doc.weights {
                    Some(w) => format!("weights `{k}` from {}", w.file),
                    None => format!("weights `{k}`"),
                },
                TensorSource::Values(v) => format!("{} literal values", v.len()),
            };
            serde_json::json!({
                "name": t.name, "dtype": t.dtype.name(), "shape": t.shape, "source": source,
                "description": t.description,
            })
        })
        .collect();
    if json {
        super::print_json(&serde_json::json!({
            "component": doc.component.id, "version": doc.component.version,
            "sha256": hex::encode(doc.sha256), "stages": doc.stages.iter().map(|s| &s.name).collect::<Vec<_>>(),
            "tensors": rows,
            "weights": doc.weights.as_ref().map(|w| serde_json::json!({
                "file": w.file, "path": w.path, "sha256": hex::encode(w.sha256),
            })),
        }))?;
    } else {
        println!(
            "{} {} (document sha256 {})",
            doc.component.id,
            doc.component.version,
            hex::encode(doc.sha256)
        );
        if let Some(w) = &doc.weights {
            println!(
                "weights: {} (pinned, sha256 {})",
                w.path.display(),
                hex::encode(w.sha256)
            );
        }
        println!(
            "{} stages: {}",
            doc.stages.len(),
            doc.stages
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for r in &rows {
            println!(
                "  {:<16} {:<9} {:<16} {}",
                r["name"].as_str().unwrap_or(""),
                r["dtype"].as_str().unwrap_or(""),
                r["shape"].to_string(),
                r["source"].as_str().unwrap_or("")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn golden(file: &Path, json: bool) -> super::Outcome {
    let g = GoldenFile::open(file).map_err(|e| e.to_string())?;
    let file_size = std::fs::metadata(file)
        .map(|m| m.len() as usize)
        .unwrap_or(0);
    let mut raw_equivalent = 0;
    let rows: Vec<serde_json::Value> = g
        .tensors
        .iter()
        .map(|t| {
            raw_equivalent += t.spec.size_bytes();
            let (storage, stored) = match &t.source {
                Source::Raw { len, .. } => ("raw".to_string(), *len),
                Source::Seeded(s) => (format!("seeded {:?} seed {}", s.distribution, s.seed), 0),
                // What the fingerprint says, without regenerating it.
                Source::Anchored(f) => (
                    format!(
                        "anchored (mean {:.4e}, rms {:.4e}, range [{:.4e}, {:.4e}])",
                        f.mean, f.rms, f.min, f.max
                    ),
                    0,
                ),
                Source::Pinned => (
                    "pinned (read from the weights file the document pins)".to_string(),
                    0,
                ),
            };
            serde_json::json!({
                "name": t.name, "dtype": t.spec.dtype.name(), "shape": t.spec.shape,
                "sha256": hex::encode(t.sha256), "storage": storage, "stored_bytes": stored,
                "bytes": t.spec.size_bytes(),
            })
        })
        .collect();
    if json {
        super::print_json(&serde_json::json!({
            "component": g.component, "version": g.component_version,
            "format_version": g.format_version,
            "document_sha256": hex::encode(g.document_sha256), "file_sha256": hex::encode(g.file_sha256),
            "file_bytes": file_size, "materialised_bytes": raw_equivalent, "tensors": rows,
        }))?;
    } else {
        println!(
            "{} {}: {} tensors, file {} (materialised: {})",
            g.component,
            g.component_version,
            rows.len(),
            human(file_size),
            human(raw_equivalent)
        );
        println!(
            "file sha256 {}  document sha256 {}",
            hex::encode(g.file_sha256),
            hex::encode(g.document_sha256)
        );
        for r in &rows {
            println!(
                "  {:<16} {:<9} {:<16} {:>10}  {}  {}",
                r["name"].as_str().unwrap_or(""),
                r["dtype"].as_str().unwrap_or(""),
                r["shape"].to_string(),
                human(r["bytes"].as_u64().unwrap_or(0) as usize),
                &r["sha256"].as_str().unwrap_or("")[..16],
                r["storage"].as_str().unwrap_or("")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A suite directory: per stage, how much its golden output differs from its
/// first input (`‖out − in‖ / ‖in‖`, where the shapes agree). A stage that
/// barely changes its input certifies little.
fn suite(dir: &Path, json: bool) -> super::Outcome {
    let suite = vips_sdk::suite::Suite::open(dir).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for stage in &suite.document.stages {
        let out = suite.tensor(&stage.outputs[0]).map_err(|e| e.to_string())?;
        let input = suite.tensor(&stage.inputs[0]).map_err(|e| e.to_string())?;
        let change = (input.spec.shape == out.spec.shape).then(|| {
            let (a, b) = (input.to_f64_vec(), out.to_f64_vec());
            let diff: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).powi(2))
                .sum::<f64>()
                .sqrt();
            let norm: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
            diff / norm.max(f64::MIN_POSITIVE)
        });
        let o = out.to_f64_vec();
        let rms = (o.iter().map(|x| x * x).sum::<f64>() / o.len().max(1) as f64).sqrt();
        // The activation scale: outlier channels and high-norm tokens show
        // here long before they show in the rms.
        let max_abs = o.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        rows.push(serde_json::json!({
            "stage": stage.name, "input": stage.inputs[0], "output": stage.outputs[0],
            "relative_change": change, "output_rms": rms, "output_max_abs": max_abs,
        }));
    }
    // Sparse coordinates: where the voxels are, not how large the numbers.
    let mut voxels = Vec::new();
    for t in &suite.document.tensors {
        if t.dtype == vips_sdk::DType::I32
            && t.shape
                .as_deref()
                .is_some_and(|s| s.len() == 2 && s[1] == 4)
        {
            let coords = suite.tensor(&t.name).map_err(|e| e.to_string())?;
            voxels.push(voxel_summary(&t.name, &coords.to_f64_vec()));
        }
    }
    if json {
        super::print_json(&serde_json::json!({
            "component": suite.document.component.id, "version": suite.document.component.version,
            "golden_sha256": hex::encode(suite.golden.file_sha256), "stages": rows,
            "sparse_voxels": voxels,
            "weights": suite.document.weights.as_ref().map(|w| serde_json::json!({
                "file": w.file, "path": w.path, "sha256": hex::encode(w.sha256),
            })),
        }))?;
    } else {
        println!(
            "{} {}: {} stages",
            suite.document.component.id,
            suite.document.component.version,
            rows.len()
        );
        if let Some(w) = &suite.document.weights {
            println!(
                "weights: {} (pinned, sha256 {})",
                w.path.display(),
                hex::encode(w.sha256)
            );
        }
        println!(
            "  {:<16} {:<20} {:>16} {:>12} {:>12}",
            "stage", "output", "rel. change", "output rms", "max |out|"
        );
        for r in &rows {
            let change = r["relative_change"]
                .as_f64()
                .map_or("(reshaped)".to_string(), |c| format!("{c:.4}"));
            println!(
                "  {:<16} {:<20} {change:>16} {:>12.4} {:>12.4}",
                r["stage"].as_str().unwrap_or(""),
                r["output"].as_str().unwrap_or(""),
                r["output_rms"].as_f64().unwrap_or(0.0),
                r["output_max_abs"].as_f64().unwrap_or(0.0)
            );
        }
        if !voxels.is_empty() {
            println!("sparse voxels (coords [N, 4]: b, x, y, z), active voxels per x slice:");
        }
        for v in &voxels {
            let e = &v["extent"];
            println!(
                "  {:<16} {} voxels, {} batch entr{}, in a {}×{}×{} box: {}",
                v["tensor"].as_str().unwrap_or(""),
                v["voxels"],
                v["batches"],
                if v["batches"] == 1 { "y" } else { "ies" },
                e[0],
                e[1],
                e[2],
                v["per_x_slice"]
                    .as_array()
                    .map(|c| c
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" "))
                    .unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How many voxels, batch entries, the box they fill, and the active voxels
/// in each x slice (at most 64 slices; wider boxes are binned).
fn voxel_summary(name: &str, coords: &[f64]) -> serde_json::Value {
    let rows: Vec<[i64; 4]> = coords
        .chunks_exact(4)
        .map(|c| [c[0] as i64, c[1] as i64, c[2] as i64, c[3] as i64])
        .collect();
    let extent = |a: usize| rows.iter().map(|r| r[a].max(0) + 1).max().unwrap_or(0);
    let batches = rows
        .iter()
        .map(|r| r[0])
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let x = extent(1).max(1) as usize;
    let bin = x.div_ceil(64);
    let mut per_slice = vec![0u64; x.div_ceil(bin)];
    for r in &rows {
        per_slice[r[1].max(0) as usize / bin] += 1;
    }
    serde_json::json!({
        "tensor": name, "voxels": rows.len(), "batches": batches,
        "extent": [extent(1), extent(2), extent(3)], "x_slices_per_bin": bin, "per_x_slice": per_slice,
    })
}
