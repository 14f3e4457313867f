//! The state of the `rnccl top` screen and how it is drawn: pure functions of an [`App`], so
//! they are tested on ratatui's TestBackend without a terminal.

use std::time::Duration;

use ratatui::Frame;
use ratatui::crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table};

use super::model::{Job, Snapshot, Stuck};
use rnccl::stats::{Direction, OpSnapshot, Path};

/// Which screen is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// The host's jobs.
    Jobs,
    /// One job's ranks, channels and peers.
    Detail,
}

/// The screen's state.
#[derive(Debug)]
pub struct App {
    pub snap: Snapshot,
    /// Index of the selected job.
    pub selected: usize,
    pub screen: Screen,
    /// Time between samples.
    pub interval: Duration,
    /// Stall length that marks a link stuck.
    pub stuck_after: Duration,
}

impl App {
    /// An empty screen.
    pub fn new(interval: Duration, stuck_after: Duration) -> App {
        App {
            snap: Snapshot::default(),
            selected: 0,
            screen: Screen::Jobs,
            interval,
            stuck_after,
        }
    }

    /// Takes a new sample, keeping the selection on the same job where it still exists.
    pub fn update(&mut self, snap: Snapshot) {
        let id = self.snap.jobs.get(self.selected).map(|j| j.comm_id);
        self.selected = id
            .and_then(|id| snap.jobs.iter().position(|j| j.comm_id == id))
            .unwrap_or(self.selected.min(snap.jobs.len().saturating_sub(1)));
        if snap.jobs.is_empty() {
            self.screen = Screen::Jobs;
        }
        self.snap = snap;
    }

    /// Jobs in the latest sample.
    pub fn jobs(&self) -> usize {
        self.snap.jobs.len()
    }

    /// Handles a key; returns false when the user quits.
    pub fn key(&mut self, code: KeyCode) -> bool {
        let n = self.snap.jobs.len();
        match code {
            KeyCode::Char('q') => return false,
            KeyCode::Esc if self.screen == Screen::Jobs => return false,
            KeyCode::Esc | KeyCode::Backspace | KeyCode::Left => self.screen = Screen::Jobs,
            KeyCode::Enter | KeyCode::Right if n > 0 => self.screen = Screen::Detail,
            KeyCode::Down | KeyCode::Char('j') if n > 0 => self.selected = (self.selected + 1) % n,
            KeyCode::Up | KeyCode::Char('k') if n > 0 => {
                self.selected = (self.selected + n - 1) % n;
            }
            _ => {}
        }
        true
    }
}

/// GB/s (1e9 bytes per second) with one decimal.
fn gbps(rate: f64) -> String {
    // Counters that went back (a rank restarted) or rounding must not print "-0.0".
    format!("{:.1}", rate.max(0.0) / 1e9 + 0.0)
}

fn op_text(op: Option<&OpSnapshot>) -> String {
    match op {
        None => "idle".into(),
        Some(o) => format!(
            "{} {} {} #{} {:.1}s {}",
            o.info.func.nccl_name().trim_start_matches("nccl"),
            crate::units::bytes_iec((o.info.count * o.info.dtype.size()) as u64),
            o.info.dtype.name(),
            o.info.seq,
            o.elapsed_s,
            // GPU kernels do not count steps for the host.
            match o.steps_total {
                0 => "-".to_string(),
                t => format!("{}/{t}", o.steps_done),
            }
        ),
    }
}

/// The path a link's bytes take, in NCCL's words (as its INFO lines and `rnccl status` give
/// them).
fn path_name(p: Path) -> &'static str {
    match p {
        Path::SameProcess => "P2P/direct",
        Path::Shm => "SHM",
        Path::Tcp => "NET/Socket",
        Path::Window => "P2P/window",
        Path::GpuP2p => "P2P/IPC",
        Path::GpuHost => "SHM/host",
        Path::GpuNet => "NET/Socket",
        Path::GpuNetIb => "NET/IB",
        Path::NcclKernel => "NCCL kernel",
        Path::NcclNet => "NCCL net",
        Path::Ib => "NET/IB",
    }
}

/// A peer rank, or "?" when the writer did not know it (NVIDIA NCCL's kernel channels).
fn peer_text(peer: usize) -> String {
    match peer {
        rnccl::stats::UNKNOWN_PEER => "?".into(),
        p => p.to_string(),
    }
}

fn stuck_text(s: &Stuck) -> String {
    let what = match s.direction {
        Direction::Recv => "to receive from",
        Direction::Send => "to send to",
        Direction::Read => "to read the window of",
    };
    format!(
        "STUCK: rank {} (pid {}) channel {} waiting {what} rank {} for {:.1} s",
        s.rank, s.pid, s.channel, s.peer, s.for_s
    )
}

