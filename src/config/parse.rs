//! Integer parsing with NCCL's C rules: [`c_strtoll`] models exactly what glibc's
//! `strtoll(s, &end, 0)` returns (what NCCL acts on), [`parse_c_int`] is the strict form rnccl's
//! engine accepts.

/// What glibc's `strtoll(s, &end, 0)` makes of a string, as `ncclLoadParam`
/// (`src/misc/param.cc`) calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strtoll {
    /// The value returned (clamped to `i64::MIN`/`i64::MAX` on overflow, 0 when no digits).
    pub value: i64,
    /// Bytes consumed, i.e. `end - s` (0 when no number was found).
    pub consumed: usize,
    /// `errno` was set to `ERANGE`: NCCL then uses the knob's default.
    pub overflow: bool,
    /// The base the digits were read in (8, 10 or 16).
    pub radix: u32,
}

impl Strtoll {
    /// True when the whole string was one well-formed number.
    pub fn is_exact(&self, s: &str) -> bool {
        self.consumed == s.len() && self.consumed > 0 && !self.overflow
    }
}

/// Parses like glibc's `strtoll(s, &end, 0)`: leading white space, an optional sign, then `0x`/`0X`
/// for hex (only if a hex digit follows, else the `0` alone is read), a leading `0` for octal, or
/// decimal; it stops at the first character that is not a digit of the base. No digits give 0 with
/// nothing consumed; overflow clamps and sets `overflow` (glibc sets `ERANGE`). Checked against
/// glibc 2.36 for `08`, `0x`, `0xg`, `12abc`, `1e3` and the 64-bit limits.
pub fn c_strtoll(s: &str) -> Strtoll {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let radix = if b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
        16
    } else if b.get(i) == Some(&b'0') {
        8
    } else {
        10
    };
    let start = i;
    let mut mag: u128 = 0;
    let mut overflow = false;
    while let Some(d) = b.get(i).and_then(|c| (*c as char).to_digit(radix)) {
        mag = mag * u128::from(radix) + u128::from(d);
        if mag > 1 << 64 {
            mag = 1 << 64;
            overflow = true;
        }
        i += 1;
    }
    if i == start {
        return Strtoll {
            value: 0,
            consumed: 0,
            overflow: false,
            radix,
        };
    }
    let limit: u128 = if neg { 1 << 63 } else { (1 << 63) - 1 };
    if mag > limit {
        overflow = true;
    }
    let value = match (overflow, neg) {
        (true, true) => i64::MIN,
        (true, false) => i64::MAX,
        (false, true) => (mag as i128).wrapping_neg() as i64,
        (false, false) => mag as i64,
    };
    Strtoll {
        value,
        consumed: i,
        overflow,
        radix,
    }
}

/// Parses an integer like C's `strtoll(s, &end, 0)` as NCCL's `ncclLoadParam` uses it, but
/// strictly: leading whitespace and a sign are accepted, `0x`/`0X` selects hex, a leading `0`
/// selects octal, and the whole string must be consumed (NCCL ignores trailing garbage; rnccl
/// refuses it). Returns `None` on garbage, an empty string or overflow.
pub fn parse_c_int(s: &str) -> Option<i64> {
    let r = c_strtoll(s);
    r.is_exact(s).then_some(r.value)
}

#[cfg(test)]
mod tests {
    use super::{c_strtoll, parse_c_int};

    #[test]
    fn c_rules() {
        assert_eq!(parse_c_int("42"), Some(42));
        assert_eq!(parse_c_int("0x1F"), Some(31));
        assert_eq!(parse_c_int("010"), Some(8));
        assert_eq!(parse_c_int("0"), Some(0));
        assert_eq!(parse_c_int("-2"), Some(-2));
        assert_eq!(parse_c_int("  7"), Some(7));
        assert_eq!(parse_c_int("08"), None, "8 is not an octal digit");
        assert_eq!(parse_c_int("12abc"), None);
        assert_eq!(parse_c_int(""), None);
        assert_eq!(parse_c_int("0x"), None);
        assert_eq!(parse_c_int("9223372036854775808"), None);
        assert_eq!(parse_c_int("-9223372036854775808"), Some(i64::MIN));
    }

    /// The cases checked by hand against glibc 2.36 (`strtoll(s, &end, 0)`, errno).
    #[test]
    fn matches_glibc() {
        let cases: &[(&str, i64, usize, bool)] = &[
            ("08", 0, 1, false),
            ("abc", 0, 0, false),
            ("0x", 0, 1, false),
            ("0xg", 0, 1, false),
            ("12abc", 12, 2, false),
            (" 7", 7, 2, false),
            ("-0x10", -16, 5, false),
            ("9223372036854775808", i64::MAX, 19, true),
            ("-9223372036854775809", i64::MIN, 20, true),
            ("", 0, 0, false),
            (" ", 0, 0, false),
            ("+", 0, 0, false),
            ("-", 0, 0, false),
            ("0b101", 0, 1, false),
            ("1e3", 1, 1, false),
            ("010", 8, 3, false),
        ];
        for &(s, value, consumed, overflow) in cases {
            let r = c_strtoll(s);
            assert_eq!(
                (r.value, r.consumed, r.overflow),
                (value, consumed, overflow),
                "{s:?}"
            );
        }
    }
}
