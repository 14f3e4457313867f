//! One sweep: `rnccl bench` started with the form's knobs in its environment, its table read
//! row by row as it prints, its end (and its last error line) reported.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc::Sender;

use super::model::{KNOBS, parse_row};

/// What a sweep reports to the draw loop.
#[derive(Debug)]
pub enum Event {
    /// Run `run` measured (bytes, busbw GB/s).
    Row(usize, (u64, f64)),
    /// Run `run` ended: `Err` with the bench's last error line when it failed.
    Done(usize, Result<(), String>),
}

/// A running bench (its own process group, so its rank processes go with it).
pub struct Sweep {
    pgid: i32,
}

impl Sweep {
    /// Starts `rnccl bench <args>` for run `run` with `settings` (every other form knob removed
    /// from its environment), sending its rows and end on `tx`.
    ///
    /// Errors: the bench cannot be started.
    pub fn start(
        run: usize,
        args: &[String],
        settings: &[(&'static str, String)],
        tx: Sender<Event>,
    ) -> std::io::Result<Sweep> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("bench").args(args);
        for k in KNOBS {
            cmd.env_remove(k);
        }
        for (k, v) in settings {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let pgid = child.id() as i32;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        std::thread::Builder::new()
            .name("rnccl-tune-sweep".into())
            .spawn(move || {
                let mut err = String::new();
                let errs = stderr.map(|mut e| {
                    std::thread::spawn(move || {
                        let mut s = String::new();
                        let _ = e.read_to_string(&mut s);
                        s
                    })
                });
                if let Some(out) = stdout {
                    for line in BufReader::new(out).lines().map_while(Result::ok) {
                        if let Some(p) = parse_row(&line) {
                            let _ = tx.send(Event::Row(run, p));
                        }
                    }
                }
                if let Some(h) = errs {
                    err = h.join().unwrap_or_default();
                }
                let result = match child.wait() {
                    Ok(s) if s.success() => Ok(()),
                    Ok(s) => Err(err
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .map_or_else(|| format!("the bench exited with {s}"), str::to_string)),
                    Err(e) => Err(e.to_string()),
                };
                let _ = tx.send(Event::Done(run, result));
            })?;
        Ok(Sweep { pgid })
    }

    /// Stops the bench and its ranks.
    pub fn stop(&self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
