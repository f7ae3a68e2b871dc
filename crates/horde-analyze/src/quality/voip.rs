//! VoIP (G.711): the E-model MOS (seed §2.5, Eqs. 2.6 to 2.9).

use super::{arrived, mean, non_negative, QualityError};

/// The R-factor with no impairment (Eq. 2.6).
pub const R_MAX: f64 = 94.0;

/// `i(d)` (Eq. 2.7): `0.024 d`, plus `0.11 (d - 177.3)` past 177.3 ms.
pub fn delay_impairment(d_ms: f64) -> f64 {
    let extra = if d_ms > 177.3 {
        0.11 * (d_ms - 177.3)
    } else {
        0.0
    };
    0.024 * d_ms + extra
}

/// `i(l) = 30 ln(1 + 15 l)` (Eq. 2.8) with `l` the loss fraction. The seed writes "log"
/// without a base; the E-model it cites (Cole and Rosenbluth) uses the natural log.
pub fn loss_impairment(loss: f64) -> f64 {
    30.0 * (1.0 + 15.0 * loss).ln()
}

/// `R = 94 - i(d) - i(l)` (Eq. 2.6), clamped to the stated range [0, 94].
pub fn r_factor(d_ms: f64, loss: f64) -> Result<f64, QualityError> {
    let d = non_negative("delay_ms", d_ms)?;
    if !(0.0..=1.0).contains(&loss) {
        return Err(super::invalid("loss", "a fraction in [0, 1]", loss));
    }
    Ok((R_MAX - delay_impairment(d) - loss_impairment(loss)).clamp(0.0, R_MAX))
}

/// `MOS = 1 + 0.035 R + 0.000007 R (R - 60) (100 - R)` (Eq. 2.9), clamped to the stated
/// range [1.0, 4.5] (the cubic dips just under 1 for R below about 6.5).
pub fn r_to_mos(r: f64) -> f64 {
    let mos = 1.0 + 0.035 * r + 0.000_007 * r * (r - 60.0) * (100.0 - r);
    if mos.is_nan() {
        1.0
    } else {
        mos.clamp(1.0, 4.5)
    }
}

/// The E-model MOS for a mouth-to-ear delay `d_ms` and loss fraction `loss`.
pub fn e_model_mos(d_ms: f64, loss: f64) -> Result<f64, QualityError> {
    Ok(r_to_mos(r_factor(d_ms, loss)?))
}

/// The E-model MOS of a call from its packets' one-way delays (`None` = lost). `d` is the
/// mean network delay of the arrived packets plus the jitter buffer's delay (the seed
/// counts it but does not give its size); `l` is the fraction lost. A call where every
/// packet was lost scores 1.0, the E-model's worst.
pub fn voip_mos(owd_ms: &[Option<f64>], jitter_buffer_ms: f64) -> Result<f64, QualityError> {
    if owd_ms.is_empty() {
        return Err(QualityError::Empty {
            metric: "VoIP MOS",
            what: "no packets were sent",
        });
    }
    let buffer = non_negative("jitter_buffer_ms", jitter_buffer_ms)?;
    let got = arrived("VoIP one-way delay (ms)", owd_ms)?;
    if got.is_empty() {
        return Ok(1.0);
    }
    let loss = 1.0 - got.len() as f64 / owd_ms.len() as f64;
    e_model_mos(mean(&got) + buffer, loss)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn hand_computed_points() {
        // No impairment: R = 94; MOS = 1 + 3.29 + 0.000007 * 94 * 34 * 6 = 4.424232,
        // the 4.42 ceiling of seed Table 6.10.
        assert!(close(e_model_mos(0.0, 0.0).unwrap(), 4.424_232));
        // d = 20 ms: i(d) = 0.48, R = 93.52; MOS = 1 + 3.2732 + 0.000007 * 93.52 * 33.52
        // * 6.48 = 4.415394.
        assert!(close(r_factor(20.0, 0.0).unwrap(), 93.52));
        assert!(close(e_model_mos(20.0, 0.0).unwrap(), 4.415_394_092_544));
        // d = 400 ms: i(d) = 9.6 + 0.11 * 222.7 = 34.097, R = 59.903;
        // MOS = 1 + 2.096605 + 0.000007 * 59.903 * (-0.097) * 40.097 = 3.094974.
        assert!(close(delay_impairment(400.0), 34.097));
        assert!(close(
            e_model_mos(400.0, 0.0).unwrap(),
            3.094_974_089_128_711
        ));
        // d = 100 ms, 2% loss: i(d) = 2.4, i(l) = 30 ln 1.3 = 7.870928, R = 83.729072;
        // MOS = 4.156809.
        assert!(close(loss_impairment(0.02), 30.0 * 1.3f64.ln()));
        assert!(close(
            e_model_mos(100.0, 0.02).unwrap(),
            4.156_808_581_377_73
        ));
    }

    #[test]
    fn from_packets() {
        // 100 packets, one lost, the rest at 20 ms: d = 20, l = 0.01; i(l) = 30 ln 1.15
        // = 4.192858, R = 94 - 0.48 - 4.192858 = 89.327142, MOS = 4.322168.
        let mut owd = vec![Some(20.0); 99];
        owd.push(None);
        assert!(close(voip_mos(&owd, 0.0).unwrap(), 4.322_168_496_300_046));
        // A 10 ms jitter buffer adds to the delay: d = 30 for the same packets.
        assert!(close(
            voip_mos(&owd, 10.0).unwrap(),
            e_model_mos(30.0, 0.01).unwrap()
        ));
    }

    #[test]
    fn edge_cases() {
        assert!(matches!(
            voip_mos(&[], 0.0),
            Err(QualityError::Empty { .. })
        ));
        assert_eq!(voip_mos(&[None, None], 0.0).unwrap(), 1.0);
        // Total loss through the formula: i(1) = 30 ln 16 = 83.18, R = 10.82, MOS just
        // above 1; huge delays clamp R at 0 and MOS at 1.
        assert!(e_model_mos(0.0, 1.0).unwrap() >= 1.0);
        assert_eq!(e_model_mos(10_000.0, 1.0).unwrap(), 1.0);
        assert_eq!(r_to_mos(f64::NAN), 1.0);
        let err = r_factor(10.0, 2.0).unwrap_err();
        assert_eq!(err.to_string(), "loss must be a fraction in [0, 1], got 2");
        assert!(voip_mos(&[Some(-3.0)], 0.0).is_err());
        assert!(voip_mos(&[Some(3.0)], f64::INFINITY).is_err());
    }
}
