//! Text layout for an 80-column terminal: labelled, wrapped lines and severity colours. Colour
//! codes are always written; `anstream` strips them unless stdout is a terminal.

use anstyle::{AnsiColor, Style};
use rnccl::config::Severity;

/// Line width of text output.
pub const WIDTH: usize = 80;
/// Column where the text after a label starts.
const TEXT_COLUMN: usize = 12;

/// `text` in `style`.
pub fn paint(style: Style, text: &str) -> String {
    format!("{}{text}{}", style.render(), style.render_reset())
}

/// Bold.
pub fn bold(text: &str) -> String {
    paint(Style::new().bold(), text)
}

/// The style of a severity label.
pub fn severity_style(s: Severity) -> Style {
    let color = match s {
        Severity::Error => AnsiColor::Red,
        Severity::Warning => AnsiColor::Yellow,
        Severity::Note => AnsiColor::Cyan,
    };
    Style::new().bold().fg_color(Some(color.into()))
}

/// `  label     text`, the text wrapped at [`WIDTH`] and continued under itself; the label may be
/// styled.
pub fn labelled(label: &str, style: Style, text: &str) -> String {
    let indent = " ".repeat(TEXT_COLUMN);
    let opts = textwrap::Options::new(WIDTH)
        .initial_indent(&indent)
        .subsequent_indent(&indent)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let wrapped = textwrap::fill(text, opts);
    let pad = " ".repeat(TEXT_COLUMN.saturating_sub(2 + label.len()).max(1));
    let body = &wrapped[TEXT_COLUMN.min(wrapped.len())..];
    format!("  {}{pad}{body}\n", paint(style, label))
}

/// A finding: the severity label, the message, and the hint on its own line after an arrow.
pub fn finding(f: &rnccl::config::Finding) -> String {
    let mut out = labelled(f.severity.word(), severity_style(f.severity), &f.message);
    if !f.hint.is_empty() {
        out.push_str(&labelled("", Style::new(), &format!("→ {}", f.hint)));
    }
    out
}

/// `text` indented by `indent` spaces and wrapped at [`WIDTH`].
pub fn paragraph(text: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let opts = textwrap::Options::new(WIDTH)
        .initial_indent(&pad)
        .subsequent_indent(&pad)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    textwrap::fill(text, opts) + "\n"
}

/// `s` cut to `width` display columns, ending in `…` when cut.
pub fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A value as shown after `NAME=`: bare, or quoted when it is empty, has surrounding spaces or
/// control characters.
pub fn shown_value(raw: &str) -> String {
    let plain = !raw.is_empty() && raw.trim() == raw && !raw.chars().any(char::is_control);
    if plain {
        raw.to_string()
    } else {
        format!("{raw:?}")
    }
}
