//! `list`: the suites found, or one suite's stages.

use crate::suites;
use std::process::ExitCode;
use vips_sdk::document::Document;
use vips_sdk::suite::suite_files;

pub fn run(suite: Option<String>, json: bool) -> super::Outcome {
    let Some(arg) = suite else {
        let all = suites::all();
        let mut rows = Vec::new();
        for (name, dir) in &all {
            let doc = Document::open(suite_files(dir).0).map_err(|e| e.to_string())?;
            rows.push(serde_json::json!({
                "name": name, "path": super::path_text(dir), "component": doc.component.id,
                "version": doc.component.version, "title": doc.component.title, "stages": doc.stages.len(),
            }));
        }
        if json {
            super::print_json(&rows)?;
        } else if rows.is_empty() {
            println!(
                "no suites found in {}",
                suites::suite_dirs()
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else {
            for r in &rows {
                println!(
                    "{:<20} {} {:<8} {:>3} stages  {}",
                    r["name"].as_str().unwrap_or(""),
                    r["component"].as_str().unwrap_or(""),
                    r["version"].as_str().unwrap_or(""),
                    r["stages"],
                    r["title"].as_str().unwrap_or("")
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    };
    let doc = suites::locate(&arg)?.document()?;
    let stages: Vec<serde_json::Value> = doc
        .stages
        .iter()
        .map(|s| {
            serde_json::json!({
                "stage": s.name, "algorithm": s.algorithm, "impl": s.implementation,
                "inputs": s.inputs, "outputs": s.outputs,
                "ops": s.graph.iter().map(|n| n.op.name()).collect::<Vec<_>>(),
                "fused_kernel": s.kernel.as_ref().map(|(k, v)| format!("{k}@{v}")),
                "notes": s.notes.len(),
            })
        })
        .collect();
    if json {
        super::print_json(&stages)?;
    } else {
        println!(
            "{} {}: {}",
            doc.component.id, doc.component.version, doc.component.title
        );
        for (i, s) in doc.stages.iter().enumerate() {
            let ops: Vec<&str> = s.graph.iter().map(|n| n.op.name()).collect();
            println!("  {:>2}. {:<24} {}", i + 1, s.name, ops.join(" → "));
        }
    }
    Ok(ExitCode::SUCCESS)
}
