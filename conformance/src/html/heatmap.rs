//! Error-map panels as inline PNG images: a cell per pixel, scaled up by the
//! browser without smoothing. The `|e|` of one output's panels share a log
//! scale from its largest `|e|` down four decades (so a pattern shows even
//! where every element is far past its bound), with the bound marked on the
//! scale; values and images share a linear scale with their pair.

use base64::Engine;
use plotters::style::colors::colormaps::{ColorMap, ViridisRGB};
use vips_sdk::error_map::Panel;

/// Decades of `|e|` an output's scale spans, at most.
const DECADES: f32 = 4.0;

/// `log10(v)` for a power of ten, exact where f32 is not (10⁻³ gives
/// -2.9999998): so a decade is not taken for the one above or below.
fn decade_log(v: f32) -> f32 {
    let l = v.log10();
    if (l - l.round()).abs() < 1e-4 {
        l.round()
    } else {
        l
    }
}

type Rgb = [u8; 3];

fn viridis(t: f32) -> Rgb {
    let c = ViridisRGB.get_color_normalized(t.clamp(0.0, 1.0), 0.0, 1.0);
    [c.0, c.1, c.2]
}

/// Black through purple and red to pale yellow (after matplotlib's inferno):
/// errors read as heat, and apart from the values' viridis.
fn heat(t: f32) -> Rgb {
    const STOPS: [Rgb; 8] = [
        [0, 0, 4],
        [40, 11, 84],
        [101, 21, 110],
        [159, 42, 99],
        [212, 72, 66],
        [245, 125, 21],
        [250, 193, 39],
        [252, 255, 164],
    ];
    let x = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f32;
    let (i, f) = ((x as usize).min(STOPS.len() - 2), x.fract());
    let f = if x as usize >= STOPS.len() - 1 {
        1.0
    } else {
        f
    };
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    [0, 1, 2].map(|k| (f32::from(a[k]) + (f32::from(b[k]) - f32::from(a[k])) * f) as u8)
}

/// An output's `|e|` scale: log10 of its ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub lo: f32,
    pub hi: f32,
}

