//! `providers`: what providers are found, their devices and kernels.

use std::path::PathBuf;
use std::process::ExitCode;
use vips_sdk::{discover, search_path, Provider};

/// One provider as reported: loaded, or the reason it did not load.
fn describe(provider: &Provider) -> Result<serde_json::Value, vips_sdk::Error> {
    let info = provider.info();
    let devices = provider.devices()?;
    let kernels = provider.kernels()?;
    Ok(serde_json::json!({
        "name": info.name,
        "vendor": info.vendor,
        "version": info.version,
        "description": info.description,
        "abi_version": info.abi_version,
        "library": super::path_text(&info.library),
        "devices": devices.iter().map(|d| serde_json::json!({
            "index": d.index,
            "name": d.name,
            "driver_version": d.driver_version,
            "stable_id": d.stable_id,
            "memory_bytes": d.memory_bytes,
        })).collect::<Vec<_>>(),
        "kernels": kernels.iter().map(|k| format!("{}@{}", k.name, k.version)).collect::<Vec<_>>(),
    }))
}

fn print_table(v: &serde_json::Value) {
    println!(
        "{} {} ({}), ABI v{}  {}",
        v["name"].as_str().unwrap_or_default(),
        v["version"].as_str().unwrap_or_default(),
        v["vendor"].as_str().unwrap_or_default(),
        v["abi_version"],
        v["library"].as_str().unwrap_or_default()
    );
    let devices = v["devices"].as_array().map_or(0, Vec::len);
    if devices == 0 {
        // A provider says why it has no device in its description.
        println!("  {}", v["description"].as_str().unwrap_or_default());
    }
    for d in v["devices"].as_array().into_iter().flatten() {
        let memory = match d["memory_bytes"].as_u64().unwrap_or(0) {
            0 => "memory unknown".to_string(),
            b => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        };
        println!(
            "  device {}: {}  [{}]  driver {}  {memory}",
            d["index"],
            d["name"].as_str().unwrap_or_default(),
            d["stable_id"].as_str().unwrap_or_default(),
            d["driver_version"].as_str().unwrap_or_default(),
        );
    }
    let kernels: Vec<&str> = v["kernels"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k.as_str())
        .collect();
    println!("  {} kernels: {}", kernels.len(), kernels.join(" "));
}

pub fn run(extra: Vec<String>, json: bool) -> super::Outcome {
    let mut targets: Vec<(String, PathBuf)> = Vec::new();
    for d in discover() {
        // A file name that is not UTF-8 comes back lossily converted, a
        // path that does not exist: say so rather than fail to load it.
        if d.name.contains('\u{FFFD}') && !d.path.exists() {
            eprintln!(
                "warning: skipping {}: the file name is not UTF-8",
                d.path.display()
            );
            continue;
        }
        targets.push((d.name, d.path));
    }
    for p in extra {
        targets.push((p.clone(), PathBuf::from(p)));
    }
    if targets.is_empty() && !json {
        let dirs: Vec<String> = search_path()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        eprintln!("no providers found; searched: {}", dirs.join(", "));
    }
    if !json {
        // What a worker of `run` gets here, probed once with the CPU provider.
        vips_sdk::sandbox::tree::protect_runner();
        let sandbox = Provider::locate("cpu")
            .map_err(|e| e.to_string())
            .and_then(|lib| vips_sdk::isolation::probe_sandbox(&lib));
        match sandbox {
            Ok(facts) => println!("worker sandbox: {}", facts.summary()),
            Err(e) => println!("worker sandbox: could not be probed: {e}"),
        }
    }
    let mut failed = 0;
    let mut report = Vec::new();
    for (name, path) in targets {
        // One bad provider never blocks the others.
        let opened = if path.components().count() > 1 {
            Provider::open(&path)
        } else {
            Provider::open_by_name(&name)
        };
        match opened.and_then(|p| describe(&p)) {
            Ok(v) => {
                if !json {
                    print_table(&v);
                }
                report.push(v);
            }
            Err(e) => {
                failed += 1;
                if !json {
                    eprintln!("error: {e}");
                }
                report.push(
                    serde_json::json!({ "name": name, "library": super::path_text(&path), "error": e.to_string() }),
                );
            }
        }
    }
    if json {
        super::print_json(&report)?;
    }
    Ok(if failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
