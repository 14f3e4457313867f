//! Saved benchmark results read back as curves: rnccl's `-J`/`--format json` documents,
//! nccl-tests' `-J` JSON, and nccl-tests' (or `rnccl bench`'s) text output. A file whose first
//! non-blank character is `{` is JSON; anything else is read as text.

mod json;
mod text;

use std::path::Path;

use super::curve::Curve;

/// Why a result file cannot be read. Each message names the file, and the line where there
/// is one.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file cannot be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A line does not hold what it should.
    #[error("{path}:{line}: {what}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What was wrong and what was expected.
        what: String,
    },
    /// The file as a whole is not a result file.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: String,
        /// What was wrong and what was expected.
        what: String,
    },
}

/// What a result file may hold, for messages.
const EXPECTED: &str = "expected nccl-tests' (or rnccl bench's) text output, whose table rows \
start with size count type redop root, or a -J JSON document from rnccl or nccl-tests";

/// A parse failure inside a file, before the file's name is attached.
#[derive(Debug, PartialEq)]
pub(super) struct Failure {
    /// 1-based line, when the failure has one.
    line: Option<usize>,
    /// What was wrong and what was expected.
    what: String,
}

impl Failure {
    fn at(line: usize, what: impl Into<String>) -> Failure {
        Failure {
            line: Some(line),
            what: what.into(),
        }
    }

    fn whole(what: impl Into<String>) -> Failure {
        Failure {
            line: None,
            what: what.into(),
        }
    }

    fn in_file(self, path: &Path) -> ReadError {
        let path = path.display().to_string();
        match self.line {
            Some(line) => ReadError::Line {
                path,
                line,
                what: self.what,
            },
            None => ReadError::File {
                path,
                what: self.what,
            },
        }
    }
}

/// Reads one result file into its curves (at least one, each with at least one row).
///
/// Errors: the file cannot be read, is not UTF-8 text, or holds no result rows or a malformed
/// one ([`ReadError`]).
pub fn read_file(path: &Path) -> Result<Vec<Curve>, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure::whole(format!("not UTF-8 text; {EXPECTED}")).in_file(path))?;
    parse(&text).map_err(|f| f.in_file(path))
}

/// Parses a result file's text.
pub(super) fn parse(text: &str) -> Result<Vec<Curve>, Failure> {
    let curves = if text.trim_start().starts_with('{') {
        json::parse(text)?
    } else {
        text::parse(text)?
    };
    if curves.is_empty() {
        return Err(Failure::whole(format!("no result rows; {EXPECTED}")));
    }
    Ok(curves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_unrelated_files_are_refused_as_a_whole() {
        for text in ["", "\n\n", "hello world\n", "# only a comment\n"] {
            let f = parse(text).unwrap_err();
            assert_eq!(f.line, None, "{text:?}");
            assert!(f.what.starts_with("no result rows"), "{}", f.what);
        }
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.log");
        std::fs::write(&p, "# header\n       8   2  float\n").unwrap();
        let e = read_file(&p).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: ", p.display())), "{e}");
        std::fs::write(&p, [0xff, 0xfe, 0x00]).unwrap();
        let e = read_file(&p).unwrap_err().to_string();
        assert!(e.contains("not UTF-8 text"), "{e}");
        let e = read_file(&dir.path().join("missing.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("missing.json") && e.contains("No such file"),
            "{e}"
        );
    }
}
