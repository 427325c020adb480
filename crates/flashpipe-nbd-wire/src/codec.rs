//! The field codec under every message: [`WireError`], [`FieldReader`] over a byte slice,
//! bounded strings, big-endian writers, and whole reads from a [`Read`] with the bound
//! applied before the payload is read.

use std::io::Read;

use thiserror::Error;

use crate::constants::*;

/// What is wrong with a message, named by the field and the limit it broke.
#[derive(Debug, Error)]
pub enum WireError {
    /// Fewer bytes than the message needs.
    #[error("{message}: {length_bytes} bytes, at least {needed_bytes} needed")]
    TooShort {
        /// The message or field.
        message: &'static str,
        /// Bytes there were.
        length_bytes: usize,
        /// Bytes needed.
        needed_bytes: usize,
    },
    /// A length beyond its bound.
    #[error("{field}: {length_bytes} bytes, limit {limit_bytes}")]
    TooLong {
        /// The field.
        field: &'static str,
        /// The length sent.
        length_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// A count beyond its bound.
    #[error("{field}: {count}, limit {limit}")]
    TooMany {
        /// The field.
        field: &'static str,
        /// The count sent.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// A magic number other than the expected one.
    #[error("{field}: magic {found:#x}, expected {expected:#x}")]
    BadMagic {
        /// The field.
        field: &'static str,
        /// The expected magic.
        expected: u64,
        /// What came.
        found: u64,
    },
    /// Bytes left over after the last field of a fixed-layout message.
    #[error("{message}: {extra_bytes} bytes after its last field")]
    TrailingBytes {
        /// The message.
        message: &'static str,
        /// How many bytes were left.
        extra_bytes: usize,
    },
    /// A string that is not UTF-8 or holds a NUL.
    #[error("{field}: not a valid string (UTF-8 without NUL)")]
    BadString {
        /// The field.
        field: &'static str,
    },
    /// A field whose value the specification forbids.
    #[error("{field}: {detail}")]
    BadValue {
        /// The field.
        field: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// The stream failed or ended.
    #[error("{message}: {source}")]
    Io {
        /// The message being read.
        message: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Reads big-endian fields off a byte slice, each read bounded, never panicking.
#[derive(Debug)]
pub struct FieldReader<'a> {
    bytes: &'a [u8],
    message: &'static str,
}

impl<'a> FieldReader<'a> {
    /// A reader over `bytes`, naming `message` in its errors.
    pub fn new(bytes: &'a [u8], message: &'static str) -> FieldReader<'a> {
        FieldReader { bytes, message }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The next `length_bytes` bytes.
    pub fn take(&mut self, length_bytes: usize) -> Result<&'a [u8], WireError> {
        if length_bytes > self.bytes.len() {
            return Err(WireError::TooShort {
                message: self.message,
                length_bytes: self.bytes.len(),
                needed_bytes: length_bytes,
            });
        }
        let (head, tail) = self.bytes.split_at(length_bytes);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    /// The next big-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// The next big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// The next big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// A string of `length_bytes` bytes, checked against [`MAX_STRING_BYTES`].
    pub fn string(
        &mut self,
        length_bytes: usize,
        field: &'static str,
    ) -> Result<String, WireError> {
        check_string_length(length_bytes, field)?;
        let bytes = self.take(length_bytes)?;
        decode_string(bytes, field)
    }

    /// A string of a 32-bit length prefix.
    pub fn prefixed_string(&mut self, field: &'static str) -> Result<String, WireError> {
        let length_bytes = self.u32()? as usize;
        self.string(length_bytes, field)
    }

    /// The rest of the bytes as a string.
    pub fn rest_as_string(&mut self, field: &'static str) -> Result<String, WireError> {
        let length_bytes = self.remaining();
        self.string(length_bytes, field)
    }

    /// Fails if any bytes are left.
    pub fn finish(self) -> Result<(), WireError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(WireError::TrailingBytes {
                message: self.message,
                extra_bytes: self.bytes.len(),
            })
        }
    }
}

pub(crate) fn check_string_length(
    length_bytes: usize,
    field: &'static str,
) -> Result<(), WireError> {
    if length_bytes > MAX_STRING_BYTES {
        return Err(WireError::TooLong {
            field,
            length_bytes: length_bytes as u64,
            limit_bytes: MAX_STRING_BYTES as u64,
        });
    }
    Ok(())
}

/// Checks a string's bytes: UTF-8, no NUL.
pub fn decode_string(bytes: &[u8], field: &'static str) -> Result<String, WireError> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => Ok(text.to_string()),
        _ => Err(WireError::BadString { field }),
    }
}

pub(crate) fn put_u16(output: &mut Vec<u8>, value: u16) {
    output.extend_from_slice(&value.to_be_bytes());
}

pub(crate) fn put_u32(output: &mut Vec<u8>, value: u32) {
    output.extend_from_slice(&value.to_be_bytes());
}

pub(crate) fn put_u64(output: &mut Vec<u8>, value: u64) {
    output.extend_from_slice(&value.to_be_bytes());
}

/// A string's length as a 32-bit field; strings are bounded by [`MAX_STRING_BYTES`]
/// when built, so this cannot overflow for the strings this module encodes.
pub(crate) fn string_length_u32(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

pub(crate) fn put_prefixed_string(output: &mut Vec<u8>, text: &str) {
    put_u32(output, string_length_u32(text));
    output.extend_from_slice(text.as_bytes());
}

/// Reads exactly `buffer.len()` bytes, naming `message` when the stream fails or ends.
pub fn read_exact_or(
    reader: &mut impl Read,
    buffer: &mut [u8],
    message: &'static str,
) -> Result<(), WireError> {
    reader
        .read_exact(buffer)
        .map_err(|source| WireError::Io { message, source })
}

pub(crate) fn read_bounded(
    reader: &mut impl Read,
    length_bytes: usize,
    limit_bytes: usize,
    field: &'static str,
) -> Result<Vec<u8>, WireError> {
    if length_bytes > limit_bytes {
        return Err(WireError::TooLong {
            field,
            length_bytes: length_bytes as u64,
            limit_bytes: limit_bytes as u64,
        });
    }
    let mut data = vec![0u8; length_bytes];
    read_exact_or(reader, &mut data, field)?;
    Ok(data)
}

pub(crate) fn expect_u64(
    reader: &mut FieldReader<'_>,
    expected: u64,
    field: &'static str,
) -> Result<(), WireError> {
    check_magic(field, expected, reader.u64()?)
}

pub(crate) fn expect_u32(
    reader: &mut FieldReader<'_>,
    expected: u32,
    field: &'static str,
) -> Result<(), WireError> {
    check_magic(field, u64::from(expected), u64::from(reader.u32()?))
}

/// A magic number as read: `found` must be `expected`.
fn check_magic(field: &'static str, expected: u64, found: u64) -> Result<(), WireError> {
    if found != expected {
        return Err(WireError::BadMagic {
            field,
            expected,
            found,
        });
    }
    Ok(())
}
