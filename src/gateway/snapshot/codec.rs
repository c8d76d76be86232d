//! The snapshot's primitives: LEB128 integers, little-endian fixed-width
//! numbers and length-prefixed UTF-8 strings, and a reader that refuses
//! truncated or impossible input with the byte where it went wrong.

use crate::error::{Error, Result};

pub(super) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn uint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.0.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }

    pub fn f64(&mut self, f: f64) {
        self.0.extend_from_slice(&f.to_le_bytes());
    }

    pub fn str(&mut self, s: &str) {
        self.uint(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    /// A flag byte, then `write` for `Some`: every optional part of a
    /// record is written this way.
    pub fn opt<T>(&mut self, value: Option<T>, write: impl FnOnce(&mut Self, T)) {
        match value {
            None => self.0.push(0),
            Some(value) => {
                self.0.push(1);
                write(self, value);
            }
        }
    }

    pub fn opt_uint(&mut self, n: Option<u64>) {
        self.opt(n, Self::uint);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }

    pub fn opt_f64(&mut self, f: Option<f64>) {
        self.opt(f, Self::f64);
    }
}

pub(super) struct Reader<'a> {
    pub bytes: &'a [u8],
    pub at: usize,
}

impl Reader<'_> {
    pub fn truncated(&self) -> Error {
        Error::invalid(format!("snapshot is truncated at byte {}", self.at))
    }

    pub fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.truncated())?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn uint(&mut self) -> Result<u64> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Error::invalid(format!(
            "snapshot has an integer longer than 64 bits at byte {}",
            self.at
        )))
    }

    pub fn positive(&mut self) -> Result<u64> {
        match self.uint()? {
            0 => Err(Error::invalid(format!(
                "snapshot has a zero where a rule needs a positive number, at byte {}",
                self.at
            ))),
            n => Ok(n),
        }
    }

    /// A count of items; each takes at least one byte, so a count larger
    /// than the bytes left is corrupt, not a reason to allocate.
    pub fn len(&mut self) -> Result<u64> {
        let n = self.uint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(self.truncated());
        }
        Ok(n)
    }

    /// A count kept in 32 bits: a larger one is no state this build wrote.
    pub fn small(&mut self) -> Result<u32> {
        let n = self.uint()?;
        u32::try_from(n).map_err(|_| Error::invalid(format!("snapshot count {n} is out of range")))
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub fn f64(&mut self) -> Result<f64> {
        let f = f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"));
        if f.is_finite() {
            Ok(f)
        } else {
            Err(Error::invalid(format!(
                "snapshot has a non-finite number at byte {}",
                self.at - 8
            )))
        }
    }

    pub fn str(&mut self) -> Result<String> {
        let n = self.len()? as usize;
        let at = self.at;
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| Error::invalid(format!("snapshot has invalid UTF-8 at byte {at}")))
    }

    /// What `Writer::opt` wrote: `None` for a zero flag byte, else `read`.
    pub fn opt<T>(&mut self, read: impl FnOnce(&mut Self) -> Result<T>) -> Result<Option<T>> {
        match self.byte()? {
            0 => Ok(None),
            _ => read(self).map(Some),
        }
    }

    pub fn opt_uint(&mut self) -> Result<Option<u64>> {
        self.opt(Self::uint)
    }

    pub fn opt_f64(&mut self) -> Result<Option<f64>> {
        self.opt(Self::f64)
    }
}