fn help(screen: Screen) -> Line<'static> {
    let keys = match screen {
        Screen::Jobs => "↑/↓ select · Enter details · q quit",
        Screen::Detail => "↑/↓ other job · Esc back · q quit",
    };
    Line::from(Span::styled(
        keys,
        Style::default().add_modifier(Modifier::REVERSED),
    ))
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame, app: &App) {
    let [title, main, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let s = &app.snap;
    let mut head = format!(
        "rnccl top · {} job{} · every {} ms · stuck after {} s",
        s.jobs.len(),
        if s.jobs.len() == 1 { "" } else { "s" },
        app.interval.as_millis(),
        app.stuck_after.as_secs_f64()
    );
    if !s.stale.is_empty() {
        head += &format!(" · {} stale page(s)", s.stale.len());
    }
    if !s.unreadable.is_empty() {
        head += &format!(" · {} unreadable page(s)", s.unreadable.len());
    }
    f.render_widget(Paragraph::new(head), title);
    f.render_widget(Paragraph::new(help(app.screen)), foot);
    match s.jobs.get(app.selected) {
        None => f.render_widget(
            Paragraph::new(
                "No rnccl jobs on this host. Running jobs publish /dev/shm/rnccl-stats-<pid> \
                 (unless RNCCL_STATS=0).",
            )
            .wrap(ratatui::widgets::Wrap { trim: true })
            .block(Block::default().borders(Borders::ALL).title("jobs")),
            main,
        ),
        Some(job) if app.screen == Screen::Detail => detail(f, main, job),
        Some(_) => jobs(f, main, app),
    }
}

fn jobs(f: &mut Frame, area: Rect, app: &App) {
    let rows = app.snap.jobs.iter().enumerate().map(|(i, j)| {
        let mut pids: Vec<u32> = j.ranks.iter().map(|r| r.pid).collect();
        pids.dedup();
        let status = match j.stuck.first() {
            Some(s) => Cell::from(format!("stuck r{} ch{} ⇠ r{}", s.rank, s.channel, s.peer))
                .style(Style::default().fg(Color::Red)),
            None => Cell::from("ok"),
        };
        let row = Row::new(vec![
            Cell::from(format!("{:016x}", j.comm_id)),
            Cell::from(format!("{}/{}", j.ranks.len(), j.nranks)),
            Cell::from(
                pids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Cell::from(
                j.transports
                    .iter()
                    .map(|p| path_name(*p))
                    .collect::<Vec<_>>()
                    .join("+"),
            ),
            Cell::from(op_text(j.op())),
            Cell::from(gbps(j.busbw())),
            status,
        ]);
        if i == app.selected {
            row.style(Style::default().add_modifier(Modifier::REVERSED))
        } else {
            row
        }
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(16),
            Constraint::Length(7),
            Constraint::Length(14),
            Constraint::Length(11),
            Constraint::Min(20),
            Constraint::Length(7),
            Constraint::Length(22),
        ],
    )
    .header(
        Row::new([
            "communicator",
            "ranks",
            "pids",
            "transport",
            "operation",
            "busbw",
            "status",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(Block::default().borders(Borders::ALL).title("jobs"));
    f.render_widget(table, area);
}

fn detail(f: &mut Frame, area: Rect, job: &Job) {
    // Up to three stuck links, a line each (two where the screen is narrow).
    let per = if area.width < 80 { 2 } else { 1 };
    let stuck_lines = job.stuck.len().min(3) as u16 * per;
    let [info, grid, peers, spark, stuck] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Min(4),
        Constraint::Length(4),
        Constraint::Length(stuck_lines),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(format!(
            "communicator {:016x} · {} of {} ranks here · {} · busbw {} GB/s",
            job.comm_id,
            job.ranks.len(),
            job.nranks,
            op_text(job.op()),
            gbps(job.busbw())
        )),
        info,
    );
    // Rank × channel grid of send rates, as many channels as fit.
    let mut channels: Vec<u16> = job
        .ranks
        .iter()
        .flat_map(|r| r.channels.keys().copied())
        .collect();
    channels.sort_unstable();
    channels.dedup();
    let fit = (grid.width.saturating_sub(10) / 6) as usize;
    let shown = &channels[..channels.len().min(fit)];
    let mut header = vec![Cell::from("rank")];
    header.extend(shown.iter().map(|c| Cell::from(format!("ch{c}"))));
    let rows = job.ranks.iter().map(|r| {
        let mut cells = vec![Cell::from(format!(
            "{}{}",
            r.rank,
            r.device.map(|d| format!(" g{d}")).unwrap_or_default()
        ))];
        cells.extend(shown.iter().map(|c| {
            let stuck = job
                .stuck
                .iter()
                .any(|s| s.rank == r.rank && s.channel == *c);
            if stuck {
                Cell::from("STUCK")
                    .style(Style::default().fg(Color::Red).add_modifier(Modifier::BOLD))
            } else {
                Cell::from(r.channels.get(c).map(|v| gbps(*v)).unwrap_or_default())
            }
        }));
        Row::new(cells)
    });
    let mut widths = vec![Constraint::Length(8)];
    widths.extend(shown.iter().map(|_| Constraint::Length(5)));
    let title = if shown.len() < channels.len() {
        format!(
            "GB/s sent per rank × channel ({} of {} channels)",
            shown.len(),
            channels.len()
        )
    } else {
        "GB/s sent per rank × channel".to_string()
    };
    f.render_widget(
        Table::new(rows, widths)
            .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
            .block(Block::default().borders(Borders::ALL).title(title)),
        grid,
    );
    let rows = job.ranks.iter().flat_map(|r| {
        r.peers.iter().map(move |p| {
            let dir = match p.direction {
                Direction::Send => "→",
                Direction::Recv => "←",
                Direction::Read => "⇠ read",
            };
            Row::new(vec![
                Cell::from(r.rank.to_string()),
                Cell::from(format!("{dir} {}", peer_text(p.peer))),
                Cell::from(path_name(p.transport)),
                Cell::from(gbps(p.rate)),
                Cell::from(format!("{:.0}%", p.waiting * 100.0)),
            ])
        })
    });
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(5),
                Constraint::Length(10),
                Constraint::Length(11),
                Constraint::Length(7),
                Constraint::Length(8),
            ],
        )
        .header(
            Row::new(["rank", "peer", "via", "GB/s", "waiting"])
                .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title("links per peer"),
        ),
        peers,
    );
    let data: Vec<u64> = job.history.iter().map(|r| (r / 1e6) as u64).collect();
    let from = data
        .len()
        .saturating_sub(spark.width.saturating_sub(2) as usize);
    f.render_widget(
        Sparkline::default().data(&data[from..]).block(
            Block::default()
                .borders(Borders::ALL)
                .title("busbw MB/s, history"),
        ),
        spark,
    );
    let lines: Vec<Line> = job
        .stuck
        .iter()
        .take(3)
        .map(|s| Line::from(Span::styled(stuck_text(s), Style::default().fg(Color::Red))))
        .collect();
    f.render_widget(
        Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: true }),
        stuck,
    );
}

