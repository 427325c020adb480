//! The hello every cluster connection opens with (docs/cluster-wire.md, "Hello"): 16 bytes,
//! little endian: magic `FPCH`, version (u16), role (1 host, 2 node), answer (0 in the
//! opening hello; in the reply, 0 accepted or a refusal code), id (u32: the host's or the
//! node's), CRC-32C of the description file's bytes (u32), so both ends run the same
//! description. The side that connects sends its hello first; the side that accepted
//! checks it and replies with its own hello, carrying its refusal if it refuses, then
//! closes on a refusal.

/// Bytes of a hello.
pub const HELLO_BYTES: usize = 16;
/// The hello's magic.
pub const HELLO_MAGIC: [u8; 4] = *b"FPCH";
/// The one hello version.
pub const HELLO_VERSION: u16 = 1;

/// Who is at the end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A host (its id is a host id).
    Host,
    /// A node (its id is a node id).
    Node,
}

impl Role {
    /// The role's code on the wire.
    pub(crate) fn code(self) -> u8 {
        match self {
            Role::Host => 1,
            Role::Node => 2,
        }
    }

    /// The role in words.
    pub fn name(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Node => "node",
        }
    }
}

/// Why the accepting side refused a connection (the reply's answer byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The opening hello could not be read (magic, version, role or answer byte).
    #[error(
        "the node could not read the hello (another program, or another release of flashpipe)"
    )]
    BadHello,
    /// The two ends run different description files.
    #[error("the two ends run different cluster description files; give every node and host the same file")]
    DescriptionMismatch,
    /// The id is not one this node takes a connection from.
    #[error("the node takes no connection from that id (not its host, or not a neighbour that dials it)")]
    NotExpected,
}

impl Refusal {
    fn code(self) -> u8 {
        match self {
            Refusal::BadHello => 1,
            Refusal::DescriptionMismatch => 2,
            Refusal::NotExpected => 3,
        }
    }

    fn from_code(code: u8) -> Option<Refusal> {
        match code {
            1 => Some(Refusal::BadHello),
            2 => Some(Refusal::DescriptionMismatch),
            3 => Some(Refusal::NotExpected),
            _ => None,
        }
    }
}

/// A hello, opening or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Who sends it.
    pub role: Role,
    /// 0 in an opening hello; a reply's refusal, or none when accepted.
    pub refusal: Option<Refusal>,
    /// The sender's host or node id.
    pub id: u32,
    /// CRC-32C of the description file the sender runs.
    pub description_crc: u32,
}

/// Why bytes are not a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// The magic is not `FPCH`.
    #[error("the connection did not open with a cluster hello (wrong magic); is this a flashpipe cluster node?")]
    BadMagic,
    /// Another version.
    #[error("hello version {version} is not supported (this release speaks {HELLO_VERSION}); run one release on every node and host")]
    BadVersion {
        /// The version read.
        version: u16,
    },
    /// Not a known role.
    #[error("unknown role {role} in the hello (1 host, 2 node)")]
    UnknownRole {
        /// The role byte.
        role: u8,
    },
    /// An answer byte no refusal has.
    #[error("unknown answer {answer} in the hello")]
    UnknownAnswer {
        /// The answer byte.
        answer: u8,
    },
}

impl Hello {
    /// The 16 bytes.
    pub fn encode(&self) -> [u8; HELLO_BYTES] {
        let mut bytes = [0u8; HELLO_BYTES];
        bytes[0..4].copy_from_slice(&HELLO_MAGIC);
        bytes[4..6].copy_from_slice(&HELLO_VERSION.to_le_bytes());
        bytes[6] = self.role.code();
        bytes[7] = self.refusal.map_or(0, Refusal::code);
        bytes[8..12].copy_from_slice(&self.id.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.description_crc.to_le_bytes());
        bytes
    }

    /// Reads a hello, checking magic, version, role and answer in that order.
    pub fn decode(bytes: &[u8; HELLO_BYTES]) -> Result<Hello, HelloError> {
        if bytes[0..4] != HELLO_MAGIC {
            return Err(HelloError::BadMagic);
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != HELLO_VERSION {
            return Err(HelloError::BadVersion { version });
        }
        let role = match bytes[6] {
            1 => Role::Host,
            2 => Role::Node,
            role => return Err(HelloError::UnknownRole { role }),
        };
        let refusal = match bytes[7] {
            0 => None,
            answer => Some(Refusal::from_code(answer).ok_or(HelloError::UnknownAnswer { answer })?),
        };
        let word = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        Ok(Hello {
            role,
            refusal,
            id: word(8),
            description_crc: word(12),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_encode_and_decode() {
        let opening = Hello {
            role: Role::Host,
            refusal: None,
            id: 2,
            description_crc: 0x1234_5678,
        };
        let refusal = Hello {
            role: Role::Node,
            refusal: Some(Refusal::DescriptionMismatch),
            id: 3,
            description_crc: 0xdead_beef,
        };
        for (hello, bytes) in [
            (
                opening,
                [
                    0x46, 0x50, 0x43, 0x48, 0x01, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x78,
                    0x56, 0x34, 0x12,
                ],
            ),
            (
                refusal,
                [
                    0x46, 0x50, 0x43, 0x48, 0x01, 0x00, 0x02, 0x02, 0x03, 0x00, 0x00, 0x00, 0xef,
                    0xbe, 0xad, 0xde,
                ],
            ),
        ] {
            assert_eq!(hello.encode(), bytes);
            assert_eq!(Hello::decode(&bytes), Ok(hello));
        }
    }

    #[test]
    fn hostile_hellos_are_refused_with_their_reason() {
        let good = Hello {
            role: Role::Node,
            refusal: None,
            id: 1,
            description_crc: 7,
        }
        .encode();
        let with = |at: usize, value: u8| {
            let mut bytes = good;
            bytes[at] = value;
            bytes
        };
        assert_eq!(Hello::decode(&with(0, b'G')), Err(HelloError::BadMagic));
        assert_eq!(
            Hello::decode(&with(4, 2)),
            Err(HelloError::BadVersion { version: 2 })
        );
        assert_eq!(
            Hello::decode(&with(5, 1)),
            Err(HelloError::BadVersion { version: 257 })
        );
        for role in [0, 3, 255] {
            assert_eq!(
                Hello::decode(&with(6, role)),
                Err(HelloError::UnknownRole { role })
            );
        }
        assert_eq!(
            Hello::decode(&with(7, 4)),
            Err(HelloError::UnknownAnswer { answer: 4 })
        );
        for refusal in [
            Refusal::BadHello,
            Refusal::DescriptionMismatch,
            Refusal::NotExpected,
        ] {
            let decoded = Hello::decode(&with(7, refusal.code())).unwrap();
            assert_eq!(decoded.refusal, Some(refusal));
        }
        let mut random = flashpipe_base::random::SplitMix64::new(1);
        for _ in 0..10_000 {
            let mut bytes = [0u8; HELLO_BYTES];
            for byte in &mut bytes {
                *byte = random.next_u64() as u8;
            }
            let _ = Hello::decode(&bytes);
        }
    }
}
