//! Integers, switches and listed numeric choices (`NCCL_PARAM`, C `strtoll`), typed switches and
//! floats, plus the unit formatting their meanings use.

use super::Reading;
use crate::config::finding::{Finding, Severity};
use crate::config::parse::{c_strtoll, parse_c_int};
use crate::config::registry::{KnobSpec, KnobType, Unit};

/// Words people write for switches, which `strtoll` reads as 0.
const SWITCH_WORDS: [&str; 8] = [
    "true", "false", "yes", "no", "on", "off", "enable", "disable",
];

/// The integer default of an integer or switch knob (`None` when NCCL leaves it unset).
pub(crate) fn default_int(spec: &KnobSpec) -> Option<i64> {
    match spec.ty {
        KnobType::TypedBool => typed_bool(spec.default).map(i64::from),
        _ => parse_c_int(spec.default),
    }
}

/// NCCL's typed-registry switch words (`src/include/param/parser_default.h`): `1`, `T`, `TRUE`
/// or `0`, `F`, `FALSE`, case-insensitive, nothing else.
fn typed_bool(s: &str) -> Option<bool> {
    if s == "1" || s.eq_ignore_ascii_case("t") || s.eq_ignore_ascii_case("true") {
        Some(true)
    } else if s == "0" || s.eq_ignore_ascii_case("f") || s.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// A range in words: "1 to 64", "0 or more".
fn range_text(lo: i64, hi: i64) -> String {
    if hi == i64::MAX {
        format!("{lo} or more")
    } else {
        format!("{lo} to {hi}")
    }
}

/// The range or choice problem of value `v`, if any (the default is always fine).
fn check_value(spec: &KnobSpec, v: i64) -> Option<Finding> {
    if Some(v) == default_int(spec) {
        return None;
    }
    if let KnobType::Choice(choices) = spec.ty
        && !choices.iter().any(|c| parse_c_int(c.value) == Some(v))
    {
        let list: Vec<String> = choices
            .iter()
            .map(|c| format!("{} ({})", c.value, c.meaning))
            .collect();
        return Some(Finding::error(
            format!("NCCL gives {v} no meaning"),
            format!("use one of {}, or unset it", list.join("; ")),
        ));
    }
    match spec.range {
        Some((lo, hi)) if v < lo || v > hi => Some(Finding::error(
            format!("{v} is outside the valid range, {}", range_text(lo, hi)),
            format!(
                "pick a value from {}, or unset it to get the default",
                range_text(lo, hi)
            ),
        )),
        _ => None,
    }
}

/// Reads an `NCCL_PARAM` integer, switch or numeric choice the way `ncclLoadParam` does.
pub(super) fn read_int(spec: &KnobSpec, raw: &str) -> Reading {
    let r = c_strtoll(raw);
    let mut findings = Vec::new();
    if r.overflow {
        // What NCCL then uses, not its sentinel: NCCL_BUFFSIZE's default -2 stands for 4 MiB.
        let used = if spec.auto.is_empty() {
            spec.default_text()
        } else {
            spec.auto.to_string()
        };
        return Reading::new(used, "the default").with(Finding::error(
            "does not fit in a 64-bit integer: NCCL ignores it and uses the default",
            "write a smaller number",
        ));
    }
    let rest = &raw[r.consumed..];
    if r.consumed == 0 {
        let word = raw.trim().to_ascii_lowercase();
        let hint = if spec.ty.is_switch() || SWITCH_WORDS.contains(&word.as_str()) {
            "NCCL switches are numbers: write 1 for on, 0 for off".to_string()
        } else {
            "write a decimal number".to_string()
        };
        findings.push(Finding::error(
            format!(
                "{raw:?} is not a number: NCCL reads it as 0, not as the default {}",
                spec.default_text()
            ),
            hint,
        ));
    } else if !rest.is_empty() {
        if r.radix == 8 && rest.starts_with(['8', '9']) {
            let decimal = raw
                .trim()
                .trim_start_matches(['+', '-'])
                .trim_start_matches('0');
            findings.push(Finding::error(
                format!(
                    "the leading 0 makes NCCL read octal, where '{}' is not a digit: NCCL reads {}",
                    &rest[..1],
                    r.value
                ),
                format!("write {decimal} without the leading zero"),
            ));
        } else if rest.trim().is_empty() {
            findings.push(Finding::warning(
                format!(
                    "trailing white space: NCCL ignores it and reads {}",
                    r.value
                ),
                "remove the spaces",
            ));
        } else {
            let unit_like = rest.trim().trim_end_matches(['b', 'B', 'i']).len() <= 1
                && rest.trim().starts_with(['k', 'K', 'm', 'M', 'g', 'G']);
            findings.push(Finding::error(
                format!(
                    "NCCL reads only the leading number {} and ignores {rest:?}",
                    r.value
                ),
                if unit_like {
                    "NCCL knows no unit suffix: write the plain number (e.g. 4194304 for 4 MiB)"
                        .to_string()
                } else {
                    "write just the number".to_string()
                },
            ));
        }
    } else if r.radix == 8 && r.value != 0 {
        findings.push(Finding::warning(
            format!("the leading 0 means octal: NCCL reads {raw} as {}", r.value),
            format!(
                "write {} (decimal) if that is what you mean, or drop the leading 0",
                r.value
            ),
        ));
    } else if r.radix == 16 {
        findings.push(Finding::note(format!("hexadecimal: {}", r.value)));
    }
    if raw.starts_with(char::is_whitespace) && r.consumed > 0 {
        findings.push(Finding::note("leading white space: NCCL skips it"));
    }
    let v = r.value;
    if findings.iter().all(|f| f.severity != Severity::Error) {
        findings.extend(check_value(spec, v));
    }
    if spec.ty == KnobType::Bool && v != 0 && v != 1 {
        findings.push(Finding::warning(
            format!(
                "{v} is not 0 or 1: most NCCL switches treat any non-zero number as on, some only 1"
            ),
            "write 1 for on, 0 for off",
        ));
    }
    let mut reading = Reading::new(v.to_string(), int_meaning(spec, v));
    reading.findings = findings;
    reading
}

/// Reads a switch of NCCL's typed registry.
pub(super) fn read_typed_bool(spec: &KnobSpec, raw: &str) -> Reading {
    match typed_bool(raw) {
        Some(b) => Reading::new(if b { "TRUE" } else { "FALSE" }, if b { "on" } else { "off" }),
        None => Reading::new(spec.default_text(), "the default").with(Finding::error(
            format!("{raw:?} is not one of 1, T, TRUE, 0, F, FALSE: NCCL rejects it and keeps the default"),
            "write 1 or 0",
        )),
    }
}

/// Reads a decimal floating-point value (nccl-tests uses `strtod`/`atof`).
pub(super) fn read_float(raw: &str) -> Reading {
    match raw.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Reading::new(v.to_string(), ""),
        _ => Reading::new("0", "").with(Finding::error(
            format!("{raw:?} is not a number: it reads as 0"),
            "write a decimal number such as 12.5",
        )),
    }
}

