//! The share loop's quantum timer (spec proportional-share §4): a periodic `timerfd` on
//! `CLOCK_MONOTONIC` whose read returns how many periods have passed since the last read. That
//! count is the engine's `ticks`: above 1 means quanta were missed (an overrun, reported as loss
//! of control), and they still count as elapsed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::clock_gettime;

use crate::error::{Error, Result};

/// A periodic timer. The fd is non-blocking and close-on-exec; it can be polled together with a
/// signalfd (it is readable when at least one period has passed). Ticks are at fixed times,
/// `k·period` after the start, so that [`Ticker::skip`] can let some pass without a wake-up and
/// still count them.
#[derive(Debug)]
pub struct Ticker {
    fd: TimerFd,
    period: Duration,
    /// `CLOCK_MONOTONIC` at the start: tick k is due at `start + k·period`.
    start: TimeSpec,
    /// Ticks counted by `take` so far.
    taken: u64,
    /// The tick the fd's next expiration stands for: the fd counts expirations from there.
    next: u64,
    /// Periods that passed beyond the first between two reads, summed.
    overruns: u64,
}

impl Ticker {
    /// Starts a timer that expires every `period`, the first time one period from now.
    pub fn new(period: Duration) -> Result<Ticker> {
        if period.is_zero() {
            return Err(timer_error(
                "timerfd_settime",
                io::Error::new(io::ErrorKind::InvalidInput, "the period must be above zero"),
            ));
        }
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(|e| timer_error("timerfd_create", e.into()))?;
        let start = clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
            .map_err(|e| timer_error("clock_gettime", e.into()))?;
        let mut ticker = Ticker {
            fd,
            period,
            start,
            taken: 0,
            next: 1,
            overruns: 0,
        };
        ticker.arm(1)?;
        Ok(ticker)
    }

    /// Expire at tick `first`, then every period.
    fn arm(&mut self, first: u64) -> Result<()> {
        let ns = self.period.as_nanos().saturating_mul(u128::from(first));
        let at = self.start + TimeSpec::from_duration(Duration::from_nanos(ns as u64));
        self.fd
            .set(
                Expiration::IntervalDelayed(at, TimeSpec::from_duration(self.period)),
                TimerSetTimeFlags::TFD_TIMER_ABSTIME,
            )
            .map_err(|e| timer_error("timerfd_settime", e.into()))?;
        self.next = first;
        Ok(())
    }

    /// Lets the next `n` ticks pass without the fd becoming readable: it is readable again at
    /// the tick after them (at once if that is past), and [`Ticker::take`] then counts the
    /// skipped ticks too. Neither they nor a tick already due but not taken count as overruns.
    pub fn skip(&mut self, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.arm(self.taken + n + 1)
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Blocks until at least one period has passed since the last read and returns how many
    /// (≥ 1). Retries on EINTR.
    pub fn wait(&mut self) -> Result<u64> {
        loop {
            let ticks = self.take()?;
            if ticks > 0 {
                return Ok(ticks);
            }
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(timer_error("poll", e.into())),
            }
        }
    }

    /// The periods passed since the last read (skipped ones included), without blocking: 0 if
    /// none has.
    pub fn take(&mut self) -> Result<u64> {
        let mut buf = [0u8; 8];
        loop {
            match nix::unistd::read(self.fd.as_fd().as_raw_fd(), &mut buf) {
                Ok(8) => {
                    // Expirations since the fd was armed or last read, from tick `next` on.
                    let expirations = u64::from_ne_bytes(buf);
                    if expirations == 0 {
                        return Ok(0);
                    }
                    let last = self.next + expirations - 1;
                    let ticks = last - self.taken;
                    self.overruns += expirations - 1;
                    self.taken = last;
                    self.next = last + 1;
                    return Ok(ticks);
                }
                Ok(n) => {
                    return Err(timer_error(
                        "read",
                        io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            format!("read {n} bytes, expected 8"),
                        ),
                    ))
                }
                Err(Errno::EAGAIN) => return Ok(0),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(timer_error("read", e.into())),
            }
        }
    }

    /// Periods missed so far: the sum over reads of (count − 1), skipped periods left out.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }
}

