//! One configuration's samples (spec §2.2): trimming of the largest 1% and batch means.
//!
//! A sample is the busy time between two counted completions, in seconds. Batches are formed
//! from consecutive raw samples, b to a batch; a trimmed sample is left out of its batch's mean,
//! and a batch whose samples are all trimmed is left out of the statistics. The trimmed set (the
//! largest ⌊trim·m⌋ of the m raw samples, ties broken by arrival) is kept exact after every
//! sample: a min-heap holds it, a max-heap holds the kept samples above a watermark (the
//! candidates for trimming when ⌊trim·m⌋ grows), and the rest wait in a plain list that is only
//! searched again if the candidates run out. Most samples thus cost O(1), and the statistics
//! are O(1) to read.
//! (The spec's wording, batching the sequence that remains after trimming, would move every later
//! batch boundary whenever the trimmed set changes; the two differ by the ≤ 1% of samples
//! trimmed, and this one keeps batches aligned with the rounds in which n workers finish.)

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// A sample and its position, ordered by value then position.
#[derive(Debug, Clone, Copy)]
struct Key(f64, usize);

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Batch {
    sum: f64,
    kept: u32,
}

/// The statistics a decision reads: the batch means' count, mean and variance (seconds).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    pub batches: u32,
    pub mean: f64,
    pub var: f64,
}

impl Summary {
    pub fn sd(&self) -> f64 {
        self.var.sqrt()
    }

    /// Completions per busy second, from the trimmed mean.
    pub fn throughput(&self) -> f64 {
        if self.mean > 0.0 {
            1.0 / self.mean
        } else {
            f64::INFINITY
        }
    }

