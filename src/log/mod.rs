//! NCCL's debug log for the engine's `tracing` events: `NCCL_DEBUG` picks the level,
//! `NCCL_DEBUG_SUBSYS` the subsystems, `NCCL_DEBUG_FILE` the file (`%h` host, `%p` pid); lines
//! read `host:pid:tid NCCL INFO message`, as NCCL's do (src/debug.cc; internals §8).
//!
//! [`init`] installs the process-wide subscriber once; every later call is a no-op, so each
//! communicator's init and the `rnccl` command can all call it. [`reset`] reads the level and
//! subsystems again (`ncclResetDebugInit`). Logs go to standard error or the
//! file, never to standard output (a deliberate deviation from NCCL, which writes to stdout:
//! benchmark tables stay parseable).
//!
//! Subsystems map to `tracing` targets: `rnccl::init` is INIT, `rnccl::bootstrap` BOOTSTRAP,
//! `rnccl::graph` GRAPH, `rnccl::net` NET and so on ([`subsystem_of`]); module paths such as
//! `rnccl::transport::shm` map to the nearest subsystem, and events of other targets count as
//! NCCL's `ALL` (printed whenever any subsystem is). Warnings are never filtered by subsystem.

mod format;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry, filter, reload};

use crate::config::{Config, lookup, value};
use format::NcclFormat;

/// NCCL's log levels (`ncclDebugLogLevel`), least verbose first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DebugLevel {
    /// `NCCL_DEBUG` unset (or a value NCCL ignores): nothing is printed.
    None,
    /// The version banner only.
    Version,
    /// Warnings (`tracing` WARN and ERROR events).
    Warn,
    /// Warnings and INFO events of the selected subsystems.
    Info,
    /// As INFO (NCCL adds abort messages).
    Abort,
    /// Everything, `tracing` DEBUG and TRACE events included.
    Trace,
}

/// NCCL's subsystems (`NCCL_DEBUG_SUBSYS` names, bits of `src/include/nccl_common.h`) and the
/// `tracing` target prefixes that carry each.
const SUBSYSTEMS: [(&str, u32, &[&str]); 18] = [
    ("INIT", 0x1, &["rnccl::init", "rnccl::comm"]),
    ("COLL", 0x2, &["rnccl::coll", "rnccl::exec"]),
    ("P2P", 0x4, &["rnccl::p2p"]),
    ("SHM", 0x8, &["rnccl::shm", "rnccl::transport::shm"]),
    ("NET", 0x10, &["rnccl::net", "rnccl::transport"]),
    ("GRAPH", 0x20, &["rnccl::graph", "rnccl::topo"]),
    ("TUNING", 0x40, &["rnccl::tuning", "rnccl::graph::tuning"]),
    ("ENV", 0x80, &["rnccl::env", "rnccl::config"]),
    ("ALLOC", 0x100, &["rnccl::alloc", "rnccl::mem"]),
    ("CALL", 0x200, &["rnccl::call"]),
    ("PROXY", 0x400, &["rnccl::proxy"]),
    ("NVLS", 0x800, &["rnccl::nvls"]),
    ("BOOTSTRAP", 0x1000, &["rnccl::bootstrap"]),
    ("REG", 0x2000, &["rnccl::reg", "rnccl::comm::window"]),
    ("PROFILE", 0x4000, &["rnccl::profile", "rnccl::stats"]),
    ("RAS", 0x8000, &["rnccl::ras"]),
    ("DESTROY", 0x10000, &["rnccl::destroy"]),
    ("ALLOC_HOST", 0x20000, &["rnccl::alloc_host"]),
];

/// NCCL's `NCCL_ALL`: the flags of an event whose target names no subsystem.
const ALL: u32 = !0;

/// The subsystem bit of a `tracing` target: the longest registered prefix ending at a `::`
/// boundary wins (`rnccl::transport::shm` is SHM, `rnccl::transport::tcp` NET); targets of no
/// subsystem give NCCL's `ALL`.
pub fn subsystem_of(target: &str) -> u32 {
    let mut best: Option<(usize, u32)> = None;
    for (_, bit, prefixes) in SUBSYSTEMS {
        for p in prefixes {
            let hit = target == *p
                || target
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with("::"));
            if hit && best.is_none_or(|(len, _)| p.len() > len) {
                best = Some((p.len(), bit));
            }
        }
    }
    best.map_or(ALL, |(_, bit)| bit)
}

