//! The flow completion-time CDF as SVG: one line per workload entry.

use std::io;
use std::path::Path;

use plotters::prelude::*;

use super::metrics::FlowReport;

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn plot_err<E: std::error::Error + Send + Sync + 'static>(e: E) -> io::Error {
    io::Error::other(e.to_string())
}

/// Steps of the empirical CDF of `samples` (sorted copy), as (value, fraction).
pub fn cdf(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    s.iter()
        .enumerate()
        .map(|(i, &x)| (x, (i + 1) as f64 / n))
        .collect()
}

impl FlowReport {
    /// Completion-time CDFs, log-scaled time axis (completion times span decades).
    pub fn cdf_svg(&self) -> io::Result<String> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (800, 500)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let all: Vec<f64> = self.flows.iter().filter_map(|f| f.completion_ms).collect();
            let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = all.iter().copied().fold(0.0f64, f64::max);
            let (lo, hi) = if all.is_empty() {
                (1.0, 10.0)
            } else {
                ((lo * 0.8).max(0.1), (hi * 1.25).max(lo * 2.0))
            };
            let mut chart = ChartBuilder::on(&root)
                .caption(
                    format!(
                        "Flow completion time: {} ({} TCP)",
                        self.scenario, self.stack
                    ),
                    ("sans-serif", 20),
                )
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(55)
                .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)
                .map_err(plot_err)?;
            chart
                .configure_mesh()
                .x_desc("completion time (ms, log scale)")
                .y_desc("fraction of finished flows")
                .draw()
                .map_err(plot_err)?;
            for (i, c) in self.classes.iter().enumerate() {
                let fct: Vec<f64> = self
                    .flows
                    .iter()
                    .filter(|f| f.class == c.class)
                    .filter_map(|f| f.completion_ms)
                    .collect();
                if fct.is_empty() {
                    continue;
                }
                let colour = COLOURS[i % COLOURS.len()];
                chart
                    .draw_series(LineSeries::new(cdf(&fct), colour.stroke_width(2)))
                    .map_err(plot_err)?
                    .label(format!("{} ({} flows)", c.class, fct.len()))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
            }
            if !all.is_empty() {
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

    /// `report.json`, `flows.csv`, `summary.csv` and `fct_cdf.svg` in `dir`.
    pub fn write_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("report.json"), self.to_json())?;
        std::fs::write(dir.join("flows.csv"), self.flows_csv())?;
        std::fs::write(dir.join("summary.csv"), self.summary_csv())?;
        std::fs::write(dir.join("fct_cdf.svg"), self.cdf_svg()?)
    }
}

#[cfg(test)]
mod tests {
    use super::cdf;

    #[test]
    fn cdf_is_sorted_and_ends_at_one() {
        let c = cdf(&[3.0, 1.0, 2.0, 2.0]);
        assert_eq!(c, vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]);
    }
}