impl Scale {
    /// Whole decades, so that every label is one: from the decade at or
    /// above the largest `|e|` of `panels` down [`DECADES`] (or to the
    /// decade at or below the smallest nonzero `|e|`, if closer).
    pub fn of<'a>(panels: impl IntoIterator<Item = &'a Panel>) -> Scale {
        let (min, max) = panels
            .into_iter()
            .flat_map(|p| p.values.iter().copied())
            .filter(|&v| v > 0.0 && v.is_finite())
            .fold((f32::INFINITY, 0.0f32), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        if max <= 0.0 {
            return Scale { lo: -1.0, hi: 0.0 };
        }
        let hi = decade_log(max).ceil();
        let lo = decade_log(min).floor().max(hi - DECADES);
        Scale {
            lo: lo.min(hi - 1.0),
            hi,
        }
    }

    /// The whole decades on the scale, low to high (log10).
    pub fn decades(&self) -> impl Iterator<Item = i32> {
        (self.lo.round() as i32)..=(self.hi.round() as i32)
    }

    /// Where `|e|` falls on the scale, 0 to 1.
    pub fn position(&self, e: f32) -> f32 {
        ((e.log10() - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }

    pub fn colour(&self, e: f32) -> Rgb {
        if e.is_nan() || e <= 0.0 {
            return [0, 0, 0];
        }
        heat(self.position(e))
    }
}

fn png(width: usize, height: usize, rgb: &[u8]) -> Result<String, String> {
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, width as u32, height as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().map_err(|e| format!("PNG: {e}"))?;
        w.write_image_data(rgb).map_err(|e| format!("PNG: {e}"))?;
    }
    Ok(format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

/// An error panel as a PNG data URI, on `scale`.
pub fn errors(p: &Panel, scale: Scale) -> Result<String, String> {
    let rgb: Vec<u8> = p.values.iter().flat_map(|&e| scale.colour(e)).collect();
    png(p.cols, p.rows, &rgb)
}

/// The finite range of some panels' values (a pair drawn on one scale).
pub fn range<'a>(panels: impl IntoIterator<Item = &'a Panel>) -> (f32, f32) {
    let (lo, hi) = panels
        .into_iter()
        .flat_map(|p| p.values.iter().copied())
        .filter(|v| v.is_finite())
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo <= hi {
        (lo, hi)
    } else {
        (0.0, 1.0)
    }
}

fn unit(v: f32, (lo, hi): (f32, f32)) -> f32 {
    if hi > lo {
        ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
    } else {
        0.5
    }
}

/// A value panel: one channel on viridis, or the image's colours (a grey
/// image repeated, RGBA without alpha), on the scale `range`.
pub fn values(p: &Panel, range: (f32, f32)) -> Result<String, String> {
    let rgb: Vec<u8> = p
        .values
        .chunks(p.channels.max(1))
        .flat_map(|px| match px.len() {
            1 => viridis(unit(px[0], range)),
            _ => {
                let c = |i: usize| (unit(px[i.min(px.len() - 1)], range) * 255.0) as u8;
                if px.len() == 2 {
                    [c(0); 3]
                } else {
                    [c(0), c(1), c(2)]
                }
            }
        })
        .collect();
    png(p.cols, p.rows, &rgb)
}

/// `|actual − expected|` per cell and channel, scaled so the largest
/// difference is white; the factor is returned with the image.
pub fn difference(expected: &Panel, actual: &Panel) -> Result<(String, f32), String> {
    let d: Vec<f32> = expected
        .values
        .iter()
        .zip(&actual.values)
        .map(|(e, a)| (a - e).abs())
        .collect();
    let top = d
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f32::max);
    let diff = Panel {
        values: d,
        ..expected.clone()
    };
    Ok((values(&diff, (0.0, top.max(f32::MIN_POSITIVE)))?, top))
}

/// The colours of a scale as a strip, low to high.
pub fn legend() -> Result<String, String> {
    let width = 256;
    let rgb: Vec<u8> = (0..width)
        .flat_map(|i| heat(i as f32 / (width - 1) as f32))
        .collect();
    png(width, 1, &rgb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vips_sdk::error_map::PanelKind;

    fn panel(values: Vec<f32>) -> Panel {
        Panel {
            title: String::new(),
            kind: PanelKind::Error,
            row_axis: String::new(),
            col_axis: String::new(),
            rows: 1,
            cols: values.len(),
            channels: 1,
            row_step: 1,
            col_step: 1,
            values,
        }
    }

    /// Errors far past the bound still spread over the whole scale, larger
    /// ones brighter; exact elements are black; the ends are whole decades.
    #[test]
    fn the_scale_follows_the_output() {
        let seed = rand::random::<u32>();
        let top = 10f32.powf(2.0 + (seed % 5) as f32);
        let s = Scale::of([&panel(vec![0.0, top / 1e6, top / 100.0, top / 10.0, top])]);
        assert_eq!(s.hi, top.log10().round(), "{seed}: {s:?}");
        assert_eq!(s.hi - s.lo, DECADES, "{seed}: {s:?}");
        let light = |e: f32| s.colour(e).iter().map(|&c| u32::from(c)).sum::<u32>();
        assert!(light(top / 100.0) < light(top / 10.0) && light(top / 10.0) < light(top));
        assert_eq!(s.colour(0.0), [0, 0, 0]);
        assert_eq!(s.position(top / 1e6), 0.0);
        // Between decades: the scale widens to the decades around them.
        let small = Scale::of([&panel(vec![0.02, 0.3])]);
        assert_eq!((small.lo, small.hi), (-2.0, 0.0));
        assert!(small.position(0.3) > 0.7 && small.position(0.02) < 0.2);
        assert_eq!(small.decades().collect::<Vec<_>>(), [-2, -1, 0]);
        // Within one decade: one decade, both ends labelled.
        let narrow = Scale::of([&panel(vec![31.0, 32.0])]);
        assert_eq!((narrow.lo, narrow.hi), (1.0, 2.0));
        for (e, lo, hi) in [(1e-3f32, -4.0, -3.0), (0.2, -1.0, 0.0), (1.5, 0.0, 1.0)] {
            let one = Scale::of([&panel(vec![e])]);
            assert_eq!((one.lo, one.hi), (lo, hi), "{e}");
        }
    }
}
