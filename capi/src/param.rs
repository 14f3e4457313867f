//! NCCL 2.30's parameter access: `ncclParamBind` and the typed getters, `ncclParamGetStr`,
//! `ncclParamGet`, `ncclParamGetParameter`, `ncclParamGetAllParameterKeys` and
//! `ncclParamDumpAll` (NVIDIA/nccl `src/param/c_api.cc`). The keys are the knobs of rnccl's
//! registry (`rnccl::config`), every `NCCL_*` variable NCCL reads and rnccl's own, where NCCL
//! 2.30's registry holds only its few typed parameters. A value is what the process environment,
//! `RNCCL_CONFIG`, `NCCL_CONF_FILE`, `~/.nccl.conf` and `/etc/nccl.conf` set, as communicator
//! init reads them, else the knob's default.
//!
//! Types: integer knobs (NCCL's `NCCL_PARAM` int64s, switches, numeric choices) are 64-bit
//! integers, which every integer getter returns when the value fits its type (NCCL wants the
//! getter of the parameter's exact type; rnccl's knobs have one integer type, so any getter a
//! program written for NCCL calls works); NCCL's typed booleans are one byte; every other knob
//! (names, lists, paths, keywords) is a string. `ncclParamGetStr` reads any knob as its text.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};

use rnccl::config::{Config, KNOBS, KnobSpec, KnobType, Status};

use crate::errors::{Failure, check_ptr, guard};
use crate::types::*;

/// `ncclParamHandle_t`: a knob of the registry, as the address of its entry (owned by the
/// library, never freed).
#[allow(non_camel_case_types)]
pub type ncclParamHandle_t = *const c_void;

/// How a knob's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A 64-bit integer.
    Int,
    /// One byte, 0 or 1 (NCCL's typed booleans).
    Bool,
    /// Text.
    Text,
}

fn kind(spec: &KnobSpec) -> Kind {
    match spec.ty {
        KnobType::TypedBool => Kind::Bool,
        t if t.is_integer() || t.is_switch() => Kind::Int,
        _ => Kind::Text,
    }
}

thread_local! {
    /// The text `ncclParamGetStr` last returned on this thread.
    static STR: RefCell<CString> = RefCell::new(CString::default());
    /// The text `ncclParamGetParameter` last returned on this thread.
    static PARAMETER: RefCell<CString> = RefCell::new(CString::default());
    /// The keys (and the pointer table) `ncclParamGetAllParameterKeys` last returned here.
    static KEYS: RefCell<(Vec<CString>, Vec<*const c_char>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The knobs as this process sets them.
fn config(func: &str) -> Result<Config, Failure> {
    Config::from_env().map_err(|e| Failure::arg(func, format!("reading the knobs: {e}")))
}

/// The knob `h` names.
fn spec_of(h: ncclParamHandle_t, func: &str) -> Result<&'static KnobSpec, Failure> {
    KNOBS
        .iter()
        .find(|k| std::ptr::eq(*k as *const KnobSpec as *const c_void, h))
        .ok_or_else(|| {
            Failure::arg(
                func,
                format!("handle {h:p} is not one ncclParamBind returned"),
            )
        })
}

/// The knob named by the C string `key`.
///
/// # Safety
/// `key` NULL or a NUL-terminated string.
unsafe fn spec_named(key: *const c_char, func: &str) -> Result<&'static KnobSpec, Failure> {
    check_ptr(key, func, "key")?;
    // SAFETY: non-null; the caller passes a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(key) }.to_string_lossy();
    rnccl::config::lookup(&name).ok_or_else(|| {
        let hint = rnccl::config::did_you_mean(&name)
            .first()
            .map(|k| format!(" (did you mean {k}?)"))
            .unwrap_or_default();
        Failure::arg(func, format!("no parameter is named \"{name}\"{hint}"))
    })
}

/// The knob's value as text: what is set, else its default.
fn text(cfg: &Config, spec: &KnobSpec) -> String {
    cfg.string(spec.name).unwrap_or(spec.default).to_string()
}