#[cfg(test)]
mod tests {
    use super::super::model::Model;
    use super::super::model::tests::{found, link};
    use super::*;
    use std::time::Instant;

    fn screen(app: &App, w: u16, h: u16) -> String {
        crate::tui::render(w, h, |f| draw(f, app))
    }

    /// Two samples of a 2-rank job, the second with rank 1 stuck on channel 1.
    fn app() -> App {
        let mut m = Model::new(Duration::from_secs(5));
        let t0 = Instant::now();
        let sends = |b: u64| {
            vec![
                link(1, 0, Direction::Send, b),
                link(1, 1, Direction::Send, b / 2),
            ]
        };
        m.update(
            &[
                found(10, 0, sends(0)),
                found(11, 1, vec![link(0, 1, Direction::Recv, 0)]),
            ],
            t0,
        );
        let mut stalled = link(0, 1, Direction::Recv, 0);
        stalled.stalled_ns = 7_200_000_000;
        stalled.wait_ns = 7_200_000_000;
        let snap = m.update(
            &[
                found(10, 0, sends(4_000_000_000)),
                found(11, 1, vec![stalled]),
            ],
            t0 + Duration::from_secs(1),
        );
        let mut app = App::new(Duration::from_millis(1000), Duration::from_secs(5));
        app.update(snap);
        app
    }

    #[test]
    fn the_jobs_screen() {
        insta::assert_snapshot!(screen(&app(), 110, 8));
    }

    #[test]
    fn the_detail_screen_marks_the_stuck_link() {
        let mut a = app();
        assert!(a.key(KeyCode::Enter));
        assert_eq!(a.screen, Screen::Detail);
        insta::assert_snapshot!(screen(&a, 90, 24));
    }

    #[test]
    fn empty_and_narrow_screens() {
        let a = App::new(Duration::from_millis(500), Duration::from_secs(5));
        insta::assert_snapshot!("empty", screen(&a, 80, 6));
        let mut b = app();
        b.key(KeyCode::Enter);
        insta::assert_snapshot!("narrow_detail", screen(&b, 40, 20));
    }

    #[test]
    fn keys_move_the_selection_and_quit() {
        let mut a = app();
        assert!(a.key(KeyCode::Down), "one job: the selection wraps");
        assert_eq!(a.selected, 0);
        a.key(KeyCode::Enter);
        assert!(a.key(KeyCode::Esc));
        assert_eq!(a.screen, Screen::Jobs);
        assert!(!a.key(KeyCode::Esc), "Esc on the job list quits");
        assert!(!a.key(KeyCode::Char('q')));
        // A sample without the job falls back to the list.
        a.key(KeyCode::Enter);
        a.update(Snapshot::default());
        assert_eq!(a.screen, Screen::Jobs);
    }
}
