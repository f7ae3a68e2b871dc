//! The latency CDF plot.

use std::io;
use std::path::Path;

use plotters::prelude::*;

use super::report::Report;

/// Most points drawn per line: enough for a smooth curve, small enough that a
/// ten-minute run's SVG stays a few hundred kilobytes.
const MAX_POINTS: usize = 1000;

/// Distinct colours, one per stream, cycling after eight.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// `cdf` (ascending `(value, fraction)` points) thinned to at most `MAX_POINTS + 1`,
/// starting from `(min, 0)` and always keeping the last point.
fn cdf_points(cdf: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let Some(&(first, _)) = cdf.first() else {
        return Vec::new();
    };
    let n = cdf.len();
    let m = n.min(MAX_POINTS);
    let mut pts = Vec::with_capacity(m + 1);
    pts.push((first, 0.0));
    for j in 1..=m {
        pts.push(cdf[(j * n).div_ceil(m) - 1]);
    }
    pts
}

fn plot_err<E: std::error::Error + Send + Sync + 'static>(e: E) -> io::Error {
    io::Error::other(e.to_string())
}

impl Report {
    /// The latency CDF as an SVG document: one line per stream with acked ADUs.
    pub fn cdf_svg(&self) -> io::Result<String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (800, 500)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let xmax = self
                .streams
                .iter()
                .filter_map(|s| s.latency_cdf.last().map(|p| p.0))
                .fold(0.0f64, f64::max);
            let xmax = if xmax > 0.0 { xmax * 1.05 } else { 1.0 };
            let title = match &self.scenario {
                Some(name) => format!("ADU latency CDF: {name}"),
                None => "ADU latency CDF".to_string(),
            };
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 20))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(55)
                .build_cartesian_2d(0f64..xmax, 0f64..1f64)
                .map_err(plot_err)?;
            chart
                .configure_mesh()
                .x_desc("latency, insertion to ack (ms)")
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_desc("fraction of acked ADUs")
                .draw()
                .map_err(plot_err)?;
            let mut any = false;
            for (i, s) in self.streams.iter().enumerate() {
                let pts = cdf_points(&s.latency_cdf);
                if pts.is_empty() {
                    continue;
                }
                any = true;
                let colour = COLOURS[i % COLOURS.len()];
                chart
                    .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
                    .map_err(plot_err)?
                    .label(format!("stream {}", s.id))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
            }
            if any {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::LowerRight)
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()
                    .map_err(plot_err)?;
            }
            root.present().map_err(plot_err)?;
        }
        Ok(svg)
    }

    /// `latency_cdf.svg` in `dir` (created if missing).
    pub fn write_cdf_plot(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("latency_cdf.svg"), self.cdf_svg()?)
    }
}

#[cfg(test)]
mod tests {
    use super::cdf_points;

    #[test]
    fn cdf_points_thin_long_runs_and_end_at_one() {
        let v: Vec<(f64, f64)> = (0..5000)
            .map(|i| (f64::from(i), f64::from(i + 1) / 5000.0))
            .collect();
        let p = cdf_points(&v);
        assert_eq!(p.len(), 1001);
        assert_eq!(p[0], (0.0, 0.0));
        assert_eq!(*p.last().unwrap(), (4999.0, 1.0));
        assert!(p.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let short = cdf_points(&[(3.0, 0.5), (7.0, 1.0)]);
        assert_eq!(short, vec![(3.0, 0.0), (3.0, 0.5), (7.0, 1.0)]);
    }
}
