//! What the terminal screens (`top`, `tune`) share: the check that there is a terminal to draw
//! on, and rendering a screen to text for tests.

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
