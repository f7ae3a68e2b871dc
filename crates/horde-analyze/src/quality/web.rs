//! Web browsing: page response time (seed §2.5, §6.7.1).

use std::time::Duration;

use super::QualityError;

/// One page view: when it was requested (the URL entered or the link clicked) and when
/// the last of its objects arrived, `None` if that never happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFetch {
    /// When the request was made.
    pub requested: Duration,
    /// When every object of the page had arrived.
    pub completed: Option<Duration>,
}

impl PageFetch {
    fn response_ms(&self) -> Result<Option<f64>, QualityError> {
        match self.completed {
            None => Ok(None),
            Some(done) if done < self.requested => Err(super::invalid(
                "page completion time",
                "at or after its request time",
                format!("{done:?} < {:?}", self.requested),
            )),
            Some(done) => Ok(Some((done - self.requested).as_secs_f64() * 1e3)),
        }
    }
}

const METRIC: &str = "web response time";

/// The mean response time in ms of the pages that completed.
pub fn mean_response_time_ms(pages: &[PageFetch]) -> Result<f64, QualityError> {
    let mut sum = 0.0;
    let mut n = 0usize;
    for p in pages {
        if let Some(ms) = p.response_ms()? {
            sum += ms;
            n += 1;
        }
    }
    if n == 0 {
        return Err(QualityError::Empty {
            metric: METRIC,
            what: if pages.is_empty() {
                "no pages were requested"
            } else {
                "no page completed"
            },
        });
    }
    Ok(sum / n as f64)
}

/// The mean response time of each run, over only the pages that completed in every run
/// (page `i` of one run is page `i` of the others), so that runs that complete different
/// pages are compared on the same pages (seed §6.7.1). Pages beyond the shortest run are
/// ignored.
pub fn mean_response_time_on_common_pages_ms(
    runs: &[&[PageFetch]],
) -> Result<Vec<f64>, QualityError> {
    let len = runs.iter().map(|r| r.len()).min().unwrap_or(0);
    let mut common = vec![true; len];
    for run in runs {
        for (i, p) in run.iter().take(len).enumerate() {
            common[i] &= p.response_ms()?.is_some();
        }
    }
    if !common.iter().any(|&c| c) {
        return Err(QualityError::Empty {
            metric: METRIC,
            what: "no page completed in every run",
        });
    }
    runs.iter()
        .map(|run| {
            let kept: Vec<PageFetch> = run
                .iter()
                .zip(&common)
                .filter(|(_, &c)| c)
                .map(|(p, _)| *p)
                .collect();
            mean_response_time_ms(&kept)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(req_ms: u64, done_ms: Option<u64>) -> PageFetch {
        PageFetch {
            requested: Duration::from_millis(req_ms),
            completed: done_ms.map(Duration::from_millis),
        }
    }

    #[test]
    fn mean_of_completed_pages() {
        // 1000 -> 1040 (40 ms), 2000 -> 2100 (100 ms), 3000 never: (40 + 100) / 2 = 70.
        let pages = [
            page(1000, Some(1040)),
            page(2000, Some(2100)),
            page(3000, None),
        ];
        assert!((mean_response_time_ms(&pages).unwrap() - 70.0).abs() < 1e-9);
    }

    #[test]
    fn common_pages_only() {
        // Run a completes pages 0, 1, 2 in 10, 20, 300 ms; run b completes 0 and 1 in
        // 30 and 50 ms and never page 2. Common pages: 0 and 1, so a = (10 + 20) / 2 = 15
        // and b = (30 + 50) / 2 = 40; page 2's 300 ms is left out of a.
        let a = [
            page(0, Some(10)),
            page(100, Some(120)),
            page(200, Some(500)),
        ];
        let b = [page(0, Some(30)), page(100, Some(150)), page(200, None)];
        let m = mean_response_time_on_common_pages_ms(&[&a, &b]).unwrap();
        assert!(
            (m[0] - 15.0).abs() < 1e-9 && (m[1] - 40.0).abs() < 1e-9,
            "{m:?}"
        );
    }

    #[test]
    fn edge_cases() {
        assert_eq!(
            mean_response_time_ms(&[]).unwrap_err().to_string(),
            "web response time: no pages were requested"
        );
        assert_eq!(
            mean_response_time_ms(&[page(0, None)])
                .unwrap_err()
                .to_string(),
            "web response time: no page completed"
        );
        assert!(mean_response_time_ms(&[page(10, Some(5))]).is_err());
        assert!(mean_response_time_on_common_pages_ms(&[]).is_err());
        let a = [page(0, Some(10))];
        let b = [page(0, None)];
        assert!(mean_response_time_on_common_pages_ms(&[&a, &b]).is_err());
    }
}
