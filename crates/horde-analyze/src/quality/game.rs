//! Online games: the G-model MOS (seed §2.5, Eqs. 2.4 and 2.5).

use super::{arrived, mean, non_negative, QualityError};

/// The G-model's best score, `G(0)`.
pub const G_MODEL_MAX: f64 = 4.37;

/// The network impairment `X = 0.104 * ping + jitter` (Eq. 2.4), both in ms.
pub fn g_model_impairment(ping_ms: f64, jitter_ms: f64) -> f64 {
    0.104 * ping_ms + jitter_ms
}

/// `G(X) = -0.00000587 X^3 + 0.00139 X^2 - 0.114 X + 4.37` (Eq. 2.5), clamped to the
/// stated range [0, 4.37]: the cubic falls monotonically and goes negative past X = 110.
pub fn g_model_mos(ping_ms: f64, jitter_ms: f64) -> Result<f64, QualityError> {
    let x = g_model_impairment(
        non_negative("ping_ms", ping_ms)?,
        non_negative("jitter_ms", jitter_ms)?,
    );
    let g = -0.000_005_87 * x.powi(3) + 0.001_39 * x.powi(2) - 0.114 * x + G_MODEL_MAX;
    Ok(g.clamp(0.0, G_MODEL_MAX))
}

/// The G-model MOS of a game flow from the one-way delays of its packets in each
/// direction (`None` = lost). The ping is the round trip, mean downstream delay plus mean
/// upstream delay; the jitter is, as the G-model defines it, the mean one-way delay minus
/// the minimum one-way delay, taken downstream, the direction the access point queues.
/// Loss does not enter the model (the seed: it "hardly affects the perceived quality"),
/// but a direction where every packet was lost scores 0: the game cannot be played.
pub fn game_mos(
    down_owd_ms: &[Option<f64>],
    up_owd_ms: &[Option<f64>],
) -> Result<f64, QualityError> {
    const METRIC: &str = "game MOS";
    if down_owd_ms.is_empty() {
        return Err(QualityError::Empty {
            metric: METRIC,
            what: "no downstream packets were sent",
        });
    }
    if up_owd_ms.is_empty() {
        return Err(QualityError::Empty {
            metric: METRIC,
            what: "no upstream packets were sent",
        });
    }
    let down = arrived("downstream one-way delay (ms)", down_owd_ms)?;
    let up = arrived("upstream one-way delay (ms)", up_owd_ms)?;
    if down.is_empty() || up.is_empty() {
        return Ok(0.0);
    }
    let down_mean = mean(&down);
    let down_min = down.iter().copied().fold(f64::INFINITY, f64::min);
    // The mean of equal delays can round to just below their minimum.
    let jitter = (down_mean - down_min).max(0.0);
    g_model_mos(down_mean + mean(&up), jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn hand_computed_points() {
        // X = 0: G = 4.37.
        assert!(close(g_model_mos(0.0, 0.0).unwrap(), 4.37));
        // ping 100, jitter 0: X = 10.4; G = -0.00000587 * 1124.864 + 0.00139 * 108.16
        // - 0.114 * 10.4 + 4.37 = -0.006603 + 0.150342 - 1.1856 + 4.37 = 3.328139.
        assert!(close(g_model_mos(100.0, 0.0).unwrap(), 3.328_139_448_32));
        // ping 50, jitter 10: X = 5.2 + 10 = 15.2; G = -0.00000587 * 3511.808
        // + 0.00139 * 231.04 - 1.7328 + 4.37 = -0.020614 + 0.321146 - 1.7328 + 4.37
        // = 2.937731.
        assert!(close(g_model_mos(50.0, 10.0).unwrap(), 2.937_731_287_04));
        // ping 1000: X = 104; G = -6.603 + 15.034 - 11.856 + 4.37 = 0.945288.
        assert!(close(g_model_mos(1000.0, 0.0).unwrap(), 0.945_288_32));
        // Past X = 110 the cubic is negative; the score stops at 0.
        assert_eq!(g_model_mos(2000.0, 0.0).unwrap(), 0.0);
    }

    #[test]
    fn from_packets() {
        // Down delays 20, 30, 40 (one lost): mean 30, min 20, jitter 10; up delays 20
        // and 20: mean 20. Ping = 30 + 20 = 50, so X = 15.2 and G = 2.937731 as above.
        let down = [Some(20.0), None, Some(30.0), Some(40.0)];
        let up = [Some(20.0), Some(20.0)];
        assert!(close(game_mos(&down, &up).unwrap(), 2.937_731_287_04));
    }

    #[test]
    fn edge_cases() {
        assert!(matches!(
            game_mos(&[], &[Some(1.0)]),
            Err(QualityError::Empty { .. })
        ));
        assert!(game_mos(&[Some(1.0)], &[]).is_err());
        // Every packet lost: unplayable, 0.
        assert_eq!(game_mos(&[None, None], &[Some(5.0)]).unwrap(), 0.0);
        assert_eq!(game_mos(&[Some(5.0)], &[None]).unwrap(), 0.0);
        let err = game_mos(&[Some(f64::NAN)], &[Some(1.0)]).unwrap_err();
        assert!(
            err.to_string().contains("downstream one-way delay"),
            "{err}"
        );
        assert!(g_model_mos(-1.0, 0.0).is_err());
    }

    #[test]
    fn equal_delays_whose_mean_rounds_below_them_have_no_jitter() {
        let down = [Some(0.1); 10];
        assert!(down.iter().flatten().sum::<f64>() / 10.0 < 0.1);
        let mos = game_mos(&down, &[Some(0.1)]).unwrap();
        assert!(close(mos, g_model_mos(0.2, 0.0).unwrap()), "{mos}");
    }
}
