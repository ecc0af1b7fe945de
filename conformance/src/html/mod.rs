//! The HTML report (docs/report.md): one self-contained page, no scripts
//! and nothing fetched (charts are inline SVG, heatmaps inline PNG, fonts
//! the reader's own), readable offline and attachable to a bug report.

mod charts;
mod heatmap;
pub mod model;
pub mod view;

use std::fmt::Write;
use view::{NodeView, OutputView, Signature, StageView, TierView, View};
use vips_sdk::document::Stage;
use vips_sdk::error_map::{ErrorMap, Panel, PanelKind, E_CAP};
use vips_sdk::runner::results::markup_text as esc;
use vips_sdk::runner::Status;

/// A name for an `id` attribute.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `|e|` in words: "3.2e-3"; "∞" past a zero bound or where a NaN or Inf
/// differs (and "≥ 1e9" for what maps cap there).
fn e_text(e: f64) -> String {
    if e.is_infinite() {
        "∞ (a zero bound, or a NaN or Inf that differs)".into()
    } else if e.is_nan() || e >= f64::from(E_CAP) {
        "≥ 1e9".into()
    } else if e == 0.0 {
        "0".into()
    } else {
        format!("{e:.2e}")
    }
}

/// A power of ten as a label: `1`, `10`, else `1e-3`, `1e2`.
pub fn decade(k: i32) -> String {
    match k {
        0 => "1".into(),
        1 => "10".into(),
        _ => format!("1e{k}"),
    }
}

fn status_class(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::ExpectedFail | Status::NotSupported => "warn",
        _ => "fail",
    }
}