/// The meaning of integer `v` of `spec`: the listed choice, on/off, or the value with its unit.
fn int_meaning(spec: &KnobSpec, v: i64) -> String {
    if Some(v) == default_int(spec) && !spec.auto.is_empty() {
        return format!("default: {}", spec.auto);
    }
    if let KnobType::Choice(choices) = spec.ty
        && let Some(c) = choices.iter().find(|c| parse_c_int(c.value) == Some(v))
    {
        return c.meaning.to_string();
    }
    if spec.ty == KnobType::Bool {
        return if v != 0 { "on" } else { "off" }.into();
    }
    match spec.unit {
        Unit::Bytes => format_bytes(v),
        Unit::Milliseconds => format_duration(v as f64 / 1e3),
        Unit::Microseconds => format_duration(v as f64 / 1e6),
        Unit::Nanoseconds => format_duration(v as f64 / 1e9),
        Unit::Seconds => format_duration(v as f64),
        Unit::AckTimeoutExponent => ack_timeout_meaning(v),
        Unit::None | Unit::Count => String::new(),
        Unit::Signal => format!("signal {v}"),
        other => format!("{v} {other}"),
    }
}

/// The InfiniBand local ACK timeout for exponent `n`: 4.096 µs × 2^n, 0 meaning infinite
/// (InfiniBand Architecture Specification vol. 1, §12.7.34 "Local ACK Timeout"; NCCL's env.rst).
fn ack_timeout_meaning(n: i64) -> String {
    match n {
        0 => "no timeout: a lost peer is never detected".into(),
        1..=31 => format!(
            "{} per attempt",
            format_duration(4.096e-6 * 2f64.powi(n as i32))
        ),
        _ => "outside the 5-bit field: NCCL's documentation calls it infinite".into(),
    }
}

/// `n` bytes in words: "4194304 bytes (4 MiB)".
pub fn format_bytes(n: i64) -> String {
    const UNITS: [(&str, i64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (name, size) in UNITS {
        if n >= size && n % size == 0 {
            return format!("{n} bytes ({} {name})", n / size);
        }
    }
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{n} bytes")
    }
}

/// Seconds in the largest unit that reads well: "4.3 s", "17.2 s", "2.3 min", "1.1 h", "100 ms".
pub fn format_duration(secs: f64) -> String {
    let trim = |v: f64, unit: &str| {
        let s = if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        };
        format!("{} {unit}", s.trim_end_matches(".0"))
    };
    if secs >= 3600.0 {
        trim(secs / 3600.0, "h")
    } else if secs >= 60.0 {
        trim(secs / 60.0, "min")
    } else if secs >= 1.0 {
        trim(secs, "s")
    } else if secs >= 1e-3 {
        trim(secs * 1e3, "ms")
    } else {
        trim(secs * 1e6, "µs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_well() {
        assert_eq!(format_bytes(4194304), "4194304 bytes (4 MiB)");
        assert_eq!(format_bytes(1000), "1000 bytes");
        assert_eq!(format_duration(4.096e-6 * 2f64.powi(20)), "4.3 s");
        assert_eq!(format_duration(59.5), "59.5 s");
        assert_eq!(format_duration(0.1), "100 ms");
        assert_eq!(format_duration(137.4), "2.3 min");
    }
}
