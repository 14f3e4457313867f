//! Writing to standard output so that a reader that stops early (`rnccl topo | head`) ends the
//! command quietly: writes return the broken pipe as an error instead of panicking as `println!`
//! does, and [`is_broken_pipe`] lets `main` turn it into a clean exit.

use std::process::ExitCode;

use std::io::Write;

/// Writes `text` to standard output and flushes it.
///
/// Errors: the write error, a broken pipe included ([`is_broken_pipe`]).
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes each line of `lines` with a newline, as [`print`] does.
///
/// Errors: as [`print`].
pub fn print_lines(lines: &[String]) -> std::io::Result<()> {
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    print(&text)
}

/// For commands whose exit status 1 reports a finding (`status`, `ibcheck`): a command that
/// could not run prints `e` as the error line and exits 2, so a script never reads "could not
/// look" as "looked and found". A closed output pipe stays a success.
pub fn could_not_run(result: anyhow::Result<ExitCode>) -> anyhow::Result<ExitCode> {
    match result {
        Err(e) if !is_broken_pipe(&e) => {
            eprintln!("rnccl: error: {e:#}");
            Ok(ExitCode::from(2))
        }
        other => other,
    }
}

/// True when `e` (or any error it wraps) is a write to a closed pipe: the reader went away,
/// which is not the command's failure.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
