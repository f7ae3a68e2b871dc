//! Jain's fairness index (seed Eq. 6.4).

use super::QualityError;

/// `(sum x)^2 / (n * sum x^2)` over non-negative allocations (e.g. throughputs): 1 when
/// all are equal, `1/n` when one flow has everything. All-zero allocations are equal, so
/// they score 1.
pub fn jain_index(x: &[f64]) -> Result<f64, QualityError> {
    if x.is_empty() {
        return Err(QualityError::Empty {
            metric: "Jain's fairness index",
            what: "no allocations were given",
        });
    }
    for &v in x {
        super::non_negative("allocation", v)?;
    }
    let sum: f64 = x.iter().sum();
    let sum_sq: f64 = x.iter().map(|v| v * v).sum();
    if sum_sq == 0.0 {
        return Ok(1.0);
    }
    Ok(sum * sum / (x.len() as f64 * sum_sq))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_points() {
        // Equal: (3 * 5)^2 / (3 * 75) = 225 / 225 = 1.
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]).unwrap(), 1.0);
        // One of four has it all: 10^2 / (4 * 100) = 0.25.
        assert_eq!(jain_index(&[10.0, 0.0, 0.0, 0.0]).unwrap(), 0.25);
        // 1 and 3: 16 / (2 * 10) = 0.8.
        assert!((jain_index(&[1.0, 3.0]).unwrap() - 0.8).abs() < 1e-12);
    }

    #[test]
    fn edge_cases() {
        assert!(jain_index(&[]).is_err());
        assert_eq!(jain_index(&[0.0, 0.0]).unwrap(), 1.0);
        assert!(jain_index(&[1.0, -1.0]).is_err());
        assert!(jain_index(&[f64::NAN]).is_err());
    }
}
