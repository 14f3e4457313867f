//! The bytes of a counter page (layout version [`VERSION`], documented in `super`): encoding a
//! process's communicators and decoding a page read from another process, which may be torn,
//! stale, foreign or hostile: decoding checks every length against the bytes present and
//! returns an error, never panics.

use std::net::SocketAddr;

use super::{CommPage, Page};
use crate::stats::{Direction, LinkSnapshot, OpInfo, OpSnapshot, Path};

/// The first 8 bytes of every page.
pub const MAGIC: [u8; 8] = *b"RNCCLST\0";
/// The layout version this build writes and reads.
pub const VERSION: u32 = 2;
/// Bytes of the page header.
pub(super) const HEADER_BYTES: usize = 64;
/// Bytes of one communicator record.
pub(super) const COMM_BYTES: usize = 120;
/// Bytes of one link record.
pub(super) const LINK_BYTES: usize = 48;
/// The most communicators and links a page may hold: a larger count marks a hostile page.
pub(super) const MAX_RECORDS: usize = 1 << 20;

/// Why a page could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// Not an rnccl counter page (wrong magic or too short for a header).
    #[error("not an rnccl counter page")]
    Foreign,
    /// A layout version this build does not read.
    #[error(
        "counter page layout version {0}; this rnccl reads version {VERSION}: use the rnccl that wrote it"
    )]
    Version(u32),
    /// Lengths that disagree with the bytes present (a torn, truncated or hostile page).
    #[error("malformed counter page: {0}")]
    Malformed(String),
}

const DIRECTIONS: [Direction; 3] = [Direction::Send, Direction::Recv, Direction::Read];
const PATHS: [Path; 11] = [
    Path::SameProcess,
    Path::Shm,
    Path::Tcp,
    Path::Window,
    Path::GpuP2p,
    Path::GpuHost,
    Path::GpuNet,
    Path::NcclKernel,
    Path::NcclNet,
    Path::Ib,
    Path::GpuNetIb,
];

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

/// Encodes `page` (its record counts are taken from its vectors).
pub fn encode(page: &Page) -> Vec<u8> {
    let nlinks: usize = page.comms.iter().map(|c| c.links.len()).sum();
    let total = HEADER_BYTES + page.comms.len() * COMM_BYTES + nlinks * LINK_BYTES;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(&MAGIC);
    put32(&mut b, VERSION);
    put32(&mut b, page.pid);
    put64(&mut b, page.written_unix_ns);
    put64(&mut b, total as u64);
    put32(&mut b, page.comms.len() as u32);
    let (port, family, ip) = match page.status {
        None => (0, 0, [0u8; 16]),
        Some(SocketAddr::V4(a)) => {
            let mut ip = [0u8; 16];
            ip[..4].copy_from_slice(&a.ip().octets());
            (a.port(), 4, ip)
        }
        Some(SocketAddr::V6(a)) => (a.port(), 6, a.ip().octets()),
    };
    b.extend_from_slice(&port.to_le_bytes());
    b.push(family);
    b.push(0);
    b.extend_from_slice(&ip);
    put64(&mut b, 0);
    for c in &page.comms {
        put64(&mut b, c.comm_id);
        put32(&mut b, c.rank as u32);
        put32(&mut b, c.nranks as u32);
        put32(&mut b, c.device.map_or(u32::MAX, |d| d as u32));
        put32(&mut b, c.links.len() as u32);
        put64(&mut b, c.ops_completed);
        let (words, elapsed_ns, total, done, bytes) = match &c.op {
            Some(op) => (
                op.info.encode(0),
                (op.elapsed_s * 1e9) as u64,
                op.steps_total,
                op.steps_done,
                op.bytes_done,
            ),
            None => ([0; 6], 0, 0, 0, 0),
        };
        // The operation's description (its start time word is left out), then its progress.
        for w in &words[..5] {
            put64(&mut b, *w);
        }
        put64(&mut b, u64::from(c.op.is_some()));
        for v in [elapsed_ns, total, done, bytes] {
            put64(&mut b, v);
        }
        put64(&mut b, 0);
        for l in &c.links {
            put32(&mut b, l.peer as u32);
            b.extend_from_slice(&l.channel.to_le_bytes());
            b.push(l.index);
            b.push(
                DIRECTIONS
                    .iter()
                    .position(|d| *d == l.direction)
                    .unwrap_or(0) as u8,
            );
            b.push(PATHS.iter().position(|p| *p == l.transport).unwrap_or(0) as u8);
            b.extend_from_slice(&[0; 7]);
            put64(&mut b, l.bytes);
            put64(&mut b, l.slots);
            put64(&mut b, l.wait_ns);
            put64(&mut b, l.stalled_ns);
        }
    }
    debug_assert_eq!(b.len(), total);
    b
}

