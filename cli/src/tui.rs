//! What the terminal screens (`top`, `tune`) share: the check that there is a terminal to draw
//! on, and rendering a screen to text (`top --once`, tests).

use std::io::IsTerminal;

/// Fails unless standard output is a terminal.
///
/// Errors: names `command` and says to run it in a terminal.
pub fn require_terminal(command: &str) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!(
            "rnccl {command} draws on a terminal: run it in one (standard output is not a terminal)"
        );
    }
    Ok(())
}

/// What `draw` puts on a `w` × `h` screen, as text (ratatui's TestBackend).
#[cfg(test)]
pub fn render(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    t.draw(draw).unwrap();
    format!("{}", t.backend())
}

/// What `draw` puts on a `w` × `h` screen, as plain lines (trailing blanks trimmed).
pub fn screen_text(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let backend = ratatui::backend::TestBackend::new(w, h);
    // The test backend cannot fail (its error type is uninhabited).
    let Ok(mut t) = ratatui::Terminal::new(backend);
    let Ok(_) = t.draw(draw);
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let line: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
