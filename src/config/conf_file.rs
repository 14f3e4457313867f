//! nccl.conf files read with NCCL's line rules (`src/misc/param.cc:setEnvFile`).

/// Longest line `fgets` returns in NCCL's 4096-byte buffer; longer lines arrive in pieces.
const LINE_MAX: usize = 4095;
/// Longest key and value NCCL keeps (1024-byte buffers); the rest is cut off.
const FIELD_MAX: usize = 1023;

/// One `KEY=VALUE` pair as NCCL would apply it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConfEntry {
    /// The key, verbatim (no trimming).
    pub key: String,
    /// The value, verbatim.
    pub value: String,
    /// 1-based line number.
    pub line: usize,
}

/// Something NCCL does with a line that the writer probably did not expect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConfNote {
    /// 1-based line number.
    pub line: usize,
    /// What happens, in words.
    pub message: String,
}

/// Splits conf-file bytes into entries as NCCL does: lines are read `fgets`-style (at most 4095
/// bytes at a time), a trailing `\n` then `\r` is dropped, lines starting with `#` are skipped, the
/// key is the text before the first `=`, the value the rest; both are cut at 1023 bytes. Lines
/// without `=` and empty keys are skipped. Invalid UTF-8 is replaced (U+FFFD) and noted.
pub(super) fn parse(bytes: &[u8]) -> (Vec<ConfEntry>, Vec<ConfNote>) {
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    let mut line_no = 1;
    let mut rest = bytes;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .take(LINE_MAX)
            .position(|&b| b == b'\n')
            .map_or(rest.len().min(LINE_MAX), |p| p + 1);
        let (mut piece, tail) = rest.split_at(end);
        rest = tail;
        let complete = piece.ends_with(b"\n");
        if !complete && !rest.is_empty() {
            notes.push(ConfNote {
                line: line_no,
                message: format!(
                    "line is longer than {LINE_MAX} bytes: NCCL reads it in pieces, and the pieces after the first are read as lines of their own"
                ),
            });
        }
        piece = piece.strip_suffix(b"\n").unwrap_or(piece);
        piece = piece.strip_suffix(b"\r").unwrap_or(piece);
        let text = String::from_utf8_lossy(piece);
        if matches!(text, std::borrow::Cow::Owned(_)) {
            notes.push(ConfNote {
                line: line_no,
                message: "line is not valid UTF-8; shown with replacement characters".into(),
            });
        }
        read_line(&text, line_no, &mut entries, &mut notes);
        if complete {
            line_no += 1;
        }
    }
    (entries, notes)
}

fn read_line(text: &str, line: usize, entries: &mut Vec<ConfEntry>, notes: &mut Vec<ConfNote>) {
    if text.starts_with('#') {
        return;
    }
    let Some((key, value)) = text.split_once('=') else {
        if !text.trim().is_empty() {
            notes.push(ConfNote {
                line,
                message: format!("{text:?} has no '=': NCCL skips the line"),
            });
        }
        return;
    };
    if key.is_empty() {
        notes.push(ConfNote {
            line,
            message: "the line starts with '=': an empty name cannot be set, NCCL skips it".into(),
        });
        return;
    }
    let key = cut(key, "name", line, notes);
    let value = cut(value, "value", line, notes);
    entries.push(ConfEntry { key, value, line });
}

fn cut(field: &str, what: &str, line: usize, notes: &mut Vec<ConfNote>) -> String {
    if field.len() <= FIELD_MAX {
        return field.to_string();
    }
    let mut end = FIELD_MAX;
    while !field.is_char_boundary(end) {
        end -= 1;
    }
    notes.push(ConfNote {
        line,
        message: format!(
            "the {what} is longer than {FIELD_MAX} bytes: NCCL keeps only the first {FIELD_MAX}"
        ),
    });
    field[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_line_rules() {
        let (e, n) = parse(
            b"# comment\nNCCL_A=1\r\n NCCL_B = 2\nNCCL_C==eth0\nno equals\n=x\nNCCL_D=\n  \nNCCL_E=a=b",
        );
        let got: Vec<(&str, &str, usize)> = e
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str(), e.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("NCCL_A", "1", 2),
                (" NCCL_B ", " 2", 3),
                ("NCCL_C", "=eth0", 4),
                ("NCCL_D", "", 7),
                ("NCCL_E", "a=b", 9),
            ]
        );
        assert_eq!(n.len(), 2, "{n:?}");
        assert_eq!((n[0].line, n[1].line), (5, 6));
    }

    #[test]
    fn long_lines_and_fields_are_cut_like_nccl() {
        let long_value = format!("NCCL_X={}\n", "v".repeat(2000));
        let (e, n) = parse(long_value.as_bytes());
        assert_eq!(e[0].value.len(), FIELD_MAX);
        assert!(n[0].message.contains("1023"));

        let long_line = format!("NCCL_Y=1{}NCCL_Z=2\n", " ".repeat(LINE_MAX - 8));
        let (e, n) = parse(long_line.as_bytes());
        assert_eq!(e.len(), 2, "the tail is read as a line of its own: {e:?}");
        assert_eq!(e[1].key, "NCCL_Z");
        assert!(n[0].message.contains("pieces"));
    }
}
