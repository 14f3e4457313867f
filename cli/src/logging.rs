//! NCCL_DEBUG-style logging of the engine's tracing events on standard error (or
//! `NCCL_DEBUG_FILE`), so standard output stays a clean table.

use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

use crate::GlobalOpts;

/// Installs the log subscriber from `NCCL_DEBUG` (`WARN`, `INFO`, `TRACE`; `VERSION` and unset
/// log nothing but warnings are still counted as errors elsewhere).
///
/// Errors: `NCCL_DEBUG_FILE` cannot be created.
pub fn init(global: &GlobalOpts) -> anyhow::Result<()> {
    let knobs = crate::config_load::load_config(global)?;
    let level = match knobs
        .string("NCCL_DEBUG")
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        Some("INFO") => "info",
        Some("TRACE") => "trace",
        Some("WARN") => "warn",
        _ => return Ok(()),
    };
    let host = rnccl::bootstrap::host::short_hostname();
    let pid = std::process::id();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(format!("rnccl={level}")))
        .with_target(false)
        .with_level(true)
        .without_time()
        .with_ansi(false)
        .fmt_fields(tracing_subscriber::fmt::format::DefaultFields::new())
        .event_format(
            tracing_subscriber::fmt::format()
                .without_time()
                .with_target(false)
                .compact(),
        );
    let prefix = format!("{host}:{pid}");
    match knobs.string("NCCL_DEBUG_FILE") {
        Some(path) => {
            let path = path.replace("%h", &host).replace("%p", &pid.to_string());
            let f = std::fs::File::create(&path)
                .map_err(|e| anyhow::anyhow!("NCCL_DEBUG_FILE={path}: {e}"))?;
            let _ = builder.with_writer(Mutex::new(f)).try_init();
        }
        None => {
            let _ = builder.with_writer(std::io::stderr).try_init();
        }
    }
    tracing::info!(
        "{prefix} NCCL INFO rnccl {} logging at {level}",
        env!("CARGO_PKG_VERSION")
    );
    Ok(())
}
