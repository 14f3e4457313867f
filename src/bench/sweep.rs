//! Size sweeps with nccl-tests' `-b`/`-e`/`-f`/`-i` semantics.

use crate::error::{Error, Result};

/// Parses a byte size with an optional `K`, `M`, `G` (or `KB`, `MiB`…) suffix, powers of 1024
/// as nccl-tests' `parsesize` does (`8`, `512K`, `1M`, `4G`).
///
/// Errors: [`Error::InvalidArgument`] naming the text.
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        _ => {
            return Err(Error::invalid_arg(format!(
                "size '{s}': unknown unit '{unit}' (use K, M or G)"
            )));
        }
    };
    let n: u64 = num.parse().map_err(|_| {
        Error::invalid_arg(format!(
            "size '{s}' is not a number of bytes (e.g. 8, 512K, 1M, 4G)"
        ))
    })?;
    n.checked_mul(mult)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| Error::invalid_arg(format!("size '{s}' is too large")))
}

/// The sizes from `min` to `max` inclusive: multiplied by `factor` (> 1), or stepped by
/// `step` bytes when `factor` is 1 (nccl-tests: `-f` wins when greater than 1).
///
/// Errors: [`Error::InvalidArgument`] when `min > max`, or when neither a factor above 1 nor a
/// positive step is given while `min < max`.
pub fn sweep(min: usize, max: usize, factor: usize, step: usize) -> Result<Vec<usize>> {
    if min > max {
        return Err(Error::invalid_arg(format!(
            "the smallest size ({min} bytes) is larger than the largest ({max} bytes)"
        )));
    }
    let mut out = vec![min];
    if min == max {
        return Ok(out);
    }
    if factor <= 1 && step == 0 {
        return Err(Error::invalid_arg(format!(
            "sizes from {min} to {max} bytes need a step factor above 1 or a step of more than 0 bytes"
        )));
    }
    let mut s = min;
    loop {
        let next = if factor > 1 {
            if s == 0 { 1 } else { s.saturating_mul(factor) }
        } else {
            s.saturating_add(step)
        };
        if next > max || next == s {
            break;
        }
        out.push(next);
        s = next;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_units() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("512K").unwrap(), 512 << 10);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert!(
            parse_size("1T")
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn sweeps() {
        assert_eq!(sweep(8, 64, 2, 0).unwrap(), vec![8, 16, 32, 64]);
        assert_eq!(sweep(8, 100, 4, 0).unwrap(), vec![8, 32]);
        assert_eq!(sweep(0, 4, 1, 2).unwrap(), vec![0, 2, 4]);
        assert_eq!(sweep(32, 32, 1, 0).unwrap(), vec![32]);
        assert!(
            sweep(64, 8, 2, 0)
                .unwrap_err()
                .to_string()
                .contains("larger than")
        );
        let e = sweep(8, 64, 1, 0).unwrap_err().to_string();
        assert!(e.contains("step factor") && !e.contains("--"), "{e}");
    }
}