/// What the debug knobs ask for, read with the verdict `env-explain` shows: a value NCCL ignores
/// reads as NCCL's default (no output for `NCCL_DEBUG`, `INIT,BOOTSTRAP,ENV` for
/// `NCCL_DEBUG_SUBSYS`); [`Config::validate`] is what refuses such values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// `NCCL_DEBUG`.
    pub level: DebugLevel,
    /// `NCCL_DEBUG_SUBSYS` as a mask of subsystem bits.
    pub subsystems: u32,
    /// `NCCL_DEBUG_FILE` with `%h`, `%p` and `%%` expanded; `None`: standard error.
    pub file: Option<PathBuf>,
}

/// The effective value of knob `name` as `env-explain` reads it (its default when unset).
fn effective(cfg: &Config, name: &str) -> String {
    let Some(spec) = lookup(name) else {
        return String::new();
    };
    let raw = cfg.string(name).unwrap_or(spec.default);
    if raw.is_empty() {
        return String::new();
    }
    value::read(spec, raw).effective
}

impl LogSettings {
    /// Reads `NCCL_DEBUG`, `NCCL_DEBUG_SUBSYS` and `NCCL_DEBUG_FILE` from `cfg` for this process
    /// (`%h` is the host name up to its first `.`, `%p` this process's id).
    pub fn from_config(cfg: &Config) -> LogSettings {
        let level = match effective(cfg, "NCCL_DEBUG").as_str() {
            "VERSION" => DebugLevel::Version,
            "WARN" => DebugLevel::Warn,
            "INFO" => DebugLevel::Info,
            "ABORT" => DebugLevel::Abort,
            "TRACE" => DebugLevel::Trace,
            _ => DebugLevel::None,
        };
        let subsystems = effective(cfg, "NCCL_DEBUG_SUBSYS")
            .split(',')
            .filter_map(|name| SUBSYSTEMS.iter().find(|s| s.0 == name).map(|s| s.1))
            .fold(0, |mask, bit| mask | bit);
        let file = cfg
            .string("NCCL_DEBUG_FILE")
            .filter(|_| level > DebugLevel::Version)
            .map(|f| {
                PathBuf::from(expand_file_name(
                    f,
                    &crate::os::host::short_hostname(),
                    std::process::id(),
                ))
            });
        LogSettings {
            level,
            subsystems,
            file,
        }
    }

    /// Whether an event with this metadata is printed: warnings at WARN and above regardless of
    /// subsystem, INFO at INFO and above, DEBUG and TRACE at TRACE, the latter two only for
    /// selected subsystems; only `rnccl` targets (the engine and the command).
    pub fn enabled(&self, meta: &Metadata<'_>) -> bool {
        if !meta.target().starts_with("rnccl") {
            return false;
        }
        let subsystem_on = subsystem_of(meta.target()) & self.subsystems != 0;
        match *meta.level() {
            Level::ERROR | Level::WARN => self.level >= DebugLevel::Warn,
            Level::INFO => self.level >= DebugLevel::Info && subsystem_on,
            _ => self.level >= DebugLevel::Trace && subsystem_on,
        }
    }

    /// The most verbose `tracing` level that can pass (lets disabled call sites cost nothing).
    fn max_level(&self) -> filter::LevelFilter {
        match self.level {
            DebugLevel::None | DebugLevel::Version => filter::LevelFilter::OFF,
            DebugLevel::Warn => filter::LevelFilter::WARN,
            DebugLevel::Info | DebugLevel::Abort => filter::LevelFilter::INFO,
            DebugLevel::Trace => filter::LevelFilter::TRACE,
        }
    }
}

