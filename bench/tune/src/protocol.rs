//! The service's wire protocol: one text line per request and per reply, over a kept-alive
//! loopback TCP connection (one connection per driver worker, so the service's thread per
//! connection is also a thread per in-flight request, and no TIME_WAIT sockets pile up at
//! thousands of requests a second).
//!
//! | request | reply |
//! | --- | --- |
//! | `R` | `K` once the request's work is done, followed by the service's `--reply-bytes` of padding on the same line |
//! | `S` | `CPU_NS REQUESTS MODE`: the service's process CPU time, requests served, current mode |
//! | `M SPEC` | `K` after switching to mode SPEC (see [`crate::mode`]), or `E MESSAGE` |

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One parsed request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Work,
    Stats,
    Mode(String),
}

impl Request {
    pub fn parse(line: &str) -> Result<Request, String> {
        let line = line.trim_end();
        match line {
            "R" => Ok(Request::Work),
            "S" => Ok(Request::Stats),
            _ => match line.strip_prefix("M ") {
                Some(spec) if !spec.trim().is_empty() => Ok(Request::Mode(spec.trim().to_string())),
                _ => Err(format!(
                    "unknown request {line:?} (expected R, S or M SPEC)"
                )),
            },
        }
    }
}

/// The reply to `R`: `K`, `padding` bytes of filler (replies big enough to fill a shaped link,
/// spec X4), newline. The filler is never a newline, so a reply stays one line.
pub fn work_reply(padding: usize) -> String {
    format!("K{}\n", "x".repeat(padding))
}

/// What `S` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceStats {
    pub cpu: Duration,
    pub requests: u64,
    pub mode: String,
}

impl ServiceStats {
    pub fn line(&self) -> String {
        format!("{} {} {}\n", self.cpu.as_nanos(), self.requests, self.mode)
    }

    pub fn parse(line: &str) -> Result<ServiceStats, String> {
        let mut f = line.split_whitespace();
        let bad = || format!("bad stats reply {line:?}");
        let cpu: u64 = f.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
        let requests = f.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
        let mode = f.collect::<Vec<_>>().join(" ");
        Ok(ServiceStats {
            cpu: Duration::from_nanos(cpu),
            requests,
            mode,
        })
    }
}

/// A connection to the service.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    line: String,
}

impl Client {
    pub fn connect(addr: &str) -> io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        // One small message each way per request: Nagle would only add delay.
        stream.set_nodelay(true)?;
        Ok(Client {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            line: String::new(),
        })
    }

    fn call(&mut self, msg: &str) -> io::Result<&str> {
        self.writer.write_all(msg.as_bytes())?;
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the service closed the connection",
            ));
        }
        Ok(self.line.trim_end())
    }

    /// One unit of work; returns when the service has replied.
    pub fn request(&mut self) -> io::Result<()> {
        let reply = self.call("R\n")?;
        match reply.strip_prefix('K') {
            Some(pad) if pad.bytes().all(|b| b == b'x') => Ok(()),
            _ => Err(io::Error::other(format!(
                "unexpected reply {:?}",
                reply.chars().take(80).collect::<String>()
            ))),
        }
    }

    pub fn stats(&mut self) -> io::Result<ServiceStats> {
        let line = self.call("S\n")?;
        ServiceStats::parse(line).map_err(io::Error::other)
    }

    pub fn set_mode(&mut self, spec: &str) -> io::Result<()> {
        let reply = self.call(&format!("M {spec}\n"))?;
        match reply {
            "K" => Ok(()),
            other => Err(io::Error::other(
                other.strip_prefix("E ").unwrap_or(other).to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        assert_eq!(Request::parse("R\n"), Ok(Request::Work));
        assert_eq!(Request::parse("S"), Ok(Request::Stats));
        assert_eq!(
            Request::parse("M memory:64\n"),
            Ok(Request::Mode("memory:64".into()))
        );
        assert!(Request::parse("M \n").is_err());
        assert!(Request::parse("X").is_err());
    }

    #[test]
    fn work_replies_carry_their_padding_on_one_line() {
        assert_eq!(work_reply(0), "K\n");
        let r = work_reply(65536);
        assert_eq!(r.len(), 65538);
        assert_eq!(r.lines().count(), 1);
    }

    #[test]
    fn stats_round_trip() {
        let s = ServiceStats {
            cpu: Duration::from_nanos(1_234_567_890),
            requests: 42,
            mode: "disk:/tmp/a b".into(),
        };
        assert_eq!(ServiceStats::parse(&s.line()), Ok(s));
        assert!(ServiceStats::parse("12").is_err());
    }
}
