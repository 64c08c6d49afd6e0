//! ADB transport messages: the 24-byte header (six little-endian u32) and its payload, as
//! both sides of a connection speak them (droidmesh-sim is the device side, the device
//! service's direct client the host side).
//!
//! `data_check` is the byte sum of the payload and `magic` is `command ^ 0xffff_ffff`; the
//! header and payload are encoded into one buffer so they leave in one TCP write.

pub const A_CNXN: u32 = 0x4e58_4e43;
pub const A_AUTH: u32 = 0x4854_5541;
pub const A_OPEN: u32 = 0x4e45_504f;
pub const A_OKAY: u32 = 0x5941_4b4f;
pub const A_WRTE: u32 = 0x4554_5257;
pub const A_CLSE: u32 = 0x4553_4c43;
pub const A_STLS: u32 = 0x534c_5453;

/// AUTH types (arg0 of an AUTH message).
pub const AUTH_TOKEN: u32 = 1;
pub const AUTH_SIGNATURE: u32 = 2;
pub const AUTH_RSAPUBLICKEY: u32 = 3;

/// Protocol version droidmesh speaks on both sides.
pub const A_VERSION: u32 = 0x0100_0001;
/// Largest payload droidmesh accepts (and announces in its CNXN), on both sides.
pub const MAX_PAYLOAD: u32 = 1024 * 1024;
/// Header size in bytes.
pub const HEADER_LEN: usize = 24;

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub command: u32,
    pub arg0: u32,
    pub arg1: u32,
    pub data_length: u32,
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("bad magic {magic:#010x} for command {command:#010x}")]
    BadMagic { command: u32, magic: u32 },
    #[error("payload of {0} bytes is larger than the {MAX_PAYLOAD} byte limit")]
    TooLarge(u32),
}

fn word(bytes: &[u8; HEADER_LEN], i: usize) -> u32 {
    u32::from_le_bytes([
        bytes[i * 4],
        bytes[i * 4 + 1],
        bytes[i * 4 + 2],
        bytes[i * 4 + 3],
    ])
}

impl Header {
    /// Decodes and checks a header (magic and payload size; the checksum is not checked, as
    /// newer hosts send 0).
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Self, WireError> {
        let command = word(bytes, 0);
        let magic = word(bytes, 5);
        if magic != command ^ 0xffff_ffff {
            return Err(WireError::BadMagic { command, magic });
        }
        let data_length = word(bytes, 3);
        if data_length > MAX_PAYLOAD {
            return Err(WireError::TooLarge(data_length));
        }
        Ok(Self {
            command,
            arg0: word(bytes, 1),
            arg1: word(bytes, 2),
            data_length,
        })
    }
}

/// Encodes a message (header then payload) into one buffer.
pub fn encode(command: u32, arg0: u32, arg1: u32, payload: &[u8]) -> Vec<u8> {
    let check = payload
        .iter()
        .fold(0u32, |sum, b| sum.wrapping_add(u32::from(*b)));
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    for w in [command, arg0, arg1, len, check, command ^ 0xffff_ffff] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// A readable name for a command word (for logs).
pub fn command_name(command: u32) -> &'static str {
    match command {
        A_CNXN => "CNXN",
        A_AUTH => "AUTH",
        A_OPEN => "OPEN",
        A_OKAY => "OKAY",
        A_WRTE => "WRTE",
        A_CLSE => "CLSE",
        A_STLS => "STLS",
        _ => "????",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_with_checksum_and_magic() {
        let msg = encode(A_WRTE, 7, 9, b"abc");
        let mut head = [0u8; HEADER_LEN];
        head.copy_from_slice(&msg[..HEADER_LEN]);
        let h = Header::decode(&head).unwrap();
        assert_eq!(
            h,
            Header {
                command: A_WRTE,
                arg0: 7,
                arg1: 9,
                data_length: 3
            }
        );
        assert_eq!(
            word(&head, 4),
            u32::from(b'a') + u32::from(b'b') + u32::from(b'c')
        );
        assert_eq!(&msg[HEADER_LEN..], b"abc");
    }

    #[test]
    fn bad_magic_and_oversized_payloads_are_refused() {
        let mut msg = encode(A_OPEN, 1, 0, b"");
        msg[20] ^= 1;
        let mut head = [0u8; HEADER_LEN];
        head.copy_from_slice(&msg[..HEADER_LEN]);
        assert!(matches!(
            Header::decode(&head),
            Err(WireError::BadMagic { .. })
        ));
        let mut big = encode(A_WRTE, 1, 2, b"");
        big[12..16].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
        head.copy_from_slice(&big[..HEADER_LEN]);
        assert_eq!(
            Header::decode(&head),
            Err(WireError::TooLarge(MAX_PAYLOAD + 1))
        );
    }

    proptest::proptest! {
        // PROPTEST_CASES=1000000 runs a longer search than CI's.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(4000)
        ))]

        /// Any 24 bytes decode to a header or a refusal; a header never promises more
        /// payload than the limit.
        #[test]
        fn any_header_bytes_decode_or_are_refused(bytes in proptest::array::uniform24(proptest::num::u8::ANY)) {
            if let Ok(h) = Header::decode(&bytes) {
                proptest::prop_assert!(h.data_length <= MAX_PAYLOAD);
                proptest::prop_assert_eq!(h.command ^ 0xffff_ffff, word(&bytes, 5));
            }
        }

        #[test]
        fn encoded_messages_decode_to_what_was_sent(
            command in proptest::num::u32::ANY,
            arg0 in proptest::num::u32::ANY,
            arg1 in proptest::num::u32::ANY,
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..512),
        ) {
            let msg = encode(command, arg0, arg1, &payload);
            let mut head = [0u8; HEADER_LEN];
            head.copy_from_slice(&msg[..HEADER_LEN]);
            let h = Header::decode(&head).unwrap();
            proptest::prop_assert_eq!((h.command, h.arg0, h.arg1), (command, arg0, arg1));
            proptest::prop_assert_eq!(&msg[HEADER_LEN..], payload.as_slice());
        }
    }
}
