//! The page of a model certified from its parts (`verify --model --html`):
//! the model's verdict at its tier, then every component it uses (the
//! model's own stages first) with its standing: certified by which report,
//! not certified and why, or missing and what came closest.

use super::{esc, STYLE};
use std::fmt::Write;
use vips_sdk::certify::compose::{ModelCheck, Standing};
use vips_sdk::certify::Statement;
use vips_sdk::document::Document;

/// One report given to `verify`: its file, and its statement once verified.
pub struct GivenReport<'a> {
    pub file: String,
    pub statement: Option<&'a Statement>,
    /// What `describe` says of it (the CLI's lines).
    pub lines: Vec<String>,
}

pub fn render(check: &ModelCheck, model: &Document, reports: &[GivenReport]) -> String {
    let mut h = String::new();
    let verdict = if check.certified {
        "CERTIFIED"
    } else {
        "NOT CERTIFIED"
    };
    let title = if model.component.title.is_empty() {
        &check.model
    } else {
        &model.component.title
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{verdict} — {}</title><style>{STYLE}</style></head><body>\n\
         <header id=\"verdict\" class=\"{}\"><h1>VIPS model: {}</h1>\
         <div class=\"verdict\">{verdict}</div><ul><li>{} at {}: every component it uses, and its own \
         stages, certified for one provider binary{}</li></ul></header><main>\n",
        esc(title),
        if check.certified { "pass" } else { "fail" },
        esc(title),
        esc(&check.model),
        check.tier.name(),
        check
            .provider_sha256
            .as_ref()
            .map(|p| format!(" (SHA-256 {})", esc(p)))
            .unwrap_or_default()
    );
    h.push_str("<section id=\"components\"><h2>Components</h2><table class=\"stages\"><tr><th>component</th><th>version</th><th>document SHA-256</th><th>standing</th><th>report</th></tr>");
    for (i, (req, standing)) in check.components.iter().enumerate() {
        let (class, label, detail) = match standing {
            Standing::Certified { report } => (
                "pass",
                "CERTIFIED",
                reports.get(*report).map_or(String::new(), |r| esc(&r.file)),
            ),
            Standing::NotCertified { report, reasons } => (
                "fail",
                "NOT CERTIFIED",
                format!(
                    "{}: {}",
                    esc(reports.get(*report).map_or("", |r| r.file.as_str())),
                    esc(&reasons.join("; "))
                ),
            ),
            Standing::Missing { hint } => (
                "fail",
                "MISSING",
                format!(
                    "no verified report{}",
                    hint.as_ref()
                        .map(|h| format!(": {}", esc(h)))
                        .unwrap_or_default()
                ),
            ),
        };
        let own = if i == 0 {
            " (the model's own stages)"
        } else {
            ""
        };
        let _ = write!(
            h,
            "<tr><td><code>{}</code>{own}</td><td>{}</td><td><code>{}</code></td>\
             <td><span class=\"pill {class}\">{label}</span></td><td>{detail}</td></tr>",
            esc(&req.component),
            esc(&req.version),
            esc(&req.document_sha256[..16.min(req.document_sha256.len())]),
        );
    }
    h.push_str("</table></section>\n");
    if !model.stages.is_empty() {
        h.push_str("<section id=\"own-stages\"><h2>The model's own stages</h2><ul>");
        for s in &model.stages {
            let _ = write!(
                h,
                "<li><code>{}</code>: {}</li>",
                esc(&s.name),
                esc(&s.algorithm)
            );
        }
        h.push_str("</ul></section>\n");
    }
    h.push_str("<section id=\"reports\"><h2>Reports given</h2>");
    for r in reports {
        let _ = write!(h, "<h4><code>{}</code></h4>", esc(&r.file));
        if r.statement.is_none() {
            h.push_str("<p class=\"remark\">does not verify: ");
        } else {
            h.push_str("<p class=\"remark\">signature verified<br>");
        }
        for l in &r.lines {
            let _ = write!(h, "{}<br>", esc(l));
        }
        h.push_str("</p>");
    }
    h.push_str("</section></main></body></html>\n");
    h
}
