//! Sizes in words for people: binary units (KiB = 1024 B) as memory is counted.

/// `b` bytes with one decimal in the largest binary unit that keeps the number at least 1
/// (`512 B`, `64.0 MiB`, `1.5 GiB`).
pub fn bytes_iec(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::bytes_iec;

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes_iec(512), "512 B");
        assert_eq!(bytes_iec(64 << 20), "64.0 MiB");
        assert_eq!(bytes_iec(3 << 29), "1.5 GiB");
    }
}
