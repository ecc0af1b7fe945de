//! One module per subcommand. Each returns the exit code, or a message for
//! exit code 2.

pub mod check;
pub mod export;
pub mod generate;
pub mod inspect;
pub mod keygen;
pub mod list;
pub mod merge;
pub mod pack;
pub mod pack_replay;
pub mod providers;
pub mod report;
pub mod run;
pub mod verify;

use std::path::Path;
use std::process::ExitCode;

pub type Outcome = Result<ExitCode, String>;

/// `path` as text for a report: lossily (U+FFFD for each invalid byte) when
/// it is not UTF-8, which JSON cannot carry, with a warning on stderr.
pub fn path_text(path: &Path) -> String {
    match path.to_str() {
        Some(s) => s.to_string(),
        None => {
            let lossy = path.to_string_lossy().into_owned();
            eprintln!(
                "warning: {lossy}: the path is not UTF-8; shown with U+FFFD for its invalid bytes"
            );
            lossy
        }
    }
}

/// A `--tier` argument.
pub fn parse_tier(name: &str) -> Result<vips_sdk::compare::Tier, String> {
    vips_sdk::compare::Tier::parse(name).map_err(|e| format!("--{e}"))
}

/// A line for people: on stdout, or on stderr where stdout is JSON.
pub fn say(line: &str, json: bool) {
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// Writes `value` as pretty JSON to stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    println!("{text}");
    Ok(())
}
