//! `rnccl tune`: edit NCCL knobs with values checked as they are typed, run `rnccl bench`
//! sweeps with them, overlay each run's busbw curve on the earlier ones, and write the best
//! settings out as a YAML config (`env-explain`'s format) and as `export` lines.

mod model;
mod sweep;
mod view;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::GlobalOpts;
use crate::output_file::write_whole;
use model::{COLLS, Field, Run, Status};
use sweep::Sweep;
use view::App;

/// Options of `rnccl tune`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder the best settings are written to (rnccl-tune.yaml and rnccl-tune.sh).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
    /// Run the sweeps on CPU ranks even where GPUs are present.
    #[arg(long)]
    pub cpu: bool,
}

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    None,
    Quit,
    Run,
    Save,
}

/// Applies `k` to the form; returns what else it asks for.
fn key(app: &mut App, k: KeyEvent) -> Action {
    let n = Field::all().len();
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Esc => return Action::Quit,
        KeyCode::Char('c') if ctrl => return Action::Quit,
        KeyCode::Char('s') if ctrl => return Action::Save,
        KeyCode::Enter => return Action::Run,
        KeyCode::Up => app.focus = (app.focus + n - 1) % n,
        KeyCode::Down | KeyCode::Tab => app.focus = (app.focus + 1) % n,
        KeyCode::Left if app.field() == Field::Coll => {
            app.form.coll = (app.form.coll + COLLS.len() - 1) % COLLS.len();
        }
        KeyCode::Right if app.field() == Field::Coll => {
            app.form.coll = (app.form.coll + 1) % COLLS.len();
        }
        KeyCode::Backspace => {
            let f = app.field();
            if let Some(t) = app.form.text_mut(f) {
                t.pop();
            }
        }
        KeyCode::Char(c) if !ctrl => {
            let f = app.field();
            if let Some(t) = app.form.text_mut(f) {
                t.push(c);
            }
        }
        _ => {}
    }
    Action::None
}

/// The `rnccl bench` arguments of the form's sweep.
fn bench_args(app: &App, cpu: bool) -> Vec<String> {
    let f = &app.form;
    let mut a: Vec<String> = [
        COLLS[f.coll],
        "--ranks",
        f.ranks.trim(),
        "-b",
        f.min_bytes.trim(),
        "-e",
        f.max_bytes.trim(),
        "-f",
        "2",
        "-n",
        "10",
        "-w",
        "3",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if cpu {
        a.push("--cpu".into());
    }
    a
}

/// Writes the best run of the form's collective; returns what to tell the user.
fn save(app: &App, out: &std::path::Path) -> String {
    let coll = COLLS[app.form.coll];
    let Some(best) = model::best(&app.runs, coll) else {
        return format!("no finished {coll} run to save yet: press Enter to run one");
    };
    let (y, s) = (out.join("rnccl-tune.yaml"), out.join("rnccl-tune.sh"));
    let r = write_whole(&y, model::yaml(best).as_bytes())
        .and_then(|()| write_whole(&s, model::exports(best).as_bytes()));
    match r {
        Ok(()) => format!(
            "wrote {} and {} ({}: {:.2} GB/s mean busbw)",
            y.display(),
            s.display(),
            best.label(),
            best.avg()
        ),
        Err(e) => format!("cannot write {}: {e}", out.display()),
    }
}

/// Runs the tuning screen until the user quits.
///
/// Errors: standard output is not a terminal, or the terminal cannot be set up.
pub fn run(args: Args, _global: &GlobalOpts) -> anyhow::Result<std::process::ExitCode> {
    crate::tui::require_terminal("tune")?;
    if !args.out.is_dir() {
        bail!("--out {} is not a folder", args.out.display());
    }
    let mut terminal = ratatui::init();
    let result = tune_loop(&mut terminal, &args);
    ratatui::restore();
    result.map(|()| std::process::ExitCode::SUCCESS)
}

fn tune_loop(terminal: &mut ratatui::DefaultTerminal, args: &Args) -> anyhow::Result<()> {
    let mut app = App::default();
    let (tx, rx) = mpsc::channel();
    let mut sweep: Option<Sweep> = None;
    let mut dirty = true;
    loop {
        while let Ok(ev) = rx.try_recv() {
            match ev {
                sweep::Event::Row(i, p) => app.runs[i].points.push(p),
                sweep::Event::Done(i, r) => {
                    app.runs[i].status = match r {
                        Ok(()) => Status::Done,
                        Err(e) => Status::Failed(e),
                    };
                    sweep = None;
                }
            }
            dirty = true;
        }
        if dirty {
            terminal.draw(|f| view::draw(f, &app))?;
            dirty = false;
        }
        if !event::poll(Duration::from_millis(100))? {
            continue;
        }
        let k = match event::read()? {
            Event::Key(k) if k.kind == KeyEventKind::Press => k,
            Event::Resize(..) => {
                dirty = true;
                continue;
            }
            _ => continue,
        };
        dirty = true;
        match key(&mut app, k) {
            Action::None => {}
            Action::Quit => {
                if let Some(s) = &sweep {
                    s.stop();
                }
                return Ok(());
            }
            Action::Save => app.message = Some(save(&app, &args.out)),
            Action::Run if app.running() => {
                app.message = Some("a sweep is running: wait for it to finish".into());
            }
            Action::Run if !app.form.valid() => {
                app.message = Some("fix the values marked in red first".into());
            }
            Action::Run => {
                let i = app.runs.len();
                let settings = app.form.settings();
                let started = Sweep::start(i, &bench_args(&app, args.cpu), &settings, tx.clone())
                    .context("starting rnccl bench")?;
                sweep = Some(started);
                app.runs.push(Run {
                    coll: COLLS[app.form.coll],
                    settings,
                    ranks: app.form.ranks.trim().parse().unwrap_or(0),
                    points: Vec::new(),
                    expected: app.form.sizes(),
                    status: Status::Running,
                });
                app.message = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(app: &mut App, code: KeyCode) -> Action {
        key(app, KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn keys_edit_the_form_and_ask_for_runs() {
        let mut app = App::default();
        assert_eq!(press(&mut app, KeyCode::Right), Action::None);
        assert_eq!(COLLS[app.form.coll], "all_gather");
        press(&mut app, KeyCode::Left);
        press(&mut app, KeyCode::Left);
        assert_eq!(COLLS[app.form.coll], "sendrecv", "wraps");
        press(&mut app, KeyCode::Up);
        assert_eq!(app.field(), Field::Knob(8), "wraps to the last knob");
        for c in "1".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!(app.form.knobs[8], "1");
        press(&mut app, KeyCode::Backspace);
        assert_eq!(app.form.knobs[8], "");
        assert_eq!(press(&mut app, KeyCode::Enter), Action::Run);
        assert_eq!(
            key(
                &mut app,
                KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL)
            ),
            Action::Save
        );
        assert_eq!(press(&mut app, KeyCode::Esc), Action::Quit);
        let args = bench_args(&app, true);
        assert_eq!(args[..3], ["sendrecv", "--ranks", "2"]);
        assert_eq!(args.last().map(String::as_str), Some("--cpu"));
    }

    #[test]
    fn saving_without_a_finished_run_says_so() {
        let app = App::default();
        let d = tempfile::tempdir().unwrap();
        assert!(save(&app, d.path()).contains("no finished all_reduce run"));
        assert!(!d.path().join("rnccl-tune.yaml").exists());
    }
}
