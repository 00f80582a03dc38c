//! Testpoints that are not due, kept on the Python side of the GIL.
//!
//! A testpoint that blocks (waiting for the unit's turn of the run token, or serving a
//! suspension) must not hold the GIL: every other thread of the program would stop with it,
//! including the regulated thread that holds the token and has to reach its own testpoint to
//! hand it over. Releasing the GIL on every call is no answer either: while another thread is
//! busy, taking it back can cost a switch interval (5 ms). tact-lib's calls do not say whether
//! they will block, so a [`Batch`] keeps the progress of calls that cannot (same index as the
//! last call, testpoint period not over), holding the GIL, and hands it to tact-lib without the
//! GIL when it may block: the first call of a unit, a change of index, and once per period.
//!
//! tact-lib restarts a unit's period when the unit gets the token back, which is when a
//! hand-over returns, so a batch restarts its own period there too and tact-lib sees each
//! period's progress at its due time. Progress of an index is handed over as soon as another
//! index follows it, so that tact-lib judges mixed-index periods (phases) as it would
//! have without the batch.

use std::time::Duration;

use tact_lib::{check_progress, clock, Error, ObsError};

/// A unit's progress not yet handed to tact-lib.
#[derive(Debug)]
pub(crate) struct Batch {
    /// [`clock::coarse_ns`] time from which the next call is handed over; 0 before the first.
    due: u64,
    /// Progress of the index of the last call, since the last hand-over.
    kept: Option<Kept>,
    /// Metric count of every index tact-lib accepted from this unit.
    counts: Vec<(u32, usize)>,
}

#[derive(Debug)]
struct Kept {
    index: u32,
    dp: Vec<f64>,
    /// Some call added progress since the last hand-over.
    touched: bool,
}

impl Batch {
    pub(crate) const fn new() -> Self {
        Batch {
            due: 0,
            kept: None,
            counts: Vec::new(),
        }
    }

    /// The fast path: checks a call (as tact-lib would) and keeps its progress if tact-lib need
    /// not see it yet. `Ok(false)`: nothing was kept, [`hand_over`](Self::hand_over) the call.
    #[inline]
    pub(crate) fn keep(&mut self, index: u32, metrics: &[f64]) -> Result<bool, ObsError> {
        check_progress(index, metrics)?;
        if let Some(&(_, expected)) = self.counts.iter().find(|(i, _)| *i == index) {
            if expected != metrics.len() {
                return Err(ObsError::MetricCount {
                    index,
                    expected,
                    got: metrics.len(),
                });
            }
        }
        match &mut self.kept {
            Some(k) if k.index == index && clock::coarse_ns() < self.due => {
                k.dp.iter_mut().zip(metrics).for_each(|(a, m)| *a += m);
                k.touched = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// [`keep`](Self::keep), else hands the kept progress and this call to tact-lib through
    /// `send` (which may block: call it without the GIL).
    pub(crate) fn testpoint(
        &mut self,
        index: u32,
        metrics: &[f64],
        period: Duration,
        send: impl FnMut(u32, &[f64]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if self.keep(index, metrics)? {
            return Ok(());
        }
        self.hand_over(index, metrics, period, send)
    }

    fn hand_over(
        &mut self,
        index: u32,
        metrics: &[f64],
        period: Duration,
        mut send: impl FnMut(u32, &[f64]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let period_over = clock::coarse_ns() >= self.due;
        // Another index's progress was made before this call's: it goes first.
        if let Some(k) = self.kept.take_if(|k| k.index != index) {
            if k.touched {
                send(k.index, &k.dp)?;
            }
        }
        let sent = match &mut self.kept {
            Some(k) => {
                k.dp.iter_mut().zip(metrics).for_each(|(a, m)| *a += m);
                let sent = send(index, &k.dp);
                k.dp.fill(0.0);
                k.touched = false;
                sent
            }
            None => {
                let sent = send(index, metrics);
                if sent.is_ok() {
                    if !self.counts.iter().any(|(i, _)| *i == index) {
                        self.counts.push((index, metrics.len()));
                    }
                    self.kept = Some(Kept {
                        index,
                        dp: vec![0.0; metrics.len()],
                        touched: false,
                    });
                }
                sent
            }
        };
        // An index change inside the period leaves the period as it was.
        if period_over {
            let period = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
            self.due = clock::now_ns().saturating_add(period);
        }
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    type Sent = Vec<(u32, Vec<f64>)>;

    /// Makes the calls within one period; returns what was handed over.
    fn run(batch: &mut Batch, calls: &[(u32, &[f64])]) -> Sent {
        let mut sent = Vec::new();
        for &(index, metrics) in calls {
            let send = |i: u32, dp: &[f64]| {
                sent.push((i, dp.to_vec()));
                Ok(())
            };
            batch.testpoint(index, metrics, HOUR, send).unwrap();
        }
        sent
    }

    #[test]
    fn keeps_calls_within_the_period_and_hands_over_at_index_changes() {
        let mut b = Batch::new();
        let sent = run(
            &mut b,
            &[
                (0, &[1.0]),
                (0, &[2.0]),
                (0, &[3.0]),
                (1, &[5.0, 6.0]),
                (1, &[1.0, 1.0]),
                (0, &[4.0]),
            ],
        );
        let expected: Sent = vec![
            (0, vec![1.0]),
            (0, vec![5.0]),
            (1, vec![5.0, 6.0]),
            (1, vec![1.0, 1.0]),
            (0, vec![4.0]),
        ];
        assert_eq!(sent, expected);
    }

    #[test]
    fn a_due_call_hands_over_the_kept_progress_and_restarts_the_period() {
        let mut b = Batch::new();
        run(&mut b, &[(0, &[1.0, 0.0]), (0, &[2.0, 1.0])]);
        b.due = 0;
        assert_eq!(run(&mut b, &[(0, &[3.0, 1.0])]), vec![(0, vec![5.0, 2.0])]);
        assert!(b.due > clock::now_ns() + HOUR.as_nanos() as u64 / 2);
        assert_eq!(run(&mut b, &[(0, &[1.0, 1.0])]), vec![]);
    }

    #[test]
    fn bad_calls_fail_at_once_and_leave_no_trace() {
        let mut b = Batch::new();
        run(&mut b, &[(0, &[1.0])]);
        assert!(matches!(
            b.keep(0, &[f64::NAN]),
            Err(ObsError::BadMetric { metric: 0, .. })
        ));
        assert!(matches!(
            b.keep(0, &[-1.0]),
            Err(ObsError::BadMetric { metric: 0, .. })
        ));
        assert_eq!(b.keep(0, &[]), Err(ObsError::NoMetrics { index: 0 }));
        assert_eq!(
            b.keep(0, &[1.0, 2.0]),
            Err(ObsError::MetricCount {
                index: 0,
                expected: 1,
                got: 2
            })
        );
        b.due = 0;
        assert_eq!(run(&mut b, &[(0, &[1.0])]), vec![(0, vec![1.0])]);
    }

    #[test]
    fn an_index_tact_lib_refuses_is_not_kept() {
        let mut b = Batch::new();
        run(&mut b, &[(0, &[1.0])]);
        let refuse = |index, _: &[f64]| {
            Err(Error::Progress(ObsError::MetricCount {
                index,
                expected: 1,
                got: 2,
            }))
        };
        assert!(b.testpoint(1, &[1.0, 2.0], HOUR, refuse).is_err());
        assert!(b.testpoint(1, &[1.0, 2.0], HOUR, refuse).is_err());
        assert_eq!(run(&mut b, &[(0, &[2.0])]), vec![(0, vec![2.0])]);
    }
}
