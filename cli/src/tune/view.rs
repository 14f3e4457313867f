//! The `rnccl tune` screen: the form, the runs' busbw curves overlaid, the table of runs and a
//! help line. Pure functions of an [`App`], tested as text on ratatui's TestBackend.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Paragraph, Row, Table,
};

use super::model::{Field, Form, KNOBS, Run, Status};

/// Colours of successive runs' curves.
const COLORS: [Color; 6] = [
    Color::Cyan,
    Color::Yellow,
    Color::Green,
    Color::Magenta,
    Color::Blue,
    Color::Red,
];

/// The screen's state.
#[derive(Debug, Default)]
pub struct App {
    pub form: Form,
    /// Index of the focused field in [`Field::all`].
    pub focus: usize,
    pub runs: Vec<Run>,
    /// The last thing said to the user (a file written, why a run cannot start).
    pub message: Option<String>,
}

impl App {
    /// The focused field.
    pub fn field(&self) -> Field {
        Field::all()[self.focus]
    }

    /// Whether a sweep is running.
    pub fn running(&self) -> bool {
        self.runs.iter().any(|r| r.status == Status::Running)
    }
}

fn label(f: Field) -> String {
    match f {
        Field::Coll => "collective".into(),
        Field::MinBytes => "smallest size".into(),
        Field::MaxBytes => "largest size".into(),
        Field::Ranks => "ranks".into(),
        Field::Knob(i) => KNOBS[i].into(),
    }
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App) {
    let [top, runs, msg, foot] = Layout::vertical([
        Constraint::Min(14),
        Constraint::Length(app.runs.len().clamp(1, 6) as u16 + 3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let [form, chart] =
        Layout::horizontal([Constraint::Length(58), Constraint::Min(20)]).areas(top);
    draw_form(f, form, app);
    draw_chart(f, chart, app);
    draw_runs(f, runs, app);
    // The focused field's problem in full, else the last message.
    match app.form.error(app.field()) {
        Some(e) => f.render_widget(
            Paragraph::new(Span::styled(e, Style::default().fg(Color::Red))),
            msg,
        ),
        None => {
            if let Some(m) = &app.message {
                f.render_widget(Paragraph::new(m.as_str()), msg);
            }
        }
    }
    f.render_widget(
        Paragraph::new(Line::from(Span::styled(
            "↑/↓ field · type a value · ←/→ collective · Enter run · Ctrl-S save best · Esc quit",
            Style::default().add_modifier(Modifier::REVERSED),
        ))),
        foot,
    );
}

fn draw_form(f: &mut Frame, area: Rect, app: &App) {
    let mut lines = Vec::new();
    for (i, field) in Field::all().into_iter().enumerate() {
        let focused = i == app.focus;
        let value = app.form.text(field);
        let shown = match (field, value.is_empty()) {
            (Field::Coll, _) => format!("◀ {value} ▶"),
            (_, true) => "(unset)".into(),
            _ => value.to_string(),
        };
        let mut spans = vec![
            Span::raw(format!("{:<22}", label(field))),
            Span::styled(
                format!("{shown}{}", if focused { "▏" } else { "" }),
                if focused {
                    Style::default().add_modifier(Modifier::REVERSED)
                } else {
                    Style::default()
                },
            ),
        ];
        if app.form.error(field).is_some() {
            spans.push(Span::styled("  ✗", Style::default().fg(Color::Red)));
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title("sweep")),
        area,
    );
}

fn draw_chart(f: &mut Frame, area: Rect, app: &App) {
    let data: Vec<Vec<(f64, f64)>> = app
        .runs
        .iter()
        .map(|r| {
            r.points
                .iter()
                .map(|&(b, bw)| ((b.max(1) as f64).log2(), bw))
                .collect()
        })
        .collect();
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for p in data.iter().flatten() {
        x0 = x0.min(p.0);
        x1 = x1.max(p.0);
        y1 = y1.max(p.1);
    }
    if x0 > x1 {
        (x0, x1) = (20.0, 26.0);
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    let datasets = data
        .iter()
        .enumerate()
        .map(|(i, d)| {
            Dataset::default()
                .name(format!("#{}", i + 1))
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(COLORS[i % COLORS.len()]))
                .data(d)
        })
        .collect();
    let size = |l: f64| {
        let b = 2f64.powf(l) as u64;
        match b {
            b if b >= 1 << 30 => format!("{}G", b >> 30),
            b if b >= 1 << 20 => format!("{}M", b >> 20),
            b if b >= 1 << 10 => format!("{}K", b >> 10),
            b => format!("{b}"),
        }
    };
    let chart = Chart::new(datasets)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("busbw GB/s by size"),
        )
        .x_axis(
            Axis::default()
                .bounds([x0, x1.max(x0 + 1.0)])
                .labels([size(x0), size(x1.max(x0 + 1.0))]),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y1])
                .labels(["0".to_string(), format!("{y1:.1}")]),
        );
    f.render_widget(chart, area);
}

fn draw_runs(f: &mut Frame, area: Rect, app: &App) {
    let best = super::model::best(&app.runs, super::model::COLLS[app.form.coll]);
    let rows = app.runs.iter().enumerate().rev().take(6).map(|(i, r)| {
        let status = match &r.status {
            Status::Running => format!("running {}/{}", r.points.len(), r.expected),
            Status::Done if best.is_some_and(|b| std::ptr::eq(b, r)) => "done · best".into(),
            Status::Done => "done".into(),
            Status::Failed(e) => format!("failed: {e}"),
        };
        Row::new(vec![
            Cell::from(format!("#{}", i + 1)).style(Style::default().fg(COLORS[i % COLORS.len()])),
            Cell::from(format!("{} ×{}", r.coll, r.ranks)),
            Cell::from(r.label()),
            Cell::from(format!("{:.2}", r.avg())),
            Cell::from(status),
        ])
    });
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(4),
                Constraint::Length(18),
                Constraint::Min(20),
                Constraint::Length(9),
                Constraint::Length(30),
            ],
        )
        .header(
            Row::new(["run", "collective", "settings", "GB/s avg", "status"])
                .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(Block::default().borders(Borders::ALL).title("runs")),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::super::model::Run;
    use super::*;

    fn screen(app: &App, w: u16, h: u16) -> String {
        crate::tui::render(w, h, |f| draw(f, app))
    }

    fn run(settings: Vec<(&'static str, String)>, scale: f64, status: Status) -> Run {
        Run {
            coll: "all_reduce",
            settings,
            ranks: 2,
            points: (20..=26)
                .map(|l| (1u64 << l, scale * f64::from(l - 19)))
                .collect(),
            expected: 7,
            status,
        }
    }

    #[test]
    fn a_bad_value_and_two_runs_overlaid() {
        let mut app = App::default();
        app.form.knobs[0] = "Rign".into();
        app.focus = 4;
        app.runs = vec![
            run(vec![], 1.0, Status::Done),
            run(
                vec![("NCCL_MIN_NCHANNELS", "4".into())],
                1.5,
                Status::Running,
            ),
        ];
        app.message = Some("fix the values marked in red first".into());
        insta::assert_snapshot!(screen(&app, 120, 24));
    }

    #[test]
    fn the_empty_screen_and_a_failed_run_narrow() {
        insta::assert_snapshot!("empty", screen(&App::default(), 100, 22));
        let app = App {
            runs: vec![run(
                vec![],
                1.0,
                Status::Failed("NCCL_ALGO: no algorithm".into()),
            )],
            ..App::default()
        };
        insta::assert_snapshot!("narrow_failed", screen(&app, 70, 22));
    }
}