/// The knob's value as an integer (0 or 1 for a boolean).
fn integer(cfg: &Config, spec: &KnobSpec, func: &str) -> Result<i64, Failure> {
    let bad = |e: rnccl::config::ConfigError| Failure::arg(func, e);
    match kind(spec) {
        Kind::Int => cfg.int(spec.name).map_err(bad),
        Kind::Bool => {
            let v = text(cfg, spec).to_ascii_lowercase();
            Ok(i64::from(matches!(v.as_str(), "1" | "t" | "true")))
        }
        Kind::Text => Err(Failure::arg(
            func,
            format!(
                "{} is text, not a number: read it with ncclParamGetStr",
                spec.name
            ),
        )),
    }
}

/// `ncclParamBind`: a handle to the knob named `key`, to `*out`.
///
/// Errors: `ncclInvalidArgument` for a NULL argument or a name the registry does not hold
/// (the message suggests the closest name).
///
/// # Safety
/// `out` NULL or writable; `key` NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclParamBind(
    out: *mut ncclParamHandle_t,
    key: *const c_char,
) -> ncclResult_t {
    const F: &str = "ncclParamBind";
    guard(F, || {
        check_ptr(out, F, "out")?;
        // SAFETY: forwarded from the caller.
        let spec = unsafe { spec_named(key, F) }?;
        // SAFETY: checked non-null and aligned; the caller passes a writable handle.
        unsafe { out.write(spec as *const KnobSpec as ncclParamHandle_t) };
        Ok(())
    })
}

/// Defines `ncclParamGet<suffix>`: the knob's integer value as `$t`.
macro_rules! typed_getters {
    ($($name:ident => $t:ty),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: the value of the knob `h` names, to `*out`.")]
            ///
            /// Errors: `ncclInvalidArgument` for a NULL argument, a handle `ncclParamBind` did
            /// not return, a text knob, a value that is not a number or does not fit the type.
            ///
            /// # Safety
            /// `out` NULL or writable.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name(h: ncclParamHandle_t, out: *mut $t) -> ncclResult_t {
                const F: &str = stringify!($name);
                guard(F, || {
                    check_ptr(out, F, "out")?;
                    let spec = spec_of(h, F)?;
                    let v = integer(&config(F)?, spec, F)?;
                    let v = <$t>::try_from(v).map_err(|_| {
                        Failure::arg(
                            F,
                            format!("{} is {v}, which does not fit {}", spec.name, stringify!($t)),
                        )
                    })?;
                    // SAFETY: checked non-null and aligned; the caller passes a writable value.
                    unsafe { out.write(v) };
                    Ok(())
                })
            }
        )*
    };
}

typed_getters! {
    ncclParamGetI8 => i8,
    ncclParamGetI16 => i16,
    ncclParamGetI32 => i32,
    ncclParamGetI64 => i64,
    ncclParamGetU8 => u8,
    ncclParamGetU16 => u16,
    ncclParamGetU32 => u32,
    ncclParamGetU64 => u64,
}

/// `ncclParamGetStr`: the value of the knob `h` names as text, to `*out`; the string stays
/// valid until this thread's next `ncclParamGetStr`.
///
/// Errors: `ncclInvalidArgument` for a NULL argument or a handle `ncclParamBind` did not return.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclParamGetStr(
    h: ncclParamHandle_t,
    out: *mut *const c_char,
) -> ncclResult_t {
    const F: &str = "ncclParamGetStr";
    guard(F, || {
        check_ptr(out, F, "out")?;
        let spec = spec_of(h, F)?;
        let value = CString::new(text(&config(F)?, spec)).unwrap_or_default();
        let p = STR.with(|s| {
            *s.borrow_mut() = value;
            s.borrow().as_ptr()
        });
        // SAFETY: checked non-null and aligned; the caller passes a writable pointer.
        unsafe { out.write(p) };
        Ok(())
    })
}