const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f7f9}
main{max-width:1180px;margin:0 auto;padding:0 20px 40px}
header{padding:22px 20px;color:#fff}
header.pass{background:#2e7d32} header.fail{background:#c62828} header.warn{background:#ef6c00}
header h1{margin:0 0 6px;font-size:22px;font-weight:600}
.verdict{font-size:30px;font-weight:700;letter-spacing:.5px}
header ul{margin:8px 0 0;padding-left:20px}
section,article,details.stage-detail{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 18px;margin:18px 0}
details.stage-detail:not([open]){padding:8px 18px;margin:8px 0}
h2{font-size:19px;margin:4px 0 12px} h3{font-size:17px;margin:4px 0 10px} h4{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;font-size:13px} td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#555;font-weight:600} table.stages td{border-top:1px solid #eee}
table.stages td:not(:last-child){white-space:nowrap}
details.coverage>summary{cursor:pointer}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.pill.pass{background:#2e7d32} .pill.fail{background:#c62828} .pill.warn{background:#ef6c00}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
.remark{color:#555;font-size:13px}
.coverage{color:#8a5a00;font-size:13px}
.notes{background:#fff8e1;border-left:4px solid #f9a825;padding:8px 14px;margin:10px 0}
.notes h4{margin:2px 0 6px} .notes li{margin:3px 0}
ol.graph{font-size:13px;padding-left:26px} ol.graph li{margin:2px 0;padding:1px 4px}
ol.graph li.diverged{background:#ffebee;border-left:4px solid #c62828;font-weight:600}
ol.graph li.over{color:#c62828}
.panels{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}
.pair{display:flex;flex-wrap:nowrap;gap:18px;align-items:flex-start;max-width:100%;overflow-x:auto}
.pair figure{flex:none}
figure{margin:0} figcaption{font-size:12px;color:#444;max-width:300px;margin-top:4px}
figure img{image-rendering:pixelated;image-rendering:crisp-edges;border:1px solid #ccc;display:block}
.plot{display:grid;column-gap:3px;row-gap:1px;align-items:start}
.rt,.ct{position:relative;font-size:10px;line-height:10px;color:#555}
.rt span{position:absolute;right:0;transform:translateY(-50%)}
.ct{height:11px} .ct span{position:absolute;top:1px;transform:translateX(-50%)}
.legend{font-size:11px;color:#444;width:300px} .legend img{width:300px;height:12px}
.legend .ticks{position:relative;height:14px}
.legend .ticks span{position:absolute;transform:translateX(-50%);white-space:nowrap}
.legend .ticks span.first{transform:none} .legend .ticks span.last{transform:translateX(-100%)}
details.stage-detail>summary{cursor:pointer;list-style-position:outside;margin-left:16px}
details.stage-detail>summary h3{display:inline;margin:0}
details.stage-detail[open]>summary{margin-bottom:10px}
svg{max-width:100%;height:auto}
"#;

/// What an HTML page is, where a command says it wrote one.
pub const PAGE: &str = "the HTML report, docs/report.md";

/// Writes `view`'s page to `path`.
pub fn write(
    path: &std::path::Path,
    view: &View,
    doc: Option<&vips_sdk::document::Document>,
) -> Result<(), String> {
    let page = render(view, doc.map(|d| d.stages.as_slice()))?;
    std::fs::write(path, page).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// The page for `view`; `stages` are the document's (for notes and graphs).
pub fn render(view: &View, stages: Option<&[Stage]>) -> Result<String, String> {
    let mut h = String::new();
    let title = view.title.clone().unwrap_or_else(|| view.component.clone());
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} — {}</title><style>{STYLE}</style></head><body>\n",
        esc(&view.verdict),
        esc(&title)
    );
    let class = view.standing.class();
    let _ = write!(
        h,
        "<header id=\"verdict\" class=\"{class}\"><h1>VIPS conformance: {}</h1>\
         <div class=\"verdict\">{}</div>",
        esc(&title),
        esc(&view.verdict)
    );
    if !view.reasons.is_empty() {
        h.push_str("<ul>");
        for r in &view.reasons {
            let _ = write!(h, "<li>{}</li>", esc(r));
        }
        h.push_str("</ul>");
    }
    h.push_str("</header><main>\n");
    facts(&mut h, view);
    for tier in &view.tiers {
        summary(&mut h, tier)?;
    }
    let detailed: Vec<(&TierView, &StageView)> = view
        .tiers
        .iter()
        .flat_map(|t| t.stages.iter().map(move |s| (t, s)))
        .filter(|(_, s)| s.status.is_failure() || s.has_maps())
        .collect();
    if !detailed.is_empty() {
        let strip = heatmap::legend()?;
        let failing = detailed
            .iter()
            .filter(|(_, s)| s.status.is_failure())
            .count();
        let _ = writeln!(
            h,
            "<section id=\"details\"><h2>Where the error lives</h2>\
            <p class=\"remark\">Failing and nearly failing stages (largest |e| at least half the bound). \
            Each output's normalised error |e| = |actual − reference| / bound, on the tensor's own layout \
            (docs/report.md): black is exact, brighter is larger, on a log scale of the output's own \
            (whole decades, from the one above its largest |e| down four) with the bound marked.</p>\
            <p class=\"remark\" id=\"folded\">{} stage(s) below, {failing} failing: {}; \
            click a stage's title to open or fold it.</p></section>",
            detailed.len(),
            if failing > 0 {
                "the first failing one is open, the others folded"
            } else {
                "all folded"
            }
        );
        let first = detailed.iter().position(|(_, s)| s.status.is_failure());
        for (i, (tier, stage)) in detailed.into_iter().enumerate() {
            let doc = stages.and_then(|s| s.iter().find(|d| d.name == stage.name));
            detail(&mut h, tier, stage, doc, &strip, first == Some(i))?;
        }
    }
    let _ = writeln!(
        h,
        "<p class=\"remark\">Made by vips-conformance {} (docs/report.md).</p></main></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    Ok(h)
}

fn facts(h: &mut String, view: &View) {
    h.push_str("<section id=\"facts\"><h2>The run</h2><table>");
    for (k, v) in &view.facts {
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    let signature = match &view.signature {
        Signature::Results => {
            "not a report: a run's results are not signed (run --report writes a signed one)"
                .to_string()
        }
        Signature::Unsigned => "UNSIGNED".into(),
        Signature::NotChecked(ids) => format!(
            "signed by {}, not checked (give the public key with --pubkey)",
            ids.join(", ")
        ),
        Signature::Verified(id) => format!("signed by {id}, and the signature verifies"),
        Signature::Invalid(why) => format!("DOES NOT VERIFY: {why}"),
    };
    let _ = write!(
        h,
        "<tr><th>signature</th><td id=\"signature\">{}</td></tr></table>",
        esc(&signature)
    );
    for r in &view.remarks {
        let _ = write!(h, "<p class=\"remark\">{}</p>", esc(r));
    }
    h.push_str("</section>\n");
}

fn summary(h: &mut String, t: &TierView) -> Result<(), String> {
    let tier = t.tier.name();
    let _ = write!(
        h,
        "<section class=\"tier\" id=\"tier-{tier}\"><h2>Tier {tier}, {} mode</h2>",
        t.mode.name()
    );
    let bars: Vec<(String, Option<f64>)> = t
        .stages
        .iter()
        .map(|s| (s.name.clone(), s.max_e()))
        .collect();
    h.push_str(&charts::margins(&bars)?);
    h.push_str(
        "<table class=\"stages\"><tr><th>stage</th><th>status</th><th>execution</th>\
         <th>seconds</th><th>largest |e|</th><th>margin</th><th>rms t</th><th>least tolerance</th>\
         <th>drift (rel L2)</th><th>why</th></tr>",
    );
    for s in &t.stages {
        let max_e = s.max_e();
        let drift = s
            .outputs
            .iter()
            .filter_map(|o| o.drift_rel_l2)
            .reduce(f64::max);
        let name = if s.status.is_failure() || s.has_maps() {
            format!(
                "<a href=\"#stage-{tier}-{}\">{}</a>",
                slug(&s.name),
                esc(&s.name)
            )
        } else {
            esc(&s.name)
        };
        let rms_t = s.outputs.iter().filter_map(|o| o.rms_t).reduce(f64::max);
        let mut why = esc(s.reason.as_deref().unwrap_or(""));
        for n in &s.notes {
            let _ = write!(why, "<br><span class=\"remark\">note: {}</span>", esc(n));
        }
        // Coverage warnings folded under a count: they repeat stage after
        // stage, and are not failures.
        if !s.coverage.is_empty() {
            let _ = write!(
                why,
                "<details class=\"coverage\"><summary>coverage: {} warning(s), what the data cannot show</summary>",
                s.coverage.len()
            );
            for c in &s.coverage {
                let _ = write!(why, "<div>coverage: {}</div>", esc(c));
            }
            why.push_str("</details>");
        }
        let _ = write!(
            h,
            "<tr><td>{name}</td><td><span class=\"pill {}\">{}</span></td><td>{}</td>\
             <td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            status_class(s.status),
            s.status.label(),
            s.execution.map_or("-", vips_sdk::runner::Execution::name),
            s.seconds,
            max_e.map_or("-".into(), e_text),
            max_e.map_or("-".into(), |e| if e <= 1.0 {
                format!("{:.0}%", (1.0 - e) * 100.0)
            } else {
                "over".into()
            }),
            rms_t.map_or("-".into(), e_text),
            s.tolerance.map_or("-".into(), |t| t.to_string()),
            drift.map_or("-".into(), |d| format!("{d:.2e}")),
            why,
        );
    }
    h.push_str("</table>");
    if t.mode == vips_sdk::runner::Mode::Chained {
        let points: Vec<(String, f64)> = t
            .stages
            .iter()
            .filter_map(|s| {
                s.outputs
                    .iter()
                    .filter_map(|o| o.drift_rel_l2)
                    .reduce(f64::max)
                    .map(|d| (s.name.clone(), d))
            })
            .collect();
        if !points.is_empty() {
            let _ = write!(h, "<div class=\"drift\" id=\"drift-{tier}\">");
            h.push_str(&charts::drift(tier, &points)?);
            h.push_str("</div>");
        }
        if let Some(first) = &t.first_divergent {
            let _ = write!(
                h,
                "<p>First stage whose own error is out of bounds: <b>{}</b></p>",
                esc(first)
            );
        }
    }
    if !t.end_to_end.is_empty() {
        h.push_str("<h4>End to end, against the golden values</h4><table><tr><th>tensor</th><th>rel L2</th><th>cosine</th><th>required</th><th></th></tr>");
        for (tensor, rel, cos, limit, passed) in &t.end_to_end {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{rel:.3e}</td><td>{cos:.7}</td><td>{}</td><td><span class=\"pill {}\">{}</span></td></tr>",
                esc(tensor),
                esc(limit),
                if *passed { "pass" } else { "fail" },
                if *passed { "PASS" } else { "FAIL" }
            );
        }
        h.push_str("</table>");
    }
    if !t.differential.is_empty() {
        h.push_str("<h4>Differential round (fresh inputs): stages that did not pass</h4><ul>");
        for (stage, status, why) in &t.differential {
            let _ = write!(
                h,
                "<li><b>{}</b> {}: {}</li>",
                esc(stage),
                status.label(),
                esc(why)
            );
        }
        h.push_str("</ul>");
    }
    if let Some((passed, run)) = t.contract {
        let _ = write!(
            h,
            "<h4>Kernel contract: {passed} of {run} cases passed</h4><p>Each kernel the component needs, called with transposed, padded and stride-0 inputs, odd and large sizes and extreme values, then all cases at once from several threads (<code>concurrency</code>).</p>"
        );
        if !t.contract_failures.is_empty() {
            h.push_str("<ul>");
            for (case, status, why) in &t.contract_failures {
                let _ = write!(
                    h,
                    "<li><b>{}</b> {}: {}</li>",
                    esc(case),
                    status.label(),
                    esc(why)
                );
            }
            h.push_str("</ul>");
        }
    }
    h.push_str("</section>\n");
    Ok(())
}

/// An output's `|e|` scale: the strip, its ends, and where the bound is.
fn legend(h: &mut String, scale: heatmap::Scale, strip: &str) -> Result<(), String> {
    let bound = if scale.hi < 0.0 {
        "the bound (|e| = 1) is above the scale".to_string()
    } else if scale.lo > 0.0 {
        "the bound (|e| = 1) is below the scale: every coloured cell is past it".to_string()
    } else {
        format!(
            "▲ the bound (|e| = 1) at {:.0}% of the scale",
            scale.position(1.0) * 100.0
        )
    };
    // A label at each whole decade (the ends are decades).
    let decades: Vec<i32> = scale.decades().collect();
    let mut ticks = String::new();
    for (i, &k) in decades.iter().enumerate() {
        let class = if i == 0 {
            " class=\"first\""
        } else if i + 1 == decades.len() {
            " class=\"last\""
        } else {
            ""
        };
        let _ = write!(
            ticks,
            "<span{class} style=\"left:{:.1}%\">{}</span>",
            scale.position(10f32.powi(k)) * 100.0,
            decade(k)
        );
    }
    let _ = write!(
        h,
        "<figure class=\"legend\"><img alt=\"colour scale of |e|\" src=\"{}\">\
         <div class=\"ticks\">{ticks}</div><div>{}</div></figure>",
        strip,
        esc(&bound)
    );
    Ok(())
}

/// A stage's section, folded unless `open`: its title and a line (the
/// largest |e|, the first operator out of its own bound) show either way.
fn detail(
    h: &mut String,
    t: &TierView,
    s: &StageView,
    doc: Option<&Stage>,
    strip: &str,
    open: bool,
) -> Result<(), String> {
    let tier = t.tier.name();
    let class = if s.status.is_failure() {
        "failing-stage"
    } else {
        "near-stage"
    };
    let mut line = s
        .max_e()
        .map_or(String::new(), |e| format!("largest |e| {}", e_text(e)));
    if let Some(d) = &s.drill_down {
        let _ = write!(
            line,
            "{}first operator out of its own bound: node {} {}",
            if line.is_empty() { "" } else { "; " },
            d.node,
            d.op
        );
    }
    let _ = write!(
        h,
        "<details class=\"stage-detail {class}\" id=\"stage-{tier}-{}\"{}>\
         <summary><h3>{} at {tier}: <span class=\"pill {}\">{}</span></h3> \
         <span class=\"remark\">{}</span></summary>",
        slug(&s.name),
        if open { " open" } else { "" },
        esc(&s.name),
        status_class(s.status),
        s.status.label(),
        esc(&line)
    );
    if let Some(r) = &s.reason {
        let _ = write!(h, "<p><b>Why:</b> {}</p>", esc(r));
    }
    for f in &s.findings {
        let _ = write!(h, "<p class=\"remark\">finding: {}</p>", esc(f));
    }
    if let Some(d) = doc {
        let _ = write!(
            h,
            "<p class=\"remark\"><b>Computes:</b> {} <br><b>Reference:</b> {}</p>",
            esc(&d.algorithm),
            esc(&d.implementation)
        );
        if !d.notes.is_empty() {
            h.push_str("<div class=\"notes\"><h4>Notes from the document: what others already paid for</h4><ul>");
            for n in &d.notes {
                let _ = write!(h, "<li>{}</li>", esc(n));
            }
            h.push_str("</ul></div>");
        }
    }
    graph(h, s, doc);
    for o in &s.outputs {
        if let Some(map) = &o.map {
            output(
                h,
                &format!("output <code>{}</code>", esc(&o.tensor)),
                o_stats(o),
                map,
                strip,
            )?;
        }
    }
    if let Some((d, map)) = s
        .drill_down
        .as_ref()
        .and_then(|d| Some((d, d.map.as_ref()?)))
    {
        output(
            h,
            &format!(
                "first divergent operator: node {} <code>{}</code>, its output <code>{}</code>",
                d.node,
                esc(&d.op),
                esc(&d.output)
            ),
            format!(
                "largest |e| {} (fed the provider's own inputs)",
                e_text(d.max_e)
            ),
            map,
            strip,
        )?;
    }
    h.push_str("</details>\n");
    Ok(())
}

fn o_stats(o: &OutputView) -> String {
    let pixels = o
        .pixels
        .as_ref()
        .map_or(String::new(), |px| format!("; {}", esc(&px.to_string())));
    format!(
        "largest |e| {}; {} of {} elements past their bound{pixels}",
        e_text(o.max_e),
        o.over_bound,
        o.elements
    )
}

/// The stage's operator graph, every node with its own error where known,
/// the first divergent one marked.
fn graph(h: &mut String, s: &StageView, doc: Option<&Stage>) {
    let known = |i: usize| -> Option<&NodeView> {
        s.nodes
            .iter()
            .chain(s.drill_down.iter())
            .find(|n| n.node == i)
    };
    let first = s.drill_down.as_ref().map(|d| d.node);
    h.push_str("<div class=\"drill-down\"><h4>Drill-down: the operator graph</h4>");
    match doc {
        Some(d) => {
            h.push_str("<ol class=\"graph\" start=\"0\">");
            for (i, node) in d.graph.iter().enumerate() {
                let n = known(i);
                let class = if first == Some(i) {
                    "diverged"
                } else if n.is_some_and(|n| !n.passed) {
                    "over"
                } else {
                    ""
                };
                let _ = write!(
                    h,
                    "<li class=\"{class}\"><code>{}@{}</code>({}) → <code>{}</code>",
                    node.op.name(),
                    node.op.version(),
                    esc(&node.inputs.join(", ")),
                    esc(&node.output)
                );
                if let Some(n) = n {
                    let _ = write!(h, " · largest |e| {}", e_text(n.max_e));
                }
                if first == Some(i) {
                    h.push_str(" ← the first operator out of its own bound");
                }
                h.push_str("</li>");
            }
            h.push_str("</ol>");
        }
        None => match &s.drill_down {
            Some(d) => {
                let _ = write!(
                    h,
                    "<p>First operator out of its own bound: node {} <code>{}</code> → <code>{}</code>, largest |e| {}</p>",
                    d.node,
                    esc(&d.op),
                    esc(&d.output),
                    e_text(d.max_e)
                );
            }
            None => h.push_str("<p class=\"remark\">No operator was singled out.</p>"),
        },
    }
    if let Some(n) = &s.drill_down_note {
        let _ = write!(h, "<p class=\"remark\">{}</p>", esc(n));
    }
    h.push_str("</div>");
}

/// Display size of a panel: square cells, at most 320 pixels down and 512
/// across; a short wide panel (heads × tokens) at least 48 pixels tall; a
/// single row a 24-pixel strip.
fn size(p: &Panel) -> (usize, usize) {
    let (rows, cols) = (p.rows.max(1), p.cols.max(1));
    if rows == 1 {
        return (cols * (384 / cols).clamp(1, 32), 24);
    }
    let cell = (320 / rows).min(512 / cols).clamp(1, 32);
    let tall = 48usize.div_ceil(rows).clamp(cell, 32);
    (cols * cell, rows * tall)
}

fn figure(h: &mut String, p: &Panel, src: &str, caption: &str) {
    let (w, ht) = size(p);
    let pooled = if p.row_step > 1 || p.col_step > 1 {
        format!("; each cell covers {}×{} elements", p.row_step, p.col_step)
    } else {
        String::new()
    };
    let axes = match (p.row_axis.as_str(), p.col_axis.as_str()) {
        ("", c) => format!("→ {c}"),
        (r, c) => format!("↓ {r}, → {c}"),
    };
    let kind = match p.kind {
        PanelKind::Error => "heatmap",
        PanelKind::Expected | PanelKind::Actual => "values",
    };
    // Index ticks: rows down the left (none for a strip), columns below.
    let rows = if p.rows > 1 {
        ticks(p.rows, p.row_step, ht, 14, "top")
    } else {
        (String::new(), 0)
    };
    let (cols, _) = ticks(p.cols, p.col_step, w, 36, "left");
    let _ = write!(
        h,
        "<figure class=\"{kind}\"><div class=\"plot\" style=\"grid-template-columns:{}ch {w}px\">\
         <div class=\"rt\" style=\"height:{ht}px\">{}</div>\
         <img alt=\"{}\" src=\"{src}\" style=\"width:{w}px;height:{ht}px\">\
         <div></div><div class=\"ct\">{cols}</div></div>\
         <figcaption>{} <br>{}{pooled}</figcaption></figure>",
        rows.1,
        rows.0,
        esc(&p.title),
        esc(caption),
        esc(&axes)
    );
}

/// Index labels along one axis of a panel: `cells` cells of `step` indices
/// each over `pixels`, at least `gap` pixels apart, at 1, 2 or 5 times a
/// power of ten; `side` the CSS property placing them. Gives the spans and
/// the widest label's length.
fn ticks(cells: usize, step: usize, pixels: usize, gap: usize, side: &str) -> (String, usize) {
    let (cells, step) = (cells.max(1), step.max(1));
    let extent = (cells * step) as f64;
    let per_index = pixels as f64 / extent;
    let mut every = 1usize;
    'find: for scale in (0..12).map(|k| 10usize.pow(k)) {
        for m in [1, 2, 5] {
            every = m * scale;
            if every >= step && every as f64 * per_index >= gap as f64 {
                break 'find;
            }
        }
    }
    let last = (cells - 1) * step;
    let mut out = String::new();
    let mut widest = 0;
    for i in (0..=last).step_by(every) {
        // The middle of index i's place.
        let at = (i as f64 + 0.5) / extent * 100.0;
        let label = i.to_string();
        widest = widest.max(label.len());
        let _ = write!(out, "<span style=\"{side}:{at:.2}%\">{label}</span>");
    }
    (out, widest)
}

/// One mapped tensor; `strip` is the colour scale's image (made once a page).
fn output(
    h: &mut String,
    title: &str,
    stats: String,
    map: &ErrorMap,
    strip: &str,
) -> Result<(), String> {
    let _ = write!(
        h,
        "<div class=\"output\"><h4>{title}</h4><p class=\"remark\">{} — shape {:?}, read as {}</p><div class=\"panels\">",
        esc(&stats),
        map.shape,
        esc(&map.layout.describe())
    );
    let scale = heatmap::Scale::of(map.panels.iter().filter(|p| p.kind == PanelKind::Error));
    legend(h, scale, strip)?;
    // (A tensor without elements has empty panels: nothing to draw.)
    let mut panels = map
        .panels
        .iter()
        .filter(|p| p.rows > 0 && p.cols > 0)
        .peekable();
    while let Some(p) = panels.next() {
        match p.kind {
            PanelKind::Error => figure(h, p, &heatmap::errors(p, scale)?, &p.title),
            PanelKind::Expected => {
                // Expected, actual and their difference side by side, never
                // wrapped apart (scrolled across where too wide).
                h.push_str("<div class=\"pair\">");
                let actual = panels.next_if(|a| a.kind == PanelKind::Actual);
                let range = heatmap::range(std::iter::once(p).chain(actual));
                figure(h, p, &heatmap::values(p, range)?, &p.title);
                if let Some(a) = actual {
                    figure(h, a, &heatmap::values(a, range)?, &a.title);
                    let (src, top) = heatmap::difference(p, a)?;
                    figure(
                        h,
                        p,
                        &src,
                        &format!("|actual − expected| (white: {top:.3e})"),
                    );
                }
                h.push_str("</div>");
            }
            PanelKind::Actual => figure(h, p, &heatmap::values(p, heatmap::range([p]))?, &p.title),
        }
    }
    h.push_str("</div><div class=\"panels\"><figure class=\"histogram\">");
    h.push_str(&charts::histogram(&map.histogram)?);
    let hist = &map.histogram;
    let _ = write!(
        h,
        "<figcaption>How many elements at each |e|; besides: {} exact, {} below 1e-8, {} above 1e4, {} non-finite.</figcaption></figure>",
        hist.zero, hist.below, hist.above, hist.non_finite
    );
    h.push_str("<figure class=\"worst\"><table><tr><th>index</th><th>actual</th><th>reference</th><th>bound</th><th>|e|</th></tr>");
    for w in &map.worst {
        let el = &w.element;
        let _ = write!(
            h,
            "<tr><td>{:?}</td><td>{:.6e}</td><td>{:.6e}</td><td>{:.2e}</td><td>{}</td></tr>",
            el.index,
            el.actual,
            el.reference,
            el.bound,
            e_text(w.e)
        );
    }
    h.push_str("</table><figcaption>The worst elements.</figcaption></figure></div></div>");
    Ok(())
}
