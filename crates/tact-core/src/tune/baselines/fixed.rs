//! A static pool: the reference every adaptive limiter is measured against (the spec's sweep of
//! sizes gives X*_max and X*_95).

use super::super::policy::{Event, Policy};
use super::BaselineError;

/// A pool of `n` workers whatever happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fixed {
    n: usize,
}

impl Fixed {
    pub fn new(n: usize) -> Result<Self, BaselineError> {
        if n == 0 {
            return Err(BaselineError::Range {
                field: "n",
                value: 0.0,
                why: "a static pool needs at least one worker",
            });
        }
        Ok(Fixed { n })
    }
}

impl Policy for Fixed {
    fn target(&self) -> usize {
        self.n
    }

    fn on_event(&mut self, _event: Event) -> Option<usize> {
        None
    }
}