/// `ncclParamGet`: the value of the knob `h` names as bytes into `out` (at most `maxLen`),
/// their count to `*len`: 8 (a little-endian `int64_t`) for an integer knob, 1 for a boolean,
/// the text and its NUL for the others.
///
/// Errors: `ncclInvalidArgument` for a NULL argument, a handle `ncclParamBind` did not return,
/// or a buffer too small (`*len` is then 0).
///
/// # Safety
/// `out` NULL or `maxLen` writable bytes; `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclParamGet(
    h: ncclParamHandle_t,
    out: *mut c_void,
    maxLen: c_int,
    len: *mut c_int,
) -> ncclResult_t {
    const F: &str = "ncclParamGet";
    guard(F, || {
        check_ptr(out as *const u8, F, "out")?;
        check_ptr(len, F, "len")?;
        let spec = spec_of(h, F)?;
        let cfg = config(F)?;
        let bytes = match kind(spec) {
            Kind::Int => integer(&cfg, spec, F)?.to_le_bytes().to_vec(),
            Kind::Bool => vec![integer(&cfg, spec, F)? as u8],
            Kind::Text => CString::new(text(&cfg, spec))
                .unwrap_or_default()
                .into_bytes_with_nul(),
        };
        let room = usize::try_from(maxLen).unwrap_or(0);
        if bytes.len() > room {
            // SAFETY: checked non-null and aligned; the caller passes a writable int.
            unsafe { len.write(0) };
            return Err(Failure::arg(
                F,
                format!(
                    "{} needs {} bytes, maxLen is {maxLen}",
                    spec.name,
                    bytes.len()
                ),
            ));
        }
        // SAFETY: `out` holds `maxLen` >= `bytes.len()` writable bytes (the caller's promise);
        // `len` checked non-null and aligned.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len());
            len.write(bytes.len() as c_int);
        }
        Ok(())
    })
}

/// `ncclParamGetParameter`: the value of the knob named `key` as text to `*value` and its
/// length to `*valueLen`; the string stays valid until this thread's next call.
///
/// Errors: `ncclInvalidArgument` for a NULL argument or an unknown name (`*value` NULL and
/// `*valueLen` 0 then, as in NCCL).
///
/// # Safety
/// `key` NULL or a NUL-terminated string; `value` and `valueLen` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclParamGetParameter(
    key: *const c_char,
    value: *mut *const c_char,
    valueLen: *mut c_int,
) -> ncclResult_t {
    const F: &str = "ncclParamGetParameter";
    guard(F, || {
        check_ptr(value, F, "value")?;
        check_ptr(valueLen, F, "valueLen")?;
        // SAFETY: forwarded from the caller.
        let spec = match unsafe { spec_named(key, F) } {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: both checked non-null and aligned; the caller passes writable ones.
                unsafe {
                    value.write(std::ptr::null());
                    valueLen.write(0);
                }
                return Err(e);
            }
        };
        let text = CString::new(text(&config(F)?, spec)).unwrap_or_default();
        let n = text.as_bytes().len() as c_int;
        let p = PARAMETER.with(|s| {
            *s.borrow_mut() = text;
            s.borrow().as_ptr()
        });
        // SAFETY: both checked non-null and aligned; the caller passes writable ones.
        unsafe {
            value.write(p);
            valueLen.write(n);
        }
        Ok(())
    })
}

/// Whether a key is listed without `NCCL_PARAM_DUMP_ALL`: a knob NCCL reads today.
fn published(spec: &KnobSpec) -> bool {
    matches!(spec.status, Status::Active | Status::Deprecated { .. })
}

/// The keys listed: the knobs NCCL reads, or every knob with `NCCL_PARAM_DUMP_ALL` true.
fn listed(cfg: &Config) -> Vec<&'static KnobSpec> {
    let all = cfg
        .string("NCCL_PARAM_DUMP_ALL")
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "t" | "true"));
    rnccl::config::sorted()
        .into_iter()
        .filter(|k| all || published(k))
        .collect()
}

