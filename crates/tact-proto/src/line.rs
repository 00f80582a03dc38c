//! Reading newline-delimited messages with a hard size limit, so that a peer that never sends a
//! newline cannot make the reader buffer without end.

use std::io::{self, BufRead, BufReader, Read};

/// What [`LineReader::read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// One message, without its newline.
    Message(Vec<u8>),
    /// More than the limit before a newline. The rest of that line is not read: the stream is
    /// out of step and should be closed.
    TooLong,
    /// The peer closed the stream (an unfinished last line is dropped).
    Eof,
}

/// Reads lines of at most `limit` bytes (newline excluded) from `inner`.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: BufReader<R>,
    limit: usize,
}

impl<R: Read> LineReader<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        LineReader {
            inner: BufReader::new(inner),
            limit,
        }
    }

    /// The next line. An I/O error (a read timeout included) may lose a partly read line, so
    /// the caller should give up on the stream after one.
    pub fn read_line(&mut self) -> io::Result<Line> {
        let mut buf = Vec::new();
        let limit = self.limit as u64 + 1;
        let n = (&mut self.inner).take(limit).read_until(b'\n', &mut buf)?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            return Ok(Line::Message(buf));
        }
        if n as u64 == limit {
            return Ok(Line::TooLong);
        }
        Ok(Line::Eof)
    }

    /// The reader inside.
    pub fn get_ref(&self) -> &R {
        self.inner.get_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut r = LineReader::new(input, limit);
        let mut out = Vec::new();
        loop {
            let line = r.read_line().unwrap();
            let end = line == Line::Eof || line == Line::TooLong;
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn splits_and_limits() {
        use Line::*;
        assert_eq!(
            lines(b"ab\n\ncd\nef", 4),
            vec![
                Message(b"ab".to_vec()),
                Message(vec![]),
                Message(b"cd".to_vec()),
                Eof
            ]
        );
        // Exactly the limit is fine; one more byte is not.
        assert_eq!(lines(b"abcd\n", 4), vec![Message(b"abcd".to_vec()), Eof]);
        assert_eq!(lines(b"abcde\n", 4), vec![TooLong]);
        assert_eq!(lines(b"abcde", 4), vec![TooLong]);
    }
}
