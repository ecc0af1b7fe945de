//! The charts, drawn by plotters as SVG (text is left to the browser's
//! fonts, so nothing here needs a font library).

use plotters::prelude::*;
use vips_sdk::error_map::{Histogram, HIST_HI, HIST_LO, HIST_PER_DECADE};

const FONT: &str = "sans-serif";
const PASS: RGBColor = RGBColor(46, 125, 50);
const NEAR: RGBColor = RGBColor(239, 108, 0);
const FAIL: RGBColor = RGBColor(198, 40, 40);
const GREY: RGBColor = RGBColor(150, 150, 150);

type Result<T> = std::result::Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing a chart: {e}")
}

/// A log axis's label: a whole decade as `super::decade` writes it.
fn log_label(v: f64) -> String {
    let k = v.log10();
    if (k - k.round()).abs() < 1e-6 {
        super::decade(k.round() as i32)
    } else {
        format!("{v:.0e}")
    }
}

/// The margin chart's x axis: |e| from 1e-4 to 1e3, log scale.
const E_MIN: f64 = 1e-4;
const E_MAX: f64 = 1e3;

/// The colour of a largest `|e|`: green with headroom, orange within a
/// factor two of the bound, red past it.
pub fn margin_colour(max_e: f64) -> RGBColor {
    if max_e > 1.0 || max_e.is_nan() {
        FAIL
    } else if max_e >= 0.5 {
        NEAR
    } else {
        PASS
    }
}

/// One horizontal bar per stage: its largest `|e|` against the bound (1),
/// log scale. `None`: the stage produced nothing to judge (a grey stub).
pub fn margins(stages: &[(String, Option<f64>)]) -> Result<String> {
    let n = stages.len().max(1);
    let mut svg = String::new();
    {
        let height = 60 + 20 * n as u32;
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(150)
            .build_cartesian_2d((E_MIN..E_MAX).log_scale(), (0..n as i32).into_segmented())
            .map_err(err)?;
        // The first stage at the top.
        let name = |y: &SegmentValue<i32>| match y {
            SegmentValue::CenterOf(i) if (*i as usize) < stages.len() => {
                stages[stages.len() - 1 - *i as usize].0.clone()
            }
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("largest normalised error |e| (the bound is 1; log scale)")
            .x_label_formatter(&|x| log_label(*x))
            .y_labels(n)
            .y_label_formatter(&name)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()
            .map_err(err)?;
        let bars = stages.iter().enumerate().map(|(i, (_, e))| {
            let y = (n - 1 - i) as i32;
            let (x, colour) = match e {
                // An exact stage gets a stub, so it is not mistaken for a missing one.
                Some(e) if e.is_finite() => (e.clamp(E_MIN * 1.4, E_MAX), margin_colour(*e)),
                Some(_) => (E_MAX, FAIL),
                None => (E_MIN * 2.0, GREY),
            };
            let mut bar = Rectangle::new(
                [
                    (E_MIN, SegmentValue::Exact(y)),
                    (x, SegmentValue::Exact(y + 1)),
                ],
                colour.filled(),
            );
            bar.set_margin(4, 4, 0, 0);
            bar
        });
        chart.draw_series(bars).map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [
                    (1.0, SegmentValue::Exact(0)),
                    (1.0, SegmentValue::Exact(n as i32)),
                ],
                BLACK.stroke_width(2),
            ))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Chained mode: each stage's drift from its golden value, ‖a − g‖/‖g‖ (log).
pub fn drift(tier: &str, points: &[(String, f64)]) -> Result<String> {
    // Within 1e-30..1e30, so the axis always spans a few decades (a file
    // could hold any number).
    let points: Vec<(String, f64)> = points
        .iter()
        .map(|(n, v)| {
            (
                n.clone(),
                if v.is_finite() && *v > 0.0 {
                    v.clamp(1e-30, 1e30)
                } else {
                    *v
                },
            )
        })
        .collect();
    let finite: Vec<f64> = points
        .iter()
        .map(|p| p.1)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(0.0, f64::max);
    // Whole decades, so the log axis gets one label per decade.
    let (lo, hi) = if finite.is_empty() {
        (1e-9, 1.0)
    } else {
        let hi = 10f64.powf(hi.log10().ceil());
        (10f64.powf(lo.log10().floor()).min(hi / 10.0), hi)
    };
    let n = points.len().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 350)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{tier}: drift from the golden values along the pipeline"),
                (FONT, 15),
            )
            .margin(10)
            .x_label_area_size(100)
            .y_label_area_size(64)
            .build_cartesian_2d((0..n as i32).into_segmented(), (lo..hi).log_scale())
            .map_err(err)?;
        let name = |x: &SegmentValue<i32>| match x {
            SegmentValue::CenterOf(i) => points
                .get(*i as usize)
                .map_or(String::new(), |p| p.0.clone()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .y_desc("‖actual − golden‖ / ‖golden‖")
            .y_label_formatter(&|y| log_label(*y))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .x_labels(n)
            .x_label_formatter(&name)
            .x_label_style(
                (FONT, 11)
                    .into_font()
                    .transform(FontTransform::Rotate90)
                    .color(&BLACK),
            )
            .y_labels(((hi / lo).log10().round() as usize).clamp(1, 60) + 1)
            .draw()
            .map_err(err)?;
        let series: Vec<(SegmentValue<i32>, f64)> = points
            .iter()
            .enumerate()
            .filter(|(_, p)| p.1.is_finite() && p.1 > 0.0)
            .map(|(i, p)| (SegmentValue::CenterOf(i as i32), p.1))
            .collect();
        chart
            .draw_series(LineSeries::new(series.clone(), BLUE.stroke_width(2)))
            .map_err(err)?;
        chart
            .draw_series(series.into_iter().map(|p| Circle::new(p, 3, BLUE.filled())))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Counts of `|e|` per bin, log scales; the bound (`|e|` = 1) as a red line.
pub fn histogram(h: &Histogram) -> Result<String> {
    let top = h.bins.iter().copied().max().unwrap_or(0).max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (420, 240)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d(
                f64::from(HIST_LO)..f64::from(HIST_HI),
                (0.5..top * 2.0).log_scale(),
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("|e| (log10; the bound is 0)")
            .y_desc("elements")
            .x_labels((HIST_HI - HIST_LO + 1) as usize / 2)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 12))
            .draw()
            .map_err(err)?;
        let width = 1.0 / f64::from(HIST_PER_DECADE);
        chart
            .draw_series(
                h.bins
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(i, &c)| {
                        let x0 = f64::from(HIST_LO) + i as f64 * width;
                        let colour = if x0 >= 0.0 { FAIL } else { BLUE };
                        Rectangle::new([(x0, 0.5), (x0 + width * 0.9, c as f64)], colour.filled())
                    }),
            )
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, 0.5), (0.0, top * 2.0)],
                FAIL.stroke_width(2),
            ))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