/// A bounds-checked little-endian reader over a page.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], PageError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| {
            PageError::Malformed(format!("it ends at byte {} inside a record", self.b.len()))
        })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, PageError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, PageError> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }

    fn u32(&mut self) -> Result<u32, PageError> {
        let mut a = [0; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }

    fn u64(&mut self) -> Result<u64, PageError> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

fn bad(what: impl Into<String>) -> PageError {
    PageError::Malformed(what.into())
}

/// Decodes a page.
///
/// Errors: [`PageError::Foreign`] without rnccl's magic, [`PageError::Version`] for another
/// layout, [`PageError::Malformed`] when a count, length or code disagrees with the bytes.
pub fn decode(bytes: &[u8]) -> Result<Page, PageError> {
    if bytes.len() < HEADER_BYTES || bytes[..8] != MAGIC {
        return Err(PageError::Foreign);
    }
    let mut c = Cursor { b: bytes, at: 8 };
    let version = c.u32()?;
    if version != VERSION {
        return Err(PageError::Version(version));
    }
    let pid = c.u32()?;
    let written_unix_ns = c.u64()?;
    let total = c.u64()?;
    if total != bytes.len() as u64 {
        return Err(bad(format!(
            "it says {total} bytes but holds {}",
            bytes.len()
        )));
    }
    let ncomms = c.u32()? as usize;
    let port = c.u16()?;
    let family = c.u8()?;
    c.u8()?;
    let ip: [u8; 16] = c.take(16)?.try_into().expect("16 bytes");
    c.u64()?;
    let status = match family {
        0 => None,
        4 => Some(SocketAddr::from((
            std::net::Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]),
            port,
        ))),
        6 => Some(SocketAddr::from((std::net::Ipv6Addr::from(ip), port))),
        f => return Err(bad(format!("address family {f}"))),
    };
    if ncomms > MAX_RECORDS {
        return Err(bad(format!("{ncomms} communicators")));
    }
    let mut comms = Vec::with_capacity(ncomms.min(bytes.len() / COMM_BYTES));
    for _ in 0..ncomms {
        comms.push(comm(&mut c)?);
    }
    if c.at != bytes.len() {
        return Err(bad(format!(
            "{} bytes after the last record",
            bytes.len() - c.at
        )));
    }
    Ok(Page {
        pid,
        written_unix_ns,
        status,
        comms,
    })
}

