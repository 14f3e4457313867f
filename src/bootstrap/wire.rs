//! Framing of bootstrap traffic.
//!
//! Every bootstrap connection starts with a hello frame: `u64 magic`, `u32 kind`, `u32 length`,
//! then `length` bytes of JSON (little endian). A wrong magic or an oversized length ends the
//! connection before anything else is read, so stray or hostile traffic on a bootstrap port is
//! dropped without disturbing the job. After the hello, peer-to-peer connections carry message
//! frames: `u64 comm`, `u64 tag`, `u32 length`, payload.

use std::io::{Read, Write};

/// Largest hello frame accepted (a peer table of many thousand ranks fits).
pub(crate) const MAX_HELLO: usize = 64 << 20;
/// Largest message frame accepted on a peer-to-peer connection.
pub(crate) const MAX_MESSAGE: usize = 256 << 20;
/// Bytes in a message frame header.
pub(crate) const MESSAGE_HEADER: usize = 20;

/// What a connection's hello frame announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum HelloKind {
    /// A rank checking in with the root.
    RootCheckIn = 1,
    /// The root's answer (peer table or error).
    RootReply = 2,
    /// A rank opening a peer-to-peer message connection.
    PeerMessages = 3,
    /// A rank opening a data socket of a TCP transport connection.
    DataSocket = 4,
}

impl HelloKind {
    fn from_u32(v: u32) -> Option<HelloKind> {
        Some(match v {
            1 => HelloKind::RootCheckIn,
            2 => HelloKind::RootReply,
            3 => HelloKind::PeerMessages,
            4 => HelloKind::DataSocket,
            _ => return None,
        })
    }
}

/// Why a hello frame was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The magic number differs: another job, another id, or not rnccl at all.
    #[error("wrong magic 0x{0:016x} (another job, a stale unique id, or not rnccl traffic)")]
    BadMagic(u64),
    /// The frame kind is unknown or not the one expected.
    #[error("unexpected frame kind {0}")]
    BadKind(u32),
    /// The announced length exceeds the limit.
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// The payload is not the expected JSON.
    #[error("malformed payload: {0}")]
    Malformed(String),
    /// The socket failed or timed out.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The hello a peer's message connection opens with: who is sending.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct PeerHello {
    /// The sender's bootstrap rank.
    pub from: u32,
}

/// Writes a hello frame with a JSON payload.
pub(crate) fn write_hello<T: serde::Serialize>(
    w: &mut impl Write,
    magic: u64,
    kind: HelloKind,
    body: &T,
) -> std::io::Result<()> {
    let payload = serde_json::to_vec(body).expect("bootstrap messages serialise");
    let mut buf = Vec::with_capacity(16 + payload.len());
    buf.extend_from_slice(&magic.to_le_bytes());
    buf.extend_from_slice(&(kind as u32).to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&payload);
    w.write_all(&buf)
}

/// Reads a hello frame, checking magic, kind and size before reading the payload.
///
/// Errors: [`FrameError`] saying what was wrong.
pub(crate) fn read_hello<T: serde::de::DeserializeOwned>(
    r: &mut impl Read,
    magic: u64,
    kind: HelloKind,
    max: usize,
) -> Result<T, FrameError> {
    let mut head = [0u8; 16];
    r.read_exact(&mut head)?;
    let got = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
    if got != magic {
        return Err(FrameError::BadMagic(got));
    }
    let k = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    if HelloKind::from_u32(k) != Some(kind) {
        return Err(FrameError::BadKind(k));
    }
    let len = u32::from_le_bytes(head[12..].try_into().expect("4 bytes")) as usize;
    if len > max {
        return Err(FrameError::TooLarge(len));
    }
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    serde_json::from_slice(&payload).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Encodes a message frame.
pub(crate) fn encode_message(comm: u64, tag: u64, payload: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(MESSAGE_HEADER + payload.len());
    buf.extend_from_slice(&comm.to_le_bytes());
    buf.extend_from_slice(&tag.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    buf
}

/// Splits complete message frames off the front of `buf`; returns them and leaves any partial
/// frame in place.
///
/// Errors: a frame announcing more than [`MAX_MESSAGE`] bytes.
pub(crate) fn take_messages(buf: &mut Vec<u8>) -> Result<Vec<(u64, u64, Vec<u8>)>, FrameError> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= MESSAGE_HEADER {
        let h = &buf[at..at + MESSAGE_HEADER];
        let comm = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
        let tag = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(h[16..20].try_into().expect("4 bytes")) as usize;
        if len > MAX_MESSAGE {
            return Err(FrameError::TooLarge(len));
        }
        if buf.len() - at - MESSAGE_HEADER < len {
            break;
        }
        let start = at + MESSAGE_HEADER;
        out.push((comm, tag, buf[start..start + len].to_vec()));
        at = start + len;
    }
    buf.drain(..at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip_and_rejections() {
        let mut buf = Vec::new();
        write_hello(&mut buf, 7, HelloKind::RootCheckIn, &vec![1u32, 2, 3]).unwrap();
        let v: Vec<u32> = read_hello(&mut buf.as_slice(), 7, HelloKind::RootCheckIn, 1024).unwrap();
        assert_eq!(v, vec![1, 2, 3]);
        assert!(matches!(
            read_hello::<Vec<u32>>(&mut buf.as_slice(), 8, HelloKind::RootCheckIn, 1024),
            Err(FrameError::BadMagic(7))
        ));
        assert!(matches!(
            read_hello::<Vec<u32>>(&mut buf.as_slice(), 7, HelloKind::RootReply, 1024),
            Err(FrameError::BadKind(1))
        ));
        assert!(matches!(
            read_hello::<Vec<u32>>(&mut buf.as_slice(), 7, HelloKind::RootCheckIn, 2),
            Err(FrameError::TooLarge(_))
        ));
        let garbage = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert!(
            read_hello::<Vec<u32>>(&mut &garbage[..], 7, HelloKind::RootCheckIn, 1024).is_err()
        );
    }

    #[test]
    fn messages_split_across_reads() {
        let mut stream = encode_message(1, 2, b"hello");
        stream.extend(encode_message(3, 4, b""));
        let mut buf = stream[..10].to_vec();
        assert!(take_messages(&mut buf).unwrap().is_empty());
        buf.extend_from_slice(&stream[10..]);
        let msgs = take_messages(&mut buf).unwrap();
        assert_eq!(msgs, vec![(1, 2, b"hello".to_vec()), (3, 4, vec![])]);
        assert!(buf.is_empty());
    }
}
