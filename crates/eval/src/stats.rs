//! The success rate of a run with its 95% confidence interval (Wilson's score interval, which
//! stays inside 0..1 and means something for small suites and rates near 0 or 1).

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval of `successes` out of `n` at 95%: `(low, high)`; `(0, 1)` for
/// no tasks at all.
pub fn wilson95(successes: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n_f = n as f64;
    let p = successes.min(n) as f64 / n_f;
    let z2 = Z95 * Z95;
    let center = (p + z2 / (2.0 * n_f)) / (1.0 + z2 / n_f);
    let half = Z95 / (1.0 + z2 / n_f) * (p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt();
    ((center - half).max(0.0), (center + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    #[test]
    fn known_intervals() {
        // Published values of the Wilson interval (95%).
        let (lo, hi) = wilson95(8, 10);
        assert!(close(lo, 0.4902) && close(hi, 0.9433), "{lo} {hi}");
        let (lo, hi) = wilson95(0, 10);
        assert!(close(lo, 0.0) && close(hi, 0.2775), "{lo} {hi}");
        let (lo, hi) = wilson95(30, 30);
        assert!(close(lo, 0.8865) && close(hi, 1.0), "{lo} {hi}");
        assert_eq!(wilson95(0, 0), (0.0, 1.0));
    }
}