fn comm(c: &mut Cursor<'_>) -> Result<CommPage, PageError> {
    let comm_id = c.u64()?;
    let rank = c.u32()? as usize;
    let nranks = c.u32()? as usize;
    if rank >= nranks {
        return Err(bad(format!("rank {rank} of {nranks}")));
    }
    let device = match c.u32()? {
        u32::MAX => None,
        d => Some(d as usize),
    };
    let nlinks = c.u32()? as usize;
    if nlinks > MAX_RECORDS || nlinks * LINK_BYTES > c.b.len() {
        return Err(bad(format!("{nlinks} links")));
    }
    let ops_completed = c.u64()?;
    let mut words = [0u64; 6];
    for w in &mut words[..5] {
        *w = c.u64()?;
    }
    let in_flight = c.u64()?;
    let (elapsed_ns, steps_total, steps_done, bytes_done) =
        (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
    c.u64()?;
    let op = match in_flight {
        0 => None,
        1 => {
            let (info, _) =
                OpInfo::decode(&words).ok_or_else(|| bad("an unknown operation code"))?;
            Some(OpSnapshot {
                info,
                elapsed_s: elapsed_ns as f64 / 1e9,
                steps_total,
                steps_done,
                bytes_done,
            })
        }
        f => return Err(bad(format!("in-flight flag {f}"))),
    };
    let mut links = Vec::with_capacity(nlinks);
    for _ in 0..nlinks {
        let peer = c.u32()? as usize;
        let channel = c.u16()?;
        let index = c.u8()?;
        let direction = *DIRECTIONS
            .get(c.u8()? as usize)
            .ok_or_else(|| bad("an unknown link direction"))?;
        let transport = *PATHS
            .get(c.u8()? as usize)
            .ok_or_else(|| bad("an unknown link transport"))?;
        c.take(7)?;
        if peer >= nranks && peer != crate::stats::UNKNOWN_PEER {
            return Err(bad(format!("a link to rank {peer} of {nranks}")));
        }
        links.push(LinkSnapshot {
            peer,
            channel,
            index,
            direction,
            transport,
            bytes: c.u64()?,
            slots: c.u64()?,
            wait_ns: c.u64()?,
            stalled_ns: c.u64()?,
        });
    }
    Ok(CommPage {
        comm_id,
        rank,
        nranks,
        device,
        ops_completed,
        op,
        links,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DataType, Func};
    use proptest::prelude::*;

    pub(crate) fn sample() -> Page {
        let link = |peer, direction, transport, bytes| LinkSnapshot {
            peer,
            channel: 3,
            index: 1,
            direction,
            transport,
            bytes,
            slots: bytes / 4096,
            wait_ns: bytes / 7,
            stalled_ns: bytes / 9,
        };
        let op = OpSnapshot {
            info: OpInfo {
                seq: 17,
                func: Func::AllReduce,
                count: 1 << 20,
                dtype: DataType::Float32,
                fused: 1,
                algo: "NVLSTree",
                nchannels: 4,
                direct: false,
            },
            elapsed_s: 0.25,
            steps_total: 40,
            steps_done: 12,
            bytes_done: 1 << 19,
        };
        Page {
            pid: 4242,
            written_unix_ns: 1_700_000_000_000_000_000,
            status: Some("10.1.2.3:40123".parse().unwrap()),
            comms: vec![
                CommPage {
                    comm_id: 0xfeed,
                    rank: 1,
                    nranks: 2,
                    device: Some(1),
                    ops_completed: 99,
                    op: Some(op),
                    links: vec![
                        link(0, Direction::Send, Path::GpuP2p, 1 << 30),
                        link(0, Direction::Recv, Path::Tcp, 8192),
                        link(
                            crate::stats::UNKNOWN_PEER,
                            Direction::Send,
                            Path::NcclKernel,
                            1,
                        ),
                    ],
                },
                CommPage {
                    comm_id: 7,
                    rank: 0,
                    nranks: 1,
                    device: None,
                    ops_completed: 0,
                    op: None,
                    links: vec![],
                },
            ],
        }
    }

    #[test]
    fn a_page_round_trips() {
        let p = sample();
        let b = encode(&p);
        assert_eq!(b.len(), HEADER_BYTES + 2 * COMM_BYTES + 3 * LINK_BYTES);
        assert_eq!(decode(&b).unwrap(), p);
    }

    #[test]
    fn foreign_versioned_and_cut_pages_are_refused() {
        let b = encode(&sample());
        assert_eq!(decode(b"hello").unwrap_err(), PageError::Foreign);
        assert_eq!(decode(&[0u8; 64]).unwrap_err(), PageError::Foreign);
        let mut v1 = b.clone();
        v1[8] = 1;
        assert_eq!(decode(&v1).unwrap_err(), PageError::Version(1));
        let mut family = b.clone();
        family[38] = 5;
        assert!(matches!(decode(&family), Err(PageError::Malformed(_))));
        for cut in [HEADER_BYTES, HEADER_BYTES + 5, b.len() - 1] {
            assert!(
                matches!(decode(&b[..cut]), Err(PageError::Malformed(_))),
                "{cut}"
            );
        }
        let mut longer = b.clone();
        longer.extend_from_slice(&[0; 8]);
        assert!(matches!(decode(&longer), Err(PageError::Malformed(_))));
    }

    #[test]
    fn hostile_counts_are_refused_without_allocating_them() {
        let mut b = encode(&sample());
        // The first communicator claims u32::MAX links; the page's total stays consistent.
        let nlinks_at = HEADER_BYTES + 20;
        b[nlinks_at..nlinks_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&b), Err(PageError::Malformed(_))));
        let mut b = encode(&sample());
        b[HEADER_BYTES + 8..HEADER_BYTES + 12].copy_from_slice(&5u32.to_le_bytes());
        assert!(decode(&b).unwrap_err().to_string().contains("rank 5 of 2"));
    }

    proptest! {
        /// Any bytes after a valid header decode to a page or an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600), flip in 0usize..400, v in any::<u8>()) {
            let mut b = encode(&sample());
            if flip < b.len() {
                b[flip] = v;
            }
            let _ = decode(&b);
            let mut h = b[..HEADER_BYTES].to_vec();
            h.extend_from_slice(&tail);
            let _ = decode(&h);
        }
    }
}