impl AsFd for Ticker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A one-shot timer for wake-ups between a [`Ticker`]'s periods (`tact share`'s sub-quantum
/// checks): a non-blocking, close-on-exec `timerfd` on `CLOCK_MONOTONIC`, readable once it has
/// expired.
#[derive(Debug)]
pub struct Alarm {
    fd: TimerFd,
}

impl Alarm {
    /// A disarmed alarm.
    pub fn new() -> Result<Alarm> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(|e| timer_error("timerfd_create", e.into()))?;
        Ok(Alarm { fd })
    }

    /// Expire once, `after` from now, replacing any earlier setting (a zero delay expires at
    /// once rather than disarming).
    pub fn set(&mut self, after: Duration) -> Result<()> {
        let after = after.max(Duration::from_nanos(1));
        self.fd
            .set(
                Expiration::OneShot(TimeSpec::from_duration(after)),
                TimerSetTimeFlags::empty(),
            )
            .map_err(|e| timer_error("timerfd_settime", e.into()))
    }

    /// Whether it expired since it was set, without blocking; an expiration is reported once.
    pub fn take(&mut self) -> Result<bool> {
        let mut buf = [0u8; 8];
        loop {
            match nix::unistd::read(self.fd.as_fd().as_raw_fd(), &mut buf) {
                Ok(_) => return Ok(true),
                Err(Errno::EAGAIN) => return Ok(false),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(timer_error("read", e.into())),
            }
        }
    }
}

impl AsFd for Alarm {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn timer_error(op: &str, e: io::Error) -> Error {
    Error::io(format!("timerfd ({op})"), e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn an_alarm_expires_once() {
        let mut a = Alarm::new().unwrap();
        assert!(!a.take().unwrap());
        let start = Instant::now();
        let wait = |a: &Alarm| {
            let mut fds = [PollFd::new(a.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::from(5_000u16)).unwrap();
        };
        a.set(Duration::from_millis(3)).unwrap();
        wait(&a);
        assert!(start.elapsed() >= Duration::from_millis(2));
        assert!(a.take().unwrap());
        assert!(!a.take().unwrap());
        // Set again, then replaced by a sooner setting before it expires.
        a.set(Duration::from_secs(60)).unwrap();
        a.set(Duration::ZERO).unwrap();
        wait(&a);
        assert!(a.take().unwrap());
    }

    #[test]
    fn a_skipped_tick_does_not_wake() {
        let mut t = Ticker::new(Duration::from_millis(10)).unwrap();
        t.wait().unwrap();
        let before = t.overruns();
        // A second of ticks to skip: the fd stays unreadable meanwhile, however late this runs.
        t.skip(100).unwrap();
        assert_eq!(t.take().unwrap(), 0);
        let ticks = t.wait().unwrap();
        assert!(ticks >= 101, "{ticks}");
        assert_eq!(t.overruns() - before, ticks - 101);
    }

    #[test]
    fn counts_periods_and_overruns() {
        let mut t = Ticker::new(Duration::from_millis(5)).unwrap();
        assert_eq!(t.period(), Duration::from_millis(5));
        let start = Instant::now();
        assert!(t.wait().unwrap() >= 1);
        assert!(start.elapsed() >= Duration::from_millis(4));
        // Sleep through several periods: one read reports all of them.
        std::thread::sleep(Duration::from_millis(30));
        let ticks = t.wait().unwrap();
        assert!(ticks >= 5, "{ticks}");
        assert!(t.overruns() >= 4);
        // Skipped periods count, as ticks but not as overruns.
        let before = t.overruns();
        t.skip(3).unwrap();
        let ticks = t.wait().unwrap();
        assert!(ticks >= 4, "{ticks}");
        assert_eq!(t.overruns() - before, ticks - 4);
        assert!(Ticker::new(Duration::ZERO)
            .unwrap_err()
            .to_string()
            .contains("timerfd"));
    }
}
