//! `rnccl top`: the rnccl jobs running on this host, live, from the counter pages their
//! processes publish (`rnccl::stats::page`). A collector thread samples the pages and sends
//! each [`model::Snapshot`] over a channel; the draw loop shows the latest and handles keys
//! (the collector / state / draw split of `bottom`).

mod model;
mod view;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};

use crate::GlobalOpts;
use model::Model;
use view::App;

/// Options of `rnccl top`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Milliseconds between samples.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub interval: u64,
    /// Seconds a rank may stall on one link before it is marked stuck.
    #[arg(long, default_value_t = 5.0)]
    pub stuck: f64,
    /// Folder holding the counter pages.
    #[arg(long, value_name = "DIR", default_value = rnccl::stats::page::PAGE_DIR)]
    pub pages: PathBuf,
    /// Print the jobs screen and each job's details as text after two samples (`--interval`
    /// apart) and exit, for scripts and logs: no terminal needed; screens are $COLUMNS × $LINES
    /// (default 120 × 40).
    #[arg(long)]
    pub once: bool,
}

/// Runs the live view until the user quits.
///
/// Errors: standard output is not a terminal, the stuck threshold is not a positive number, or
/// the terminal cannot be set up.
pub fn run(args: Args, _global: &GlobalOpts) -> anyhow::Result<std::process::ExitCode> {
    if !(args.stuck.is_finite() && args.stuck > 0.0) {
        bail!("--stuck {} is not a positive number of seconds", args.stuck);
    }
    std::fs::read_dir(&args.pages)
        .with_context(|| format!("cannot list the counter pages in {}", args.pages.display()))?;
    let interval = Duration::from_millis(args.interval);
    let stuck = Duration::from_secs_f64(args.stuck);
    if args.once {
        print!("{}", once(&args.pages, interval, stuck));
        return Ok(std::process::ExitCode::SUCCESS);
    }
    crate::tui::require_terminal("top")?;
    let (tx, rx) = mpsc::channel();
    let dir = args.pages.clone();
    std::thread::Builder::new()
        .name("rnccl-top-collector".into())
        .spawn(move || collect(&dir, interval, stuck, &tx))
        .context("starting the collector thread")?;
    let mut terminal = ratatui::init();
    let result = draw_loop(&mut terminal, App::new(interval, stuck), &rx);
    ratatui::restore();
    result.map(|()| std::process::ExitCode::SUCCESS)
}

/// One screen of `--once`: two samples `interval` apart (rates need two), drawn as text.
fn once(dir: &std::path::Path, interval: Duration, stuck: Duration) -> String {
    let mut model = Model::new(stuck);
    let mut app = App::new(interval, stuck);
    for i in 0..2 {
        if i > 0 {
            std::thread::sleep(interval);
        }
        let found = rnccl::stats::page::discover(dir, false).unwrap_or_default();
        app.update(model.update(&found, Instant::now()));
    }
    let dim = |var: &str, default: u16| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &u16| n >= 20)
            .unwrap_or(default)
    };
    let (w, h) = (dim("COLUMNS", 120), dim("LINES", 40));
    // The jobs screen, then each job's details.
    let mut out = crate::tui::screen_text(w, h, |f| view::draw(f, &app));
    for _ in 0..app.jobs() {
        app.key(KeyCode::Enter);
        out += &crate::tui::screen_text(w, h, |f| view::draw(f, &app));
        app.key(KeyCode::Left);
        app.key(KeyCode::Down);
    }
    out
}

/// The collector: samples the pages every `interval` until the draw loop goes away.
fn collect(
    dir: &std::path::Path,
    interval: Duration,
    stuck: Duration,
    tx: &mpsc::Sender<model::Snapshot>,
) {
    let mut model = Model::new(stuck);
    loop {
        let t0 = Instant::now();
        let found = rnccl::stats::page::discover(dir, false).unwrap_or_default();
        if tx.send(model.update(&found, t0)).is_err() {
            return;
        }
        std::thread::sleep(interval.saturating_sub(t0.elapsed()));
    }
}

/// Draws on every new sample, key and resize; returns when the user quits.
fn draw_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut app: App,
    rx: &mpsc::Receiver<model::Snapshot>,
) -> anyhow::Result<()> {
    let mut dirty = true;
    loop {
        while let Ok(s) = rx.try_recv() {
            app.update(s);
            dirty = true;
        }
        if dirty {
            terminal.draw(|f| view::draw(f, &app))?;
            dirty = false;
        }
        // Keys within 100 ms; samples are picked up between polls.
        if event::poll(Duration::from_millis(100))? {
            match event::read()? {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    if !app.key(k.code) {
                        return Ok(());
                    }
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
    }
}