/// `ncclParamGetAllParameterKeys`: the keys, sorted, to `*table` and their count to
/// `*tableLen`: the knobs NCCL reads today, or every knob of the registry when
/// `NCCL_PARAM_DUMP_ALL` is true. The table stays valid until this thread's next call.
///
/// Errors: `ncclInvalidArgument` for a NULL argument.
///
/// # Safety
/// `table` and `tableLen` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclParamGetAllParameterKeys(
    table: *mut *const *const c_char,
    tableLen: *mut c_int,
) -> ncclResult_t {
    const F: &str = "ncclParamGetAllParameterKeys";
    guard(F, || {
        check_ptr(table, F, "table")?;
        check_ptr(tableLen, F, "tableLen")?;
        let keys: Vec<CString> = listed(&config(F)?)
            .iter()
            .filter_map(|k| CString::new(k.name).ok())
            .collect();
        let (p, n) = KEYS.with(|t| {
            let mut t = t.borrow_mut();
            t.1 = keys.iter().map(|k| k.as_ptr()).collect();
            t.0 = keys;
            (t.1.as_ptr(), t.1.len() as c_int)
        });
        // SAFETY: both checked non-null and aligned; the caller passes writable ones.
        unsafe {
            table.write(p);
            tableLen.write(n);
        }
        Ok(())
    })
}

/// `ncclParamDumpAll`: prints every listed key (as [`ncclParamGetAllParameterKeys`] lists
/// them) with its value and default to standard output.
#[unsafe(no_mangle)]
pub extern "C" fn ncclParamDumpAll() {
    let _ = guard("ncclParamDumpAll", || {
        let cfg = config("ncclParamDumpAll")?;
        println!("=== ncclParam Registry Dump ===");
        for k in listed(&cfg) {
            let set = cfg.string(k.name).map_or("default", |_| "set");
            println!(
                "{} = {} ({set}; default \"{}\")",
                k.name,
                text(&cfg, k),
                k.default
            );
        }
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_all_lists_the_knobs_nccl_no_longer_reads_too() {
        let some = listed(&Config::from_pairs(&[]).unwrap());
        let all = listed(&Config::from_pairs(&[("NCCL_PARAM_DUMP_ALL", "true")]).unwrap());
        assert!(some.iter().all(|k| published(k)));
        assert!(all.len() > some.len() && all.len() == KNOBS.len());
        assert!(some.iter().any(|k| k.name == "NCCL_BUFFSIZE"));
    }

    #[test]
    fn values_read_as_their_kind() {
        let cfg = Config::from_pairs(&[("NCCL_P2P_DISABLE", "1"), ("NCCL_SOCKET_IFNAME", "eth0")])
            .unwrap();
        let spec = |n| rnccl::config::lookup(n).unwrap();
        assert_eq!(kind(spec("NCCL_BUFFSIZE")), Kind::Int);
        assert_eq!(integer(&cfg, spec("NCCL_P2P_DISABLE"), "t").unwrap(), 1);
        assert_eq!(integer(&cfg, spec("NCCL_BUFFSIZE"), "t").unwrap(), -2);
        assert_eq!(kind(spec("NCCL_PARAM_DUMP_ALL")), Kind::Bool);
        assert_eq!(integer(&cfg, spec("NCCL_PARAM_DUMP_ALL"), "t").unwrap(), 0);
        assert_eq!(kind(spec("NCCL_SOCKET_IFNAME")), Kind::Text);
        assert_eq!(text(&cfg, spec("NCCL_SOCKET_IFNAME")), "eth0");
        assert!(integer(&cfg, spec("NCCL_SOCKET_IFNAME"), "t").is_err());
        assert!(spec_of(std::ptr::null(), "t").is_err());
        let h = spec("NCCL_ALGO") as *const KnobSpec as ncclParamHandle_t;
        assert_eq!(spec_of(h, "t").unwrap().name, "NCCL_ALGO");
    }
}