/// `NCCL_DEBUG_FILE`'s expansion: `%h` the host name, `%p` the process id, `%%` a percent sign;
/// other `%` sequences stay as written (NCCL's `ncclDebugInit`).
pub fn expand_file_name(pattern: &str, host: &str, pid: u32) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(host),
            Some('p') => out.push_str(&pid.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Why the log could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `NCCL_DEBUG_FILE` names a file that cannot be created.
    #[error(
        "NCCL_DEBUG_FILE: cannot create {}: {error}; create its directory, or pick another path (%h is the host, %p the process id)",
        path.display()
    )]
    File {
        /// The file, after `%h`/`%p` expansion.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

impl From<LogError> for crate::error::Error {
    fn from(e: LogError) -> Self {
        crate::error::Error::InvalidUsage(e.to_string())
    }
}

/// The log's filter: which events of which subsystems pass.
type LogFilter = filter::FilterFn<Box<dyn Fn(&Metadata<'_>) -> bool + Send + Sync>>;

/// The filter for `settings`.
fn log_filter(settings: LogSettings) -> LogFilter {
    let max = settings.max_level();
    let f: Box<dyn Fn(&Metadata<'_>) -> bool + Send + Sync> =
        Box::new(move |meta| settings.enabled(meta));
    filter::FilterFn::new(f).with_max_level_hint(max)
}

/// The subscriber for `settings`, writing lines through `writer`, and the handle that swaps its
/// filter.
fn subscriber<W>(
    settings: LogSettings,
    writer: W,
) -> (
    impl tracing::Subscriber + Send + Sync,
    reload::Handle<LogFilter, Registry>,
)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let (filter, handle) = reload::Layer::new(log_filter(settings));
    let layer = tracing_subscriber::fmt::layer()
        .event_format(NcclFormat::for_this_process())
        .with_writer(writer)
        .with_filter(filter);
    (tracing_subscriber::registry().with(layer), handle)
}

/// The filter of the log [`init`] installed, if it installed one.
static INSTALLED: OnceLock<reload::Handle<LogFilter, Registry>> = OnceLock::new();

/// Whether [`init`] ran (it reads the knobs once).
static DONE: Mutex<bool> = Mutex::new(false);

/// Reads the log's knobs again from `cfg` (`ncclResetDebugInit`): the level and subsystems of
/// the log [`init`] installed change at once; when it installed none because `NCCL_DEBUG` was
/// unset, the log is set up now as [`init`] would. The destination (`NCCL_DEBUG_FILE`) stays
/// the one chosen first, and a program's own `tracing` subscriber is left alone.
///
/// Errors: as [`init`].
pub fn reset(cfg: &Config) -> Result<(), LogError> {
    if let Some(h) = INSTALLED.get() {
        // Reloading also rebuilds the call sites' cached interest.
        let _ = h.reload(log_filter(LogSettings::from_config(cfg)));
        return Ok(());
    }
    *DONE.lock().unwrap_or_else(|p| p.into_inner()) = false;
    init(cfg)
}

/// The version banner NCCL prints first (`NCCL version ...`).
fn banner() -> String {
    format!("rnccl version {}", crate::version::version_line())
}

/// Sets up the process's NCCL log from `cfg` (see the module docs), once: later calls return at
/// once, whatever their `cfg` (NCCL also reads the debug knobs once per process). When the
/// program already installed its own `tracing` subscriber, that one is kept and receives the
/// engine's events.
///
/// Errors: [`LogError::File`] when `NCCL_DEBUG_FILE` cannot be created (a later call tries again).
pub fn init(cfg: &Config) -> Result<(), LogError> {
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if *done {
        return Ok(());
    }
    let settings = LogSettings::from_config(cfg);
    if settings.level == DebugLevel::None {
        *done = true;
        return Ok(());
    }
    let line = match settings.level {
        DebugLevel::Version | DebugLevel::Warn => format!("{}\n", banner()),
        _ => format!(
            "{}{}\n",
            NcclFormat::for_this_process().prefix("INFO"),
            banner()
        ),
    };
    let installed = match &settings.file {
        Some(path) => {
            let mut file = std::fs::File::create(path).map_err(|error| LogError::File {
                path: path.clone(),
                error,
            })?;
            let _ = std::io::Write::write_all(&mut file, line.as_bytes());
            let (sub, handle) = subscriber(settings, Mutex::new(file));
            tracing::subscriber::set_global_default(sub).map(|()| handle)
        }
        None => {
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            let (sub, handle) = subscriber(settings, std::io::stderr);
            tracing::subscriber::set_global_default(sub).map(|()| handle)
        }
    };
    // An error here means the program installed its own subscriber first: keep it.
    if let Ok(handle) = installed {
        let _ = INSTALLED.set(handle);
    }
    *done = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Source;

    fn settings(pairs: &[(&str, &str)]) -> LogSettings {
        let mut c = Config::defaults();
        for (k, v) in pairs {
            c.set(k, *v, Source::Env);
        }
        LogSettings::from_config(&c)
    }

    /// Runs `f` with the subscriber for `pairs` and returns what it printed.
    fn logged(pairs: &[(&str, &str)], f: impl FnOnce()) -> String {
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = buf.clone();
        let make = move || SharedBuf(sink.clone());
        tracing::subscriber::with_default(subscriber(settings(pairs), make).0, f);
        let bytes = buf.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    struct SharedBuf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for SharedBuf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn events() {
        tracing::info!(target: "rnccl::init", "init line");
        tracing::info!(target: "rnccl::bootstrap", "bootstrap line");
        tracing::info!(target: "rnccl::transport::tcp", "net line");
        tracing::warn!(target: "rnccl::graph", "a warning");
        tracing::debug!(target: "rnccl::bootstrap", "a trace");
        tracing::info!(target: "other_crate", "not ours");
    }

    #[test]
    fn reloading_the_filter_applies_new_knobs_at_once() {
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = buf.clone();
        let make = move || SharedBuf(sink.clone());
        let (sub, handle) = subscriber(settings(&[("NCCL_DEBUG", "WARN")]), make);
        tracing::subscriber::with_default(sub, || {
            tracing::info!(target: "rnccl::init", "before the reset");
            handle
                .reload(log_filter(settings(&[("NCCL_DEBUG", "INFO")])))
                .unwrap();
            tracing::info!(target: "rnccl::init", "after the reset");
        });
        let out = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert!(!out.contains("before the reset"), "{out}");
        assert!(out.contains("after the reset"), "{out}");
    }

    #[test]
    fn levels_and_subsystems_filter_like_nccl() {
        let out = logged(&[("NCCL_DEBUG", "INFO")], events);
        assert!(
            out.contains("init line") && out.contains("bootstrap line"),
            "{out}"
        );
        assert!(
            !out.contains("net line"),
            "NET is not in the default mask: {out}"
        );
        assert!(out.contains("NCCL WARN a warning") && !out.contains("a trace"));
        assert!(!out.contains("not ours"));
        let out = logged(
            &[("NCCL_DEBUG", "info"), ("NCCL_DEBUG_SUBSYS", "^INIT")],
            events,
        );
        assert!(
            !out.contains("init line") && out.contains("net line"),
            "{out}"
        );
        let out = logged(&[("NCCL_DEBUG", "WARN")], events);
        assert_eq!(out.lines().count(), 1, "{out}");
        let out = logged(
            &[("NCCL_DEBUG", "TRACE"), ("NCCL_DEBUG_SUBSYS", "ALL")],
            events,
        );
        assert!(out.contains("NCCL TRACE a trace"), "{out}");
        assert!(logged(&[("NCCL_DEBUG", "verbose")], events).is_empty());
    }

    #[test]
    fn lines_look_like_nccls() {
        let out = logged(
            &[("NCCL_DEBUG", "INFO")],
            || tracing::info!(target: "rnccl::init", "comm rank {} nRanks {}", 0, 2),
        );
        let host = crate::os::host::short_hostname();
        let prefix = format!("{host}:{}:", std::process::id());
        assert!(out.starts_with(&prefix), "{out}");
        assert!(out.ends_with(" NCCL INFO comm rank 0 nRanks 2\n"), "{out}");
    }

    #[test]
    fn targets_map_to_subsystems() {
        assert_eq!(subsystem_of("rnccl::init"), 0x1);
        assert_eq!(subsystem_of("rnccl::transport::shm::ring"), 0x8);
        assert_eq!(subsystem_of("rnccl::transport::tcp"), 0x10);
        assert_eq!(subsystem_of("rnccl::graph::tuning"), 0x40);
        assert_eq!(subsystem_of("rnccl::initx"), ALL);
        assert_eq!(
            settings(&[("NCCL_DEBUG_SUBSYS", "bogus")]).subsystems,
            0x1 | 0x1000 | 0x80,
            "NCCL keeps the default for a list it rejects"
        );
    }

    #[test]
    fn file_names_expand() {
        assert_eq!(
            expand_file_name("/tmp/%h.%p.log", "n1", 42),
            "/tmp/n1.42.log"
        );
        assert_eq!(expand_file_name("100%%-%x%", "n1", 42), "100%-%x%");
        let s = settings(&[("NCCL_DEBUG", "VERSION"), ("NCCL_DEBUG_FILE", "/tmp/x")]);
        assert_eq!(s.file, None, "NCCL uses the file only above VERSION");
    }
}
