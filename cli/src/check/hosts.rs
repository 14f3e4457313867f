//! The host list of `rnccl check`: `--hosts` (comma-separated names, each may be a Slurm
//! hostlist expression such as `gpu[01-04,09]` or `rack[1-2]-n[1-8]`, so
//! `--hosts "$SLURM_JOB_NODELIST"` works) or `--hostfile` (one host per line, `#` comments; a
//! line's first word counts, so mpirun hostfiles with `slots=8` and MPICH's `host:8` work).

use std::path::Path;

use anyhow::{Context, bail};

/// Hosts from a `--hosts` value, in order.
///
/// Errors: an empty name, an unbalanced bracket, a range that is not numbers, or a host listed
/// twice; the message names it.
pub fn parse_list(list: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for word in split_top(list)? {
        let word = word.trim();
        if word.is_empty() {
            bail!("--hosts {list:?} has an empty host name (two commas in a row?)");
        }
        out.extend(expand(word)?);
    }
    no_duplicates(&out)?;
    Ok(out)
}

/// Hosts from a hostfile.
///
/// Errors: the file cannot be read, holds no host, or a line does not parse (named by line).
pub fn read_file(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the hostfile {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(word) = line.split_whitespace().next() else {
            continue;
        };
        // MPICH's `host:slots` (an IPv6 address has more colons and is kept whole).
        let word = match word.split_once(':') {
            Some((h, n)) if !n.contains(':') && n.parse::<u32>().is_ok() => h,
            _ => word,
        };
        out.extend(expand(word).with_context(|| format!("{}:{}", path.display(), i + 1))?);
    }
    if out.is_empty() {
        bail!("the hostfile {} names no host", path.display());
    }
    no_duplicates(&out)?;
    Ok(out)
}

fn no_duplicates(hosts: &[String]) -> anyhow::Result<()> {
    for (i, h) in hosts.iter().enumerate() {
        if hosts[..i].contains(h) {
            bail!("host {h} is listed twice: list each host once");
        }
    }
    Ok(())
}

/// Splits on commas outside brackets.
fn split_top(list: &str) -> anyhow::Result<Vec<&str>> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth
                    .checked_sub(1)
                    .with_context(|| format!("{list:?} has a ']' without its '['"))?;
            }
            ',' if depth == 0 => {
                out.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        bail!("{list:?} has a '[' without its ']'");
    }
    out.push(&list[start..]);
    Ok(out)
}

/// Expands one hostlist expression: each `[…]` group (comma-separated numbers and `lo-hi`
/// ranges, zero-padded to the width of `lo`) multiplies the names.
fn expand(word: &str) -> anyhow::Result<Vec<String>> {
    let Some(open) = word.find('[') else {
        if word.contains(']') {
            bail!("{word:?} has a ']' without its '['");
        }
        return Ok(vec![word.to_string()]);
    };
    let close = word[open..]
        .find(']')
        .map(|i| open + i)
        .with_context(|| format!("{word:?} has a '[' without its ']'"))?;
    let (head, group, tail) = (&word[..open], &word[open + 1..close], &word[close + 1..]);
    let mut values = Vec::new();
    for part in group.split(',') {
        let bad = || {
            format!(
                "{word:?}: {part:?} is not a number or a range such as 01-16 (Slurm's hostlist syntax)"
            )
        };
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (a, b): (u64, u64) =
                    (lo.parse().with_context(bad)?, hi.parse().with_context(bad)?);
                if a > b {
                    bail!("{word:?}: the range {part} runs backwards");
                }
                if b - a >= 100_000 {
                    bail!("{word:?}: the range {part} names more than 100000 hosts");
                }
                values.extend((a..=b).map(|v| format!("{v:0width$}", width = lo.len())));
            }
            None => {
                part.parse::<u64>().with_context(bad)?;
                values.push(part.to_string());
            }
        }
    }
    let tails = expand(tail)?;
    Ok(values
        .iter()
        .flat_map(|v| tails.iter().map(move |t| format!("{head}{v}{t}")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_hostlist_expressions() {
        assert_eq!(parse_list("a,b").unwrap(), ["a", "b"]);
        assert_eq!(
            parse_list("gpu[01-03,09],login").unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu09", "login"]
        );
        assert_eq!(
            parse_list("rack[1-2]-n[7-8]").unwrap(),
            ["rack1-n7", "rack1-n8", "rack2-n7", "rack2-n8"]
        );
        assert_eq!(parse_list("10.0.0.1,10.0.0.2").unwrap().len(), 2);
    }

    #[test]
    fn bad_lists_say_what_is_wrong() {
        let e = |s: &str| parse_list(s).unwrap_err().to_string();
        assert!(e("a,,b").contains("empty host name"));
        assert!(e("gpu[01-03").contains("without its ']'"));
        assert!(e("gpu01]").contains("without its '['"));
        assert!(e("gpu[a-c]").contains("not a number or a range"));
        assert!(e("gpu[5-1]").contains("backwards"));
        assert!(e("a,b,a").contains("host a is listed twice"));
    }

    #[test]
    fn hostfiles_of_mpirun_and_mpich() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hosts");
        std::fs::write(
            &p,
            "# nodes\nnode1 slots=8\nnode2:8   # MPICH\n\nnode[3-4]\nfe80::1\n",
        )
        .unwrap();
        assert_eq!(
            read_file(&p).unwrap(),
            ["node1", "node2", "node3", "node4", "fe80::1"]
        );
        std::fs::write(&p, "# nobody\n").unwrap();
        assert!(
            read_file(&p)
                .unwrap_err()
                .to_string()
                .contains("names no host")
        );
        std::fs::write(&p, "ok\nbad[x]\n").unwrap();
        let e = format!("{:#}", read_file(&p).unwrap_err());
        assert!(e.contains("hosts:2"), "{e}");
    }
}
