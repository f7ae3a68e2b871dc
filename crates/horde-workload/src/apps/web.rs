//! Web browsing: the Lee and Gupta user-behaviour model of seed Table 6.1 (§6.1.4).
//!
//! A page view is a request, the HTML object in response, then, if the page has
//! embedded objects, a second request answered by one object whose size is the sum of
//! the embedded objects (HTTP/1.1, one server, persistent connection and pipelining).
//! After the page is complete the user reads it for the reading time and clicks again.
//! The timing of requests depends on the network, so the generator yields pages and the
//! driver places them: the first request at the start, each next one a page's reading
//! time after that page completed.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma, LogNormal};

use crate::WorkloadError;

/// The model's parameters; the default is seed Table 6.1.
#[derive(Debug, Clone, PartialEq)]
pub struct WebParams {
    /// HTML object size: log-normal (mu, sigma) of bytes, truncated at the maximum.
    pub html_lognormal: (f64, f64),
    /// Largest HTML object in bytes.
    pub html_max_bytes: f64,
    /// Embedded object size: log-normal (mu, sigma) of bytes, truncated at the maximum.
    pub embedded_lognormal: (f64, f64),
    /// Largest embedded object in bytes.
    pub embedded_max_bytes: f64,
    /// Number of embedded objects: the whole part of a Gamma (shape, scale) draw.
    pub objects_gamma: (f64, f64),
    /// Most embedded objects on a page.
    pub objects_max: u32,
    /// Reading time: log-normal (mu, sigma) of seconds, truncated at the maximum.
    pub reading_lognormal: (f64, f64),
    /// Longest reading time in seconds.
    pub reading_max_s: f64,
    /// Request size: uniform on these bytes, inclusive.
    pub request_bytes: (u32, u32),
}

impl Default for WebParams {
    /// Seed Table 6.1. The request size's fit is printed as "Uniform (350 B)", which
    /// matches neither its mean (318.59 B) nor its deviation (179.46 B); the uniform
    /// range with that mean and deviation, mean ± √3 sd, is 8..=629 B, used here.
    fn default() -> Self {
        WebParams {
            html_lognormal: (7.902_72, 1.764_3),
            html_max_bytes: 2e6,
            embedded_lognormal: (7.513_84, 2.174_54),
            embedded_max_bytes: 6e6,
            objects_gamma: (0.141_385, 40.325_7),
            objects_max: 300,
            reading_lognormal: (-0.495_204, 2.773_1),
            reading_max_s: 10_000.0,
            request_bytes: (8, 629),
        }
    }
}

/// One page view.
#[derive(Debug, Clone, PartialEq)]
pub struct WebPage {
    /// Its number, from 0.
    pub index: u64,
    /// The first request's size (client to server).
    pub request_bytes: u32,
    /// The HTML object's size (server to client).
    pub html_bytes: u64,
    /// How many embedded objects the page has.
    pub embedded_objects: u32,
    /// The second request's size, when there are embedded objects.
    pub embedded_request_bytes: Option<u32>,
    /// The second response's size: the sum of the embedded objects (0 when none).
    pub embedded_bytes: u64,
    /// How long the user reads the page once it is complete, before the next request.
    pub reading: Duration,
}

/// The page generator; yields pages forever.
#[derive(Debug, Clone)]
pub struct WebPages {
    html: LogNormal<f64>,
    html_max: f64,
    embedded: LogNormal<f64>,
    embedded_max: f64,
    objects: Gamma<f64>,
    objects_max: u32,
    reading: LogNormal<f64>,
    reading_max: f64,
    request: (u32, u32),
    rng: ChaCha8Rng,
    index: u64,
}

fn bad<T>(m: String) -> Result<T, WorkloadError> {
    Err(WorkloadError(format!("web app: {m}")))
}

fn lognormal(name: &str, (mu, sigma): (f64, f64)) -> Result<LogNormal<f64>, WorkloadError> {
    if !(mu.is_finite() && sigma.is_finite() && sigma > 0.0) {
        return bad(format!(
            "`{name}` needs a finite mu and sigma > 0, got ({mu}, {sigma})"
        ));
    }
    LogNormal::new(mu, sigma).or_else(|e| bad(format!("`{name}`: {e}")))
}

fn positive(name: &str, v: f64) -> Result<f64, WorkloadError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        bad(format!("`{name}` must be a positive number, got {v}"))
    }
}

impl WebPages {
    /// A generator with the given parameters and seed.
    pub fn new(params: WebParams, seed: u64) -> Result<WebPages, WorkloadError> {
        let (k, theta) = params.objects_gamma;
        positive("objects_gamma shape", k)?;
        positive("objects_gamma scale", theta)?;
        let (lo, hi) = params.request_bytes;
        if lo == 0 || hi < lo {
            return bad(format!(
                "`request_bytes` must be a range 1 <= low <= high, got {lo}..={hi}"
            ));
        }
        Ok(WebPages {
            html: lognormal("html_lognormal", params.html_lognormal)?,
            html_max: positive("html_max_bytes", params.html_max_bytes)?,
            embedded: lognormal("embedded_lognormal", params.embedded_lognormal)?,
            embedded_max: positive("embedded_max_bytes", params.embedded_max_bytes)?,
            objects: Gamma::new(k, theta).or_else(|e| bad(format!("`objects_gamma`: {e}")))?,
            objects_max: params.objects_max,
            reading: lognormal("reading_lognormal", params.reading_lognormal)?,
            reading_max: positive("reading_max_s", params.reading_max_s)?,
            request: params.request_bytes,
            rng: ChaCha8Rng::seed_from_u64(seed),
            index: 0,
        })
    }

    fn request_bytes(&mut self) -> u32 {
        self.rng.gen_range(self.request.0..=self.request.1)
    }
}

/// A draw from `d` at most `max`: drawn again above it (a truncated distribution); after
/// 64 draws, the maximum.
fn truncated<D: Distribution<f64>>(d: &D, max: f64, rng: &mut ChaCha8Rng) -> f64 {
    for _ in 0..64 {
        let x = d.sample(rng);
        if x <= max {
            return x;
        }
    }
    max
}

impl Iterator for WebPages {
    type Item = WebPage;

    fn next(&mut self) -> Option<WebPage> {
        let request_bytes = self.request_bytes();
        let html_bytes = truncated(&self.html, self.html_max, &mut self.rng)
            .round()
            .max(1.0) as u64;
        let objects = truncated(
            &self.objects,
            f64::from(self.objects_max) + 1.0,
            &mut self.rng,
        )
        .floor()
        .min(f64::from(self.objects_max)) as u32;
        let mut embedded_bytes = 0u64;
        for _ in 0..objects {
            let b = truncated(&self.embedded, self.embedded_max, &mut self.rng);
            embedded_bytes += b.round().max(1.0) as u64;
        }
        let embedded_request_bytes = (objects > 0).then(|| self.request_bytes());
        let reading = truncated(&self.reading, self.reading_max, &mut self.rng);
        let page = WebPage {
            index: self.index,
            request_bytes,
            html_bytes,
            embedded_objects: objects,
            embedded_request_bytes,
            embedded_bytes,
            reading: Duration::from_secs_f64(reading),
        };
        self.index += 1;
        Some(page)
    }
}
