//! Little-endian primitives of frame bodies: a writer appending fields and a reader
//! taking them back, every read bounds-checked and every length checked against its
//! limit before anything is allocated; each error names the field.

use crate::error::DecodeError;

/// Appends fields to a frame body.
pub(crate) struct Writer {
    pub(crate) bytes: Vec<u8>,
}

impl Writer {
    pub(crate) fn u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    pub(crate) fn u16(&mut self, value: u16) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, value: u32) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, value: u64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    pub(crate) fn bool(&mut self, value: bool) {
        self.u8(u8::from(value));
    }

    /// A u32 length, then the bytes.
    pub(crate) fn bytes(&mut self, value: &[u8]) {
        let length = u32::try_from(value.len()).expect("frame fields are below 4 GiB");
        self.u32(length);
        self.bytes.extend_from_slice(value);
    }

    /// A u32 length, then UTF-8.
    pub(crate) fn string(&mut self, value: &str) {
        self.bytes(value.as_bytes());
    }

    /// A u32 count of items to follow.
    pub(crate) fn count(&mut self, count: usize) {
        self.u32(u32::try_from(count).expect("frame item counts are below 2^32"));
    }

    /// 0 for none, or 1 then the value.
    pub(crate) fn optional_u64(&mut self, value: Option<u64>) {
        match value {
            None => self.u8(0),
            Some(value) => {
                self.u8(1);
                self.u64(value);
            }
        }
    }
}

/// Takes fields from a frame body, front to back.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, position: 0 }
    }

    fn take(&mut self, field: &'static str, count: usize) -> Result<&'a [u8], DecodeError> {
        let available = self.bytes.len() - self.position;
        if count > available {
            return Err(DecodeError::Truncated {
                field,
                needed_bytes: count as u64,
                available_bytes: available as u64,
            });
        }
        let taken = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(field, N)?);
        Ok(array)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    pub(crate) fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::BadValue {
                field,
                value: u64::from(value),
            }),
        }
    }

    /// A u32 length (at most `limit`), then that many bytes.
    pub(crate) fn bytes(
        &mut self,
        field: &'static str,
        limit: usize,
    ) -> Result<&'a [u8], DecodeError> {
        let length = self.u32(field)? as usize;
        if length > limit {
            return Err(DecodeError::TooLong {
                field,
                length_bytes: length as u64,
                limit_bytes: limit as u64,
            });
        }
        self.take(field, length)
    }

    /// A u32 length (at most `limit`), then UTF-8.
    pub(crate) fn string(
        &mut self,
        field: &'static str,
        limit: usize,
    ) -> Result<String, DecodeError> {
        let bytes = self.bytes(field, limit)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| DecodeError::BadUtf8 { field })
    }

    /// A u32 length, then UTF-8 (at most `limit` bytes), appended to `into` (whose
    /// allocation is kept).
    pub(crate) fn string_into(
        &mut self,
        field: &'static str,
        limit: usize,
        into: &mut String,
    ) -> Result<(), DecodeError> {
        let bytes = self.bytes(field, limit)?;
        let text = std::str::from_utf8(bytes).map_err(|_| DecodeError::BadUtf8 { field })?;
        into.push_str(text);
        Ok(())
    }

    /// A u32 count of items (at most `limit`, and at most one item per
    /// `min_item_bytes` of what is left, so a lying count allocates nothing).
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        limit: usize,
        min_item_bytes: usize,
    ) -> Result<usize, DecodeError> {
        let count = self.u32(field)? as usize;
        if count > limit {
            return Err(DecodeError::TooMany {
                field,
                count: count as u64,
                limit: limit as u64,
            });
        }
        let left = self.bytes.len() - self.position;
        if count.saturating_mul(min_item_bytes.max(1)) > left {
            return Err(DecodeError::Truncated {
                field,
                needed_bytes: (count as u64).saturating_mul(min_item_bytes.max(1) as u64),
                available_bytes: left as u64,
            });
        }
        Ok(count)
    }

    pub(crate) fn optional_u64(&mut self, field: &'static str) -> Result<Option<u64>, DecodeError> {
        match self.u8(field)? {
            0 => Ok(None),
            1 => Ok(Some(self.u64(field)?)),
            value => Err(DecodeError::BadValue {
                field,
                value: u64::from(value),
            }),
        }
    }

    /// True when every byte has been read (an optional trailing field is absent).
    pub(crate) fn is_at_end(&self) -> bool {
        self.position == self.bytes.len()
    }

    /// Fails when bytes are left after the last field.
    pub(crate) fn finish(self, kind: &'static str) -> Result<(), DecodeError> {
        let left = self.bytes.len() - self.position;
        if left != 0 {
            return Err(DecodeError::TrailingBytes {
                kind,
                count: left as u64,
            });
        }
        Ok(())
    }
}
