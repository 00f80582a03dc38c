//! The standard normal quantile Φ⁻¹, for the z-values of sequential tests (TCC's Z₁₋α).
//!
//! Peter J. Acklam's rational approximation ("An algorithm for computing the inverse normal
//! cumulative distribution function", 2003): a central rational function on [0.02425, 0.97575]
//! and a tail one in √(−2 ln p) outside it. Its relative error is below 1.15·10⁻⁹ over (0, 1),
//! far finer than any α a controller is configured with (Z₀.₉₅ = 1.644853627 to all printed
//! digits). `statrs` would do the same; it is not a dependency of the workspace, and one function
//! does not justify one.

/// Φ⁻¹(p): the z with P(Z ≤ z) = p for Z ~ N(0, 1). `None` unless 0 < p < 1.
pub fn normal_quantile(p: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0) {
        return None;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        let r = (-2.0 * q.ln()).sqrt();
        (((((C[0] * r + C[1]) * r + C[2]) * r + C[3]) * r + C[4]) * r + C[5])
            / ((((D[0] * r + D[1]) * r + D[2]) * r + D[3]) * r + 1.0)
    };
    let z = if p < LOW {
        tail(p)
    } else if p > 1.0 - LOW {
        -tail(1.0 - p)
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    Some(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_values() {
        // Reference values from R's qnorm (double precision).
        let cases: [(f64, f64); 7] = [
            (0.5, 0.0),
            (0.95, 1.644_853_626_951_472_2),
            (0.975, 1.959_963_984_540_054),
            (0.99, 2.326_347_874_040_841),
            (0.001, -3.090_232_306_167_814),
            (0.02, -2.053_748_910_631_823),
            (1e-10, -6.361_340_902_404_056),
        ];
        for (p, want) in cases {
            let got = normal_quantile(p).unwrap();
            let tol = 1.2e-9 * f64::max(1.0, want.abs());
            assert!((got - want).abs() < tol, "p = {p}: {got} vs {want}");
        }
    }

    #[test]
    fn symmetric_and_monotone() {
        let mut last = f64::NEG_INFINITY;
        for i in 1..1000 {
            let p = i as f64 / 1000.0;
            let z = normal_quantile(p).unwrap();
            assert!(z > last, "not increasing at {p}");
            last = z;
            let m = normal_quantile(1.0 - p).unwrap();
            assert!((z + m).abs() < 1e-8, "asymmetric at {p}: {z} {m}");
        }
    }

    #[test]
    fn rejects_outside_open_unit_interval() {
        for p in [0.0, 1.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            assert_eq!(normal_quantile(p), None, "{p}");
        }
    }
}
