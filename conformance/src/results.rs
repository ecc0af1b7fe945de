//! The results files of a run: `--output FILE` writes the JSON report there,
//! and beside it `FILE.csv` (deqp-runner style, one row per stage result,
//! appended and flushed as each stage finishes, so a run that dies leaves
//! what it finished; usable as a `--baseline`) and `FILE.junit.xml`. Every
//! file is created before the run starts, so an unwritable path fails at
//! once instead of losing the run.

use crate::html::view::View;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use vips_sdk::document::Document;
use vips_sdk::runner::{results, Mode, RunReport, StageResult};

/// A baseline file: a regular file under the size limit.
pub fn read_baseline(path: &Path) -> Result<String, String> {
    let bad = |e: String| format!("baseline {}: {e}", path.display());
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad("not a regular file".into()));
    }
    if meta.len() > results::MAX_BASELINE_BYTES {
        return Err(bad(format!(
            "{} bytes, more than the {}-byte limit",
            meta.len(),
            results::MAX_BASELINE_BYTES
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))
}

pub struct ResultFiles {
    json: Option<(PathBuf, File)>,
    /// `--html`: the page (docs/report.md), written at the end, with these
    /// remarks under the run's facts.
    html: Option<PathBuf>,
    remarks: Vec<String>,
    csv: Option<(PathBuf, csv::Writer<File>)>,
    junit: Option<(PathBuf, File)>,
    /// The files written, each with what it holds, to say once the table is out.
    written: Vec<(PathBuf, String)>,
}

fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

fn create(path: &Path) -> Result<File, String> {
    File::create(path).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

impl ResultFiles {
    pub fn create(output: Option<&Path>, html: Option<&Path>) -> Result<ResultFiles, String> {
        if let Some(path) = html {
            create(path)?;
        }
        let html = html.map(Path::to_path_buf);
        let Some(output) = output else {
            return Ok(ResultFiles {
                json: None,
                html,
                remarks: Vec::new(),
                csv: None,
                junit: None,
                written: Vec::new(),
            });
        };
        let (csv_path, junit_path) = (beside(output, ".csv"), beside(output, ".junit.xml"));
        let json = create(output)?;
        let mut csv = csv::Writer::from_writer(create(&csv_path)?);
        csv.write_record(results::CSV_COLUMNS)
            .and_then(|()| csv.flush().map_err(Into::into))
            .map_err(|e| format!("{}: cannot write: {e}", csv_path.display()))?;
        Ok(ResultFiles {
            json: Some((output.to_path_buf(), json)),
            html,
            remarks: Vec::new(),
            csv: Some((csv_path, csv)),
            junit: Some((junit_path.clone(), create(&junit_path)?)),
            written: Vec::new(),
        })
    }

    /// Appends a stage's row. A write error is reported once on stderr
    /// and the run goes on (the JSON at the end may still succeed).
    pub fn stage(&mut self, mode: Mode, result: &StageResult) {
        if let Some((path, w)) = &mut self.csv {
            let written = w
                .write_record(results::csv_record(mode, result))
                .and_then(|()| w.flush().map_err(Into::into));
            if let Err(e) = written {
                eprintln!("warning: {}: cannot write: {e}", path.display());
                self.csv = None;
            }
        }
    }

    /// Notes a file written (besides these), holding `what`.
    pub fn wrote(&mut self, path: &Path, what: String) {
        self.written.push((path.to_path_buf(), what));
    }

    /// A line per file written: `wrote PATH (what it holds)`.
    pub fn written(&self) -> Vec<String> {
        self.written
            .iter()
            .map(|(p, what)| format!("wrote {} ({what})", p.display()))
            .collect()
    }

    /// A line for the page, under the run's facts.
    pub fn remark(&mut self, text: String) {
        self.remarks.push(text);
    }

    /// Writes the JSON report, the JUnit file and the page.
    pub fn finish(&mut self, report: &RunReport, document: &Document) -> Result<(), String> {
        if let Some((path, file)) = &mut self.json {
            let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
            file.write_all(text.as_bytes())
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            self.written
                .push((path.clone(), "the results, JSON".into()));
        }
        if let Some((path, csv)) = &mut self.csv {
            csv.flush()
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            self.written
                .push((path.clone(), "a row per stage, CSV; a --baseline".into()));
        }
        if let Some((path, file)) = &mut self.junit {
            file.write_all(results::junit(report).as_bytes())
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            self.written.push((path.clone(), "JUnit XML".into()));
        }
        // The page last: the results are on disk whatever happens to it.
        if let Some(path) = &self.html {
            let mut view = View::of_results(report);
            view.with_document(Ok(document), &report.document_sha256);
            view.remarks.extend(self.remarks.iter().cloned());
            crate::html::write(path, &view, Some(document))?;
            self.written.push((path.clone(), crate::html::PAGE.into()));
        }
        Ok(())
    }
}
