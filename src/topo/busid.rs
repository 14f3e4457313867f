//! PCI bus ids as NCCL reads and writes them (NCCL src/misc/utils.cc `busIdToInt64`,
//! `int64ToBusId`; src/graph/xml.cc `checkBDFFormat`).

/// The numeric id of a bus id string: its hex digits with `:` and `.` skipped, up to the first
/// other character, at most 16 digits (`"0000:1b:00.0"` → `0x1b000`). Never fails: a string with
/// no hex digits gives 0, as in NCCL.
pub fn busid_to_u64(s: &str) -> u64 {
    let mut v: u64 = 0;
    let mut n = 0;
    for c in s.chars() {
        if c == ':' || c == '.' {
            continue;
        }
        let Some(d) = c.to_digit(16) else { break };
        if n == 16 {
            break;
        }
        v = (v << 4) | u64::from(d);
        n += 1;
    }
    v
}

/// The `dddd:bb:dd.f` form of a numeric bus id (lower case, as NCCL writes it).
pub fn u64_to_busid(id: u64) -> String {
    format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        id >> 20,
        (id & 0xff000) >> 12,
        (id & 0xff0) >> 4,
        id & 0xf
    )
}

/// Whether `s` is exactly `BBBB:BB:DD.F` with hex digits (12 characters), the form of a PCI
/// function directory in sysfs.
pub fn is_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && [0, 1, 2, 3, 5, 6, 8, 9, 11]
            .iter()
            .all(|&i| b[i].is_ascii_hexdigit())
}

/// Normalises a bus id from NVML (`00000000:1B:00.0`) or sysfs to NCCL's form (`0000:1b:00.0`).
pub fn normalize(s: &str) -> String {
    u64_to_busid(busid_to_u64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_like_nccl() {
        assert_eq!(busid_to_u64("0000:00:06.0"), 0x60);
        assert_eq!(busid_to_u64("0000:1b:00.0"), 0x1b000);
        assert_eq!(busid_to_u64("fffffff:ff:ff.0"), 0xfffffffffff0);
        assert_eq!(busid_to_u64("zz"), 0);
        assert_eq!(u64_to_busid(0x1b000), "0000:1b:00.0");
        assert_eq!(normalize("00000000:C1:00.0"), "0000:c1:00.0");
        assert!(is_bdf("0000:00:06.0") && !is_bdf("pci0000:00") && !is_bdf("0000:00:06.0x"));
    }
}
