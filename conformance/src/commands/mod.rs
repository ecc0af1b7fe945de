//! One module per subcommand. Each returns the exit code, or a message for
//! exit code 2.

pub mod check;
pub mod export;
pub mod generate;
pub mod inspect;
pub mod list;
pub mod pack;
pub mod providers;
pub mod run;

use std::process::ExitCode;

pub type Outcome = Result<ExitCode, String>;

/// Writes `value` as pretty JSON to stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), String> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    println!("{text}");
    Ok(())
}
