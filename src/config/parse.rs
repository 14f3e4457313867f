//! Value parsers that follow NCCL's C parsing rules exactly.

/// Parses an integer like C's `strtoll(s, &end, 0)` as NCCL's `ncclLoadParam` uses it, but
/// strictly: leading whitespace and a sign are accepted, `0x`/`0X` selects hex, a leading `0`
/// selects octal, and the whole string must be consumed (NCCL ignores trailing garbage only in
/// that it never checks `end`; rnccl reports it). Returns `None` on garbage or overflow.
pub fn parse_c_int(s: &str) -> Option<i64> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let mag = i128::from_str_radix(digits, radix).ok()?;
    let v = if neg { -mag } else { mag };
    i64::try_from(v).ok()
}

#[cfg(test)]
mod tests {
    use super::parse_c_int;

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
}
