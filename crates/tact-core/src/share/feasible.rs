//! Feasible shares for a group on several CPUs (spec section 4, "Feasible shares"): the weight
//! readjustment of surplus-fair scheduling (Chandra et al., OSDI 2000), generalized to entities
//! that can each use `par_i` CPUs at once.
//!
//! An entity whose share of the group, `share_i/S`, exceeds what it can use, `par_i/C`, is capped at
//! exactly `par_i/C`; the capacity it cannot use is split among the others by share, and the test
//! is repeated on them. Uncapped entities keep `φ_i = share_i`; a capped one gets the φ that makes
//! `φ_i/Σφ = par_i/C`. If every entity is capped (the group cannot fill the CPUs at all),
//! `φ_i ∝ par_i`, scaled so that `Σφ = Σ share`.

/// One entity's input to [`feasible_weights`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// The user-given share (positive).
    pub share: f64,
    /// CPUs the entity can use at once (at least 1).
    pub par: u32,
}

/// One entity's output of [`feasible_weights`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feasible {
    /// φ_i, the weight ALPS runs on.
    pub weight: f64,
    /// Whether the entity was capped at `par_i/C` (it then gets `par_i` CPUs of its own).
    pub capped: bool,
}

/// φ for every entity, in input order, on `cpus` CPUs.
pub fn feasible_weights(demands: &[Demand], cpus: u32) -> Vec<Feasible> {
    let c = f64::from(cpus.max(1));
    let mut capped = vec![false; demands.len()];
    loop {
        let uncapped_share: f64 = demands
            .iter()
            .zip(&capped)
            .filter(|(_, &k)| !k)
            .map(|(d, _)| d.share)
            .sum();
        let free: f64 = c - demands
            .iter()
            .zip(&capped)
            .filter(|(_, &k)| k)
            .map(|(d, _)| f64::from(d.par.max(1)))
            .sum::<f64>();
        if uncapped_share <= 0.0 {
            break;
        }
        // share_i/U > par_i/free, without dividing (free may reach 0 or below).
        let mut any = false;
        for (i, d) in demands.iter().enumerate() {
            if !capped[i]
                && d.share * free > f64::from(d.par.max(1)) * uncapped_share * (1.0 + 1e-12)
            {
                capped[i] = true;
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let uncapped_share: f64 = demands
        .iter()
        .zip(&capped)
        .filter(|(_, &k)| !k)
        .map(|(d, _)| d.share)
        .sum();
    let capped_par: f64 = demands
        .iter()
        .zip(&capped)
        .filter(|(_, &k)| k)
        .map(|(d, _)| f64::from(d.par.max(1)))
        .sum();
    // Weight per CPU of a capped entity: uncapped entities share `free` CPUs by share, so one
    // CPU is worth U/free of weight.
    let per_cpu = if uncapped_share > 0.0 {
        uncapped_share / (c - capped_par)
    } else {
        let total: f64 = demands.iter().map(|d| d.share).sum();
        if capped_par > 0.0 {
            total / capped_par
        } else {
            1.0
        }
    };
    demands
        .iter()
        .zip(&capped)
        .map(|(d, &k)| Feasible {
            weight: if k {
                f64::from(d.par.max(1)) * per_cpu
            } else {
                d.share
            },
            capped: k,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(shares: &[f64], par: &[u32], cpus: u32) -> Vec<f64> {
        let d: Vec<Demand> = shares
            .iter()
            .zip(par)
            .map(|(&share, &par)| Demand { share, par })
            .collect();
        feasible_weights(&d, cpus)
            .iter()
            .map(|f| f.weight)
            .collect()
    }

    #[test]
    fn skewed_five_on_two_cores() {
        let d: Vec<Demand> = [1.0, 1.0, 1.0, 1.0, 21.0]
            .iter()
            .map(|&share| Demand { share, par: 1 })
            .collect();
        let f = feasible_weights(&d, 2);
        let w: Vec<f64> = f.iter().map(|f| f.weight).collect();
        assert_eq!(w, vec![1.0, 1.0, 1.0, 1.0, 4.0]);
        assert_eq!(
            f.iter().map(|f| f.capped).collect::<Vec<_>>(),
            vec![false, false, false, false, true]
        );
    }

    #[test]
    fn feasible_shares_are_unchanged() {
        assert_eq!(
            weights(&[1.0, 3.0, 5.0, 7.0, 9.0], &[1; 5], 2),
            vec![1.0, 3.0, 5.0, 7.0, 9.0]
        );
        // One CPU: nothing is ever capped.
        assert_eq!(
            weights(&[1.0, 1.0, 1.0, 1.0, 21.0], &[1; 5], 1),
            vec![1.0, 1.0, 1.0, 1.0, 21.0]
        );
        // A threaded entity may use more CPUs.
        assert_eq!(
            weights(&[1.0, 1.0, 1.0, 1.0, 21.0], &[1, 1, 1, 1, 2], 2),
            vec![1.0, 1.0, 1.0, 1.0, 21.0]
        );
    }

    #[test]
    fn capping_repeats() {
        // 4 CPUs, {1,1,10,10}: each 10 wants 10/22 > 1/4, both capped at one CPU; the two 1s
        // then have a CPU each, exactly what they can use: φ = {1,1,1,1}.
        assert_eq!(
            weights(&[1.0, 1.0, 10.0, 10.0], &[1; 4], 4),
            vec![1.0, 1.0, 1.0, 1.0]
        );
        // {1, 1, 10, 10} on 4 CPUs with the 10s two-threaded: 10/22 < 2/4, nothing capped.
        assert_eq!(
            weights(&[1.0, 1.0, 10.0, 10.0], &[1, 1, 2, 2], 4),
            vec![1.0, 1.0, 10.0, 10.0]
        );
        // {1, 4, 20} on 3 CPUs: 20 capped at 1/3 (φ = 2.5), then 4/5 of the 2 free CPUs = 1.6 > 1
        // caps 4 too; 1 alone on 1 CPU: φ = {1, 1, 1}.
        assert_eq!(weights(&[1.0, 4.0, 20.0], &[1; 3], 3), vec![1.0, 1.0, 1.0]);
    }

    #[test]
    fn everyone_capped_gets_its_parallelism() {
        // Two single-threaded entities on 4 CPUs: each runs flat out, φ ∝ par, Σφ = Σshare.
        let d = [Demand { share: 1.0, par: 1 }, Demand { share: 3.0, par: 1 }];
        let f = feasible_weights(&d, 4);
        assert!(f.iter().all(|f| f.capped));
        assert_eq!(f[0].weight, 2.0);
        assert_eq!(f[1].weight, 2.0);
    }

    #[test]
    fn fractions_respect_parallelism() {
        let shares = [1.0, 2.0, 3.0, 50.0, 100.0];
        let par = [1, 1, 2, 1, 3];
        let cpus = 4;
        let w = weights(&shares, &par, cpus);
        let total: f64 = w.iter().sum();
        for (i, &wi) in w.iter().enumerate() {
            assert!(
                wi / total <= f64::from(par[i]) / f64::from(cpus) + 1e-12,
                "{i}: {} > {}",
                wi / total,
                par[i]
            );
        }
    }
}
