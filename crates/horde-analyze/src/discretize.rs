//! Discretisation of real-valued series into symbols (thesis 003 §5.1.3): equal-width bins
//! (10 kbit/s for rates, 500 ms for RTTs) and single-link clustering, which in one
//! dimension cuts the sorted values at their `k - 1` widest gaps. Missing values (NaN)
//! stay missing (`None`). `Auto` picks an equal width from the data itself
//! (Freedman–Diaconis), for columns whose units have no natural bin.

/// A discretisation method.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// Bins of this width, counted from 0 (so bins mean the same across series).
    EqualWidth(f64),
    /// Single-link clustering into at most this many clusters.
    Cluster(usize),
    /// Equal-width bins of the Freedman–Diaconis width, 2·IQR·n^(-1/3), of the series
    /// being binned (see [`Method::resolve`]).
    Auto,
}

impl Method {
    /// The concrete method for `values`: `Auto` becomes the Freedman–Diaconis width, or,
    /// when the middle half of the values is one value (IQR 0), the width that splits
    /// their whole range into √n bins. A constant series gets width 1 (one bin: nothing
    /// can tell its values apart).
    pub fn resolve(self, values: &[f64]) -> Method {
        if self != Method::Auto {
            return self;
        }
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n < 2 || v[0] == v[n - 1] {
            return Method::EqualWidth(1.0);
        }
        let quantile = |q: f64| v[((n - 1) as f64 * q).round() as usize];
        let iqr = quantile(0.75) - quantile(0.25);
        let width = if iqr > 0.0 {
            2.0 * iqr / (n as f64).cbrt()
        } else {
            (v[n - 1] - v[0]) / (n as f64).sqrt().ceil()
        };
        Method::EqualWidth(width)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::EqualWidth(w) => write!(f, "width:{w}"),
            Method::Cluster(k) => write!(f, "cluster:{k}"),
            Method::Auto => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;

    /// `auto`, `width:W` or `cluster:K`.
    fn from_str(s: &str) -> Result<Method, String> {
        if s == "auto" {
            return Ok(Method::Auto);
        }
        let (kind, arg) = s
            .split_once(':')
            .ok_or_else(|| format!("`{s}`: expected auto, width:W or cluster:K"))?;
        match kind {
            "width" => match arg.parse::<f64>() {
                Ok(w) if w.is_finite() && w > 0.0 => Ok(Method::EqualWidth(w)),
                _ => Err(format!("`{s}`: the width must be a positive number")),
            },
            "cluster" => match arg.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(Method::Cluster(k)),
                _ => Err(format!(
                    "`{s}`: the cluster count must be a positive integer"
                )),
            },
            _ => Err(format!("`{s}`: expected auto, width:W or cluster:K")),
        }
    }
}

/// Symbols of `values`, dense from 0, with `None` for missing values.
pub fn discretize(values: &[f64], method: Method) -> Vec<Option<u32>> {
    let raw: Vec<Option<i64>> = match method.resolve(values) {
        Method::Auto => unreachable!("resolve gives a concrete method"),
        Method::EqualWidth(w) => values
            .iter()
            .map(|v| v.is_finite().then(|| (v / w).floor() as i64))
            .collect(),
        Method::Cluster(k) => {
            let cuts = cluster_cuts(values, k);
            values
                .iter()
                .map(|v| {
                    v.is_finite()
                        .then(|| cuts.partition_point(|c| c < v) as i64)
                })
                .collect()
        }
    };
    dense(&raw)
}

/// Cut points between clusters: midpoints of the `k - 1` widest gaps between sorted
/// distinct values.
fn cluster_cuts(values: &[f64], k: usize) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let mut gaps: Vec<(f64, f64)> = v
        .windows(2)
        .map(|w| (w[1] - w[0], (w[0] + w[1]) / 2.0))
        .collect();
    gaps.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut cuts: Vec<f64> = gaps.iter().take(k.saturating_sub(1)).map(|g| g.1).collect();
    cuts.sort_by(f64::total_cmp);
    cuts
}

fn dense(raw: &[Option<i64>]) -> Vec<Option<u32>> {
    let mut keys: Vec<i64> = raw.iter().flatten().copied().collect();
    keys.sort_unstable();
    keys.dedup();
    raw.iter()
        .map(|r| r.map(|k| keys.binary_search(&k).expect("key is present") as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_width_bins_by_hand() {
        // 10 kbit/s bins: 0-9.99 | 10-19.99 | ... ; symbols are dense.
        let s = discretize(
            &[9.6, 19.2, 38.4, 12.0, f64::NAN, 0.0],
            Method::EqualWidth(10.0),
        );
        assert_eq!(s, [Some(0), Some(1), Some(2), Some(1), None, Some(0)]);
    }

    #[test]
    fn clustering_cuts_the_widest_gaps() {
        let v = [1.0, 1.1, 1.2, 5.0, 5.1, 9.0, 9.2];
        let s = discretize(&v, Method::Cluster(3));
        assert_eq!(
            s,
            [
                Some(0),
                Some(0),
                Some(0),
                Some(1),
                Some(1),
                Some(2),
                Some(2)
            ]
        );
        let one = discretize(&v, Method::Cluster(1));
        assert!(one.iter().all(|x| *x == Some(0)));
    }

    #[test]
    fn parses_methods() {
        assert_eq!("width:10".parse(), Ok(Method::EqualWidth(10.0)));
        assert_eq!("cluster:6".parse(), Ok(Method::Cluster(6)));
        assert!("width:-1".parse::<Method>().is_err());
        assert!("bins".parse::<Method>().is_err());
        assert_eq!("auto".parse(), Ok(Method::Auto));
    }

    #[test]
    fn auto_width_follows_the_spread_of_the_data() {
        // 1000 values spread evenly over 0..1000: IQR 499, so the width is
        // 2 * 499 / 10 = 99.8, and there are 11 bins.
        let even: Vec<f64> = (0..1000).map(f64::from).collect();
        assert_eq!(Method::Auto.resolve(&even), Method::EqualWidth(99.8));
        let bins = discretize(&even, Method::Auto).into_iter().flatten().max();
        assert_eq!(bins, Some(10));
        // The same shape at a thousandth of the scale gets a thousandth of the width: the
        // fixed 10-unit default put all of it in one bin.
        let small: Vec<f64> = even.iter().map(|v| v / 1000.0).collect();
        assert_eq!(
            discretize(&small, Method::Auto),
            discretize(&even, Method::Auto)
        );
        // A series that is one value in its middle half is split over its range instead.
        let mut spiky = vec![5.0; 100];
        spiky[0] = 0.0;
        spiky[99] = 100.0;
        assert_eq!(Method::Auto.resolve(&spiky), Method::EqualWidth(10.0));
        assert_eq!(Method::Auto.resolve(&[3.0, 3.0]), Method::EqualWidth(1.0));
    }
}