    /// The statistics of both sets of batch means together (the pooled mean and variance), as
    /// if they had been one set. Fast mode measures a configuration in several visits, each
    /// with its own sample set (trimmed on its own), and decides on their union.
    pub fn merge(&self, other: &Summary) -> Summary {
        if self.batches == 0 {
            return *other;
        }
        if other.batches == 0 {
            return *self;
        }
        let (na, nb) = (f64::from(self.batches), f64::from(other.batches));
        let n = na + nb;
        let mean = self.mean + (other.mean - self.mean) * nb / n;
        // Sums of squared deviations add, plus the spread between the two means (Chan et al.).
        let ss = self.var * (na - 1.0)
            + other.var * (nb - 1.0)
            + (other.mean - self.mean).powi(2) * na * nb / n;
        Summary {
            batches: self.batches + other.batches,
            mean,
            var: (ss / (n - 1.0)).max(0.0),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SampleSet {
    b: usize,
    trim: f64,
    m: usize,
    raw_sum: f64,
    /// Kept samples at or above `watermark` (max-heap) and below it (unordered).
    top: BinaryHeap<Key>,
    rest: Vec<Key>,
    watermark: Key,
    trimmed: BinaryHeap<Reverse<Key>>,
    batches: Vec<Batch>,
    /// Running sums over complete batches with at least one kept sample, shifted by `pivot` to
    /// keep the variance free of cancellation.
    pivot: Option<f64>,
    s1: f64,
    s2: f64,
    valid: u32,
}

impl SampleSet {
    pub fn new(batch: usize, trim: f64) -> Self {
        SampleSet {
            b: batch.max(1),
            trim,
            m: 0,
            raw_sum: 0.0,
            top: BinaryHeap::new(),
            rest: Vec::new(),
            watermark: Key(f64::INFINITY, usize::MAX),
            trimmed: BinaryHeap::new(),
            batches: Vec::new(),
            pivot: None,
            s1: 0.0,
            s2: 0.0,
            valid: 0,
        }
    }

    pub fn batch_size(&self) -> usize {
        self.b
    }

    /// Raw samples pushed.
    pub fn len(&self) -> usize {
        self.m
    }

    pub fn is_empty(&self) -> bool {
        self.m == 0
    }

    /// Untrimmed completions per busy second (for reports).
    pub fn raw_throughput(&self) -> Option<f64> {
        (self.raw_sum > 0.0).then(|| self.m as f64 / self.raw_sum)
    }

    fn complete(&self, j: usize) -> bool {
        (j + 1) * self.b <= self.m
    }

    fn mean_of(&self, j: usize) -> Option<f64> {
        let b = self.batches[j];
        (b.kept > 0).then(|| b.sum / f64::from(b.kept))
    }

    fn account(&mut self, mean: f64, sign: f64) {
        let k = *self.pivot.get_or_insert(mean);
        let d = mean - k;
        self.s1 += sign * d;
        self.s2 += sign * d * d;
        if sign > 0.0 {
            self.valid += 1;
        } else {
            self.valid -= 1;
        }
    }

    /// Adds or removes a sample from its batch, keeping the running sums right.
    fn change(&mut self, key: Key, add: bool) {
        let j = key.1 / self.b;
        let complete = self.complete(j);
        if complete {
            if let Some(old) = self.mean_of(j) {
                self.account(old, -1.0);
            }
        }
        let batch = &mut self.batches[j];
        if add {
            batch.sum += key.0;
            batch.kept += 1;
        } else {
            batch.sum -= key.0;
            batch.kept -= 1;
            if batch.kept == 0 {
                batch.sum = 0.0;
            }
        }
        if complete {
            if let Some(new) = self.mean_of(j) {
                self.account(new, 1.0);
            }
        }
    }

    /// Files a kept sample with the candidates or the rest.
    fn keep(&mut self, key: Key) {
        if key >= self.watermark {
            self.top.push(key);
        } else {
            self.rest.push(key);
        }
    }

    /// The largest kept sample, taken out of the kept set.
    fn pop_kept(&mut self) -> Option<Key> {
        if self.top.is_empty() && !self.rest.is_empty() {
            // Move the largest 1/64 of the rest (at least 16) to the candidates.
            let n = self.rest.len();
            let take = (n / 64).max(16).min(n);
            self.rest.select_nth_unstable(n - take);
            self.top.extend(self.rest.drain(n - take..));
            self.watermark = *self.top.iter().min().expect("not empty");
        }
        self.top.pop()
    }

    pub fn push(&mut self, x: f64) {
        let pos = self.m;
        let j = pos / self.b;
        if self.batches.len() <= j {
            self.batches.push(Batch::default());
        }
        self.raw_sum += x;
        let key = Key(x, pos);
        self.change(key, true);
        self.m += 1;
        if self.complete(j) {
            if let Some(mean) = self.mean_of(j) {
                self.account(mean, 1.0);
            }
        }
        // The new sample belongs in the trimmed set if it beats its smallest member.
        match self.trimmed.peek() {
            Some(&Reverse(low)) if key > low => {
                self.trimmed.pop();
                self.change(key, false);
                self.trimmed.push(Reverse(key));
                self.change(low, true);
                self.keep(low);
            }
            _ => self.keep(key),
        }
        let k = (self.trim * self.m as f64).floor() as usize;
        while self.trimmed.len() < k {
            let Some(top) = self.pop_kept() else { break };
            self.change(top, false);
            self.trimmed.push(Reverse(top));
        }
    }

    /// Mean and variance of the complete batches' means.
    pub fn summary(&self) -> Summary {
        let n = f64::from(self.valid);
        if self.valid == 0 {
            return Summary {
                batches: 0,
                mean: 0.0,
                var: 0.0,
            };
        }
        let k = self.pivot.unwrap_or(0.0);
        let mean = k + self.s1 / n;
        let var = if self.valid > 1 {
            ((self.s2 - self.s1 * self.s1 / n) / (n - 1.0)).max(0.0)
        } else {
            0.0
        };
        Summary {
            batches: self.valid,
            mean,
            var,
        }
    }

    /// Lag-1 autocorrelation of the complete batches' means, in order (0 when undefined).
    pub fn autocorrelation(&self) -> f64 {
        let means: Vec<f64> = (0..self.batches.len())
            .filter(|&j| self.complete(j))
            .filter_map(|j| self.mean_of(j))
            .collect();
        if means.len() < 3 {
            return 0.0;
        }
        let n = means.len() as f64;
        let mu = means.iter().sum::<f64>() / n;
        let den: f64 = means.iter().map(|x| (x - mu).powi(2)).sum();
        if den <= 0.0 {
            return 0.0;
        }
        let num: f64 = means.windows(2).map(|w| (w[0] - mu) * (w[1] - mu)).sum();
        num / den
    }

    /// Doubles the batch size: consecutive pairs of batches merge.
    pub fn double_batch(&mut self) {
        self.b *= 2;
        let merged: Vec<Batch> = self
            .batches
            .chunks(2)
            .map(|pair| {
                pair.iter().fold(Batch::default(), |acc, b| Batch {
                    sum: acc.sum + b.sum,
                    kept: acc.kept + b.kept,
                })
            })
            .collect();
        self.batches = merged;
        self.pivot = None;
        self.s1 = 0.0;
        self.s2 = 0.0;
        self.valid = 0;
        for j in 0..self.batches.len() {
            if self.complete(j) {
                if let Some(mean) = self.mean_of(j) {
                    self.account(mean, 1.0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn trims_exactly_the_largest_percent() {
        let mut set = SampleSet::new(4, 0.01);
        for i in 0..1000 {
            set.push(if i < 10 { 1000.0 } else { 1.0 });
        }
        // 10 trimmed: the ten 1000 s samples, so the batch means are all 1.
        let s = set.summary();
        assert_eq!(s.mean, 1.0);
        assert_eq!(s.var, 0.0);
        assert_eq!(
            s.batches, 248,
            "the first 10 samples fill 2.5 batches, 2 of them empty"
        );
        assert_eq!(set.raw_throughput(), Some(1000.0 / (10.0 * 1000.0 + 990.0)));
    }

    #[test]
    fn merged_summaries_equal_one_set() {
        let mut seed = 11;
        let xs: Vec<f64> = (0..800).map(|_| lcg(&mut seed)).collect();
        let (a, b) = xs.split_at(320);
        let stats = |xs: &[f64]| {
            let mut set = SampleSet::new(1, 0.0);
            xs.iter().for_each(|&x| set.push(x));
            set.summary()
        };
        let (whole, merged) = (stats(&xs), stats(a).merge(&stats(b)));
        assert_eq!(merged.batches, whole.batches);
        assert!((merged.mean - whole.mean).abs() < 1e-12);
        assert!((merged.var - whole.var).abs() < 1e-12);
        let empty = SampleSet::new(1, 0.0).summary();
        assert_eq!(empty.merge(&whole), whole);
        assert_eq!(whole.merge(&empty), whole);
    }

    #[test]
    fn autocorrelation_sees_alternation() {
        let mut set = SampleSet::new(1, 0.0);
        for i in 0..100 {
            set.push(if i % 20 < 10 { 1.0 } else { 2.0 });
        }
        assert!(set.autocorrelation() > 0.7);
        let mut flat = SampleSet::new(1, 0.0);
        for _ in 0..100 {
            flat.push(1.0);
        }
        assert_eq!(flat.autocorrelation(), 0.0);
    }
}
