//! Sizes in words for people: binary units (KiB = 1024 B) as memory is counted, by `humansize`.

use humansize::{BINARY, FormatSizeOptions, format_size};

/// `b` bytes with one decimal in the largest binary unit that keeps the number at least 1
/// (`512 B`, `64.0 MiB`, `1.5 GiB`); whole bytes without one.
pub fn bytes_iec(b: u64) -> String {
    if b < 1024 {
        return format!("{b} B");
    }
    format_size(
        b,
        FormatSizeOptions::from(BINARY)
            .decimal_places(1)
            .decimal_zeroes(1),
    )
}

/// `b` bytes rounded to a whole number of the largest binary unit that keeps it at least 1
/// (`8 B`, `64 KiB`, `1 GiB`): for powers of two, as size columns list them.
pub fn bytes_iec_whole(b: u64) -> String {
    format_size(b, FormatSizeOptions::from(BINARY).decimal_places(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes_iec(512), "512 B");
        assert_eq!(bytes_iec(64 << 20), "64.0 MiB");
        assert_eq!(bytes_iec(3 << 29), "1.5 GiB");
        assert_eq!(bytes_iec_whole(8), "8 B");
        assert_eq!(bytes_iec_whole(64 << 10), "64 KiB");
        assert_eq!(bytes_iec_whole(1 << 30), "1 GiB");
    }
}
