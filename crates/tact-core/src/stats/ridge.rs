//! Ridge regression without intercept, solved by Cholesky (MS Manners equations 13 and 14).
//!
//! The systems solved here are tiny (one row per progress metric, rarely more than four), so a
//! 30-line Cholesky keeps tact-core free of a linear-algebra dependency that would cost more to
//! build than the arithmetic it replaces.

use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum RidgeError {
    #[error("normal matrix is {rows} values for {k} unknowns; expected {k}x{k}")]
    Shape { rows: usize, k: usize },
    #[error(
        "normal matrix is not positive definite after the ridge term (pivot {pivot} = {value})"
    )]
    NotPositiveDefinite { pivot: usize, value: f64 },
}

/// Solve (X + ν·Ω·I) w = y for w, where X is the k×k row-major matrix of decayed sums of
/// products Δp_i·Δp_j, y the decayed sums d·Δp_i, and Ω = trace(X).
///
/// Columns are first normalised by √X_kk so that the ridge term weighs every metric alike,
/// whatever its unit (1 MB scanned and 10 index entries per testpoint would otherwise leave the
/// ridge at ≈10% of the small diagonal entry; spec section 4). A metric whose column is all zero
/// (it never moved) gets weight 0: there is nothing to learn about it yet.
pub fn solve_ridge(x: &[f64], y: &[f64], nu: f64) -> Result<Vec<f64>, RidgeError> {
    let k = y.len();
    if x.len() != k * k {
        return Err(RidgeError::Shape { rows: x.len(), k });
    }
    let live: Vec<usize> = (0..k).filter(|&i| x[i * k + i] > 0.0).collect();
    let scale: Vec<f64> = live.iter().map(|&i| x[i * k + i].sqrt()).collect();
    let m = live.len();
    // Normalised matrix: unit diagonal, so its trace Ω is m.
    let mut a = vec![0.0; m * m];
    for (r, &i) in live.iter().enumerate() {
        for (c, &j) in live.iter().enumerate() {
            a[r * m + c] = x[i * k + j] / (scale[r] * scale[c]);
        }
        a[r * m + r] += nu * m as f64;
    }
    let b: Vec<f64> = live.iter().zip(&scale).map(|(&i, s)| y[i] / s).collect();
    let l = cholesky(&a, m)?;
    let z = solve_cholesky(&l, m, &b);
    let mut w = vec![0.0; k];
    for (r, &i) in live.iter().enumerate() {
        w[i] = z[r] / scale[r];
    }
    Ok(w)
}

/// Lower-triangular L with L·Lᵀ = A (row-major, m×m).
fn cholesky(a: &[f64], m: usize) -> Result<Vec<f64>, RidgeError> {
    let mut l = vec![0.0; m * m];
    for i in 0..m {
        for j in 0..=i {
            let s: f64 = (0..j).map(|p| l[i * m + p] * l[j * m + p]).sum();
            if i == j {
                let v = a[i * m + i] - s;
                if v.is_nan() || v <= 0.0 {
                    return Err(RidgeError::NotPositiveDefinite { pivot: i, value: v });
                }
                l[i * m + i] = v.sqrt();
            } else {
                l[i * m + j] = (a[i * m + j] - s) / l[j * m + j];
            }
        }
    }
    Ok(l)
}

/// Solve L·Lᵀ·z = b by forward then back substitution.
fn solve_cholesky(l: &[f64], m: usize, b: &[f64]) -> Vec<f64> {
    let mut t = vec![0.0; m];
    for i in 0..m {
        let s: f64 = (0..i).map(|p| l[i * m + p] * t[p]).sum();
        t[i] = (b[i] - s) / l[i * m + i];
    }
    let mut z = vec![0.0; m];
    for i in (0..m).rev() {
        let s: f64 = (i + 1..m).map(|p| l[p * m + i] * z[p]).sum();
        z[i] = (t[i] - s) / l[i * m + i];
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accumulate sufficient statistics of d = Σ w_k Δp_k for the given rows.
    fn stats(rows: &[(Vec<f64>, f64)]) -> (Vec<f64>, Vec<f64>) {
        let k = rows[0].0.len();
        let (mut x, mut y) = (vec![0.0; k * k], vec![0.0; k]);
        for (dp, d) in rows {
            for i in 0..k {
                y[i] += d * dp[i];
                for j in 0..k {
                    x[i * k + j] += dp[i] * dp[j];
                }
            }
        }
        (x, y)
    }

    #[test]
    fn recovers_weights_of_independent_metrics() {
        // The paper's example: 750 kB/s scanned, 120 index entries/s.
        let w_true = [1.0 / 750_000.0, 1.0 / 120.0];
        let rows: Vec<_> = (0..50)
            .map(|i| {
                let dp = vec![10_000.0 + 3_000.0 * (i % 7) as f64, (i % 5) as f64 + 1.0];
                let d = dp[0] * w_true[0] + dp[1] * w_true[1];
                (dp, d)
            })
            .collect();
        let (x, y) = stats(&rows);
        let w = solve_ridge(&x, &y, 1e-11).unwrap();
        for k in 0..2 {
            assert!(
                (w[k] - w_true[k]).abs() / w_true[k] < 1e-6,
                "w[{k}] = {} vs {}",
                w[k],
                w_true[k]
            );
        }
    }

    #[test]
    fn collinear_metrics_stay_solvable_and_predict_well() {
        // Bytes and operations move in lockstep: X is singular without the ridge term.
        let rows: Vec<_> = (1..40)
            .map(|i| {
                let ops = i as f64;
                let dp = vec![4096.0 * ops, ops];
                (dp, 0.002 * ops)
            })
            .collect();
        let (x, y) = stats(&rows);
        let w = solve_ridge(&x, &y, 1e-11).unwrap();
        assert!(w.iter().all(|v| v.is_finite()));
        // Individual weights are not identifiable, but the predicted duration must be right.
        let predicted = 4096.0 * 10.0 * w[0] + 10.0 * w[1];
        assert!((predicted - 0.02).abs() < 1e-6, "predicted {predicted}");
        // Without the ridge the plain normal equations fail.
        assert!(solve_ridge(&x, &y, 0.0).is_err());
    }

    #[test]
    fn a_metric_that_never_moved_gets_zero_weight() {
        let rows: Vec<_> = (1..10)
            .map(|i| (vec![i as f64, 0.0], 0.5 * i as f64))
            .collect();
        let (x, y) = stats(&rows);
        let w = solve_ridge(&x, &y, 1e-11).unwrap();
        assert!((w[0] - 0.5).abs() < 1e-9);
        assert_eq!(w[1], 0.0);
    }

    #[test]
    fn shape_is_checked() {
        assert_eq!(
            solve_ridge(&[1.0; 3], &[1.0; 2], 0.0),
            Err(RidgeError::Shape { rows: 3, k: 2 })
        );
    }
}
