//! SVG line plots (plotters), one function for every figure the toolkit draws: NMI against
//! lag with its null, CDFs, and time series.

use std::path::Path;

use plotters::prelude::*;

use crate::error::AnalyzeError;

/// One named line.
pub struct Line<'a> {
    /// Legend text.
    pub name: &'a str,
    /// Points, in x order.
    pub points: &'a [(f64, f64)],
}

/// Draw `lines` into an SVG file at `path`.
pub fn lines_svg(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line<'_>],
) -> Result<(), AnalyzeError> {
    let all = || {
        lines
            .iter()
            .flat_map(|l| l.points.iter())
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    };
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0.0f64, f64::MIN);
    for &(x, y) in all() {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(AnalyzeError::Invalid(format!("{title}: nothing to plot")));
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, y0..y1 * 1.05)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()?;
        for (i, l) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    l.points
                        .iter()
                        .copied()
                        .filter(|p| p.0.is_finite() && p.1.is_finite()),
                    color.stroke_width(2),
                ))?
                .label(l.name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| AnalyzeError::Invalid(format!("{}: cannot draw: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_line() {
        let dir = std::env::temp_dir().join(format!("horde-analyze-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.svg");
        let a = [(0.0, 0.1), (1.0, 0.5), (2.0, 0.2)];
        let b = [(0.0, 0.05), (2.0, 0.05)];
        lines_svg(
            &path,
            "nmi",
            "lag",
            "NMI",
            &[
                Line {
                    name: "nmi",
                    points: &a,
                },
                Line {
                    name: "null",
                    points: &b,
                },
            ],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("null") && svg.contains("polyline"));
        assert!(lines_svg(&path, "empty", "x", "y", &[]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
