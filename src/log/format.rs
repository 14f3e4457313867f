//! The line format of NCCL's log (src/debug.cc, internals §8.2): `host:pid:tid NCCL INFO
//! message`, with `WARN` for `tracing`'s WARN and ERROR events and `TRACE` for DEBUG and TRACE.
//! NCCL's `[dev]` and `file:line` fields are left out: a CPU rank has no device, and the source
//! line of an engine event helps no user.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats events as NCCL's log lines for one process.
pub(super) struct NcclFormat {
    host: String,
    pid: u32,
}

impl NcclFormat {
    /// The format for this process: short host name (`%` and `/` replaced by `-`, as NCCL does)
    /// and process id.
    pub(super) fn for_this_process() -> NcclFormat {
        NcclFormat {
            host: crate::os::host::short_hostname().replace(['%', '/'], "-"),
            pid: std::process::id(),
        }
    }

    /// `host:pid:tid NCCL LEVEL ` for the calling thread.
    pub(super) fn prefix(&self, level: &str) -> String {
        format!(
            "{}:{}:{} NCCL {level} ",
            self.host,
            self.pid,
            nix::unistd::gettid()
        )
    }
}

impl<S, N> FormatEvent<S, N> for NcclFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR | Level::WARN => "WARN",
            Level::INFO => "INFO",
            _ => "TRACE",
        };
        write!(writer, "{}", self.prefix(level))?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
