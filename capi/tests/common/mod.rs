//! Helpers shared by the C ABI tests: where the built library and header are, its exported
//! symbols (read from the ELF file), and compiling C.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Serialises tests that read `ncclGetLastError` (one buffer per process, as in NCCL).
pub static LAST_ERROR_LOCK: Mutex<()> = Mutex::new(());

/// The crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The generated header's directory.
pub fn include_dir() -> PathBuf {
    crate_dir().join("include")
}

/// The built `libnccl.so`: in this test binary's `deps/` directory, where `cargo test` builds
/// the package's cdylib before its tests (the copy one level up is refreshed only by `cargo
/// build`, so it is the fallback).
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps dir");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let p = dir.join("libnccl.so");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "libnccl.so not found next to {} (cargo builds it with the package's tests)",
        exe.display()
    );
}

/// The C compiler (`$CC` or `cc`), or `None` when there is none (the tests then say they
/// skipped). Under `CI=true` a missing compiler fails the test instead.
pub fn cc() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let found = Command::new(&cc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| cc.clone());
    if found.is_none() && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but there is no C compiler ({cc}); the C ABI tests need one");
    }
    found
}

/// Runs `cmd`, panicking with its output when it fails.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes([b[o], b[o + 1]]) as usize
}

fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize
}

fn u64_at(b: &[u8], o: usize) -> usize {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize
}

/// The global or weak functions a 64-bit little-endian ELF shared object defines in its
/// dynamic symbol table (what `nm -D --defined-only` lists as `T`/`W`).
pub fn exported_functions(path: &Path) -> Vec<String> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{} is not ELF", path.display());
    assert_eq!(
        (b[4], b[5]),
        (2, 1),
        "only 64-bit little-endian ELF is read"
    );
    let (shoff, shentsize, shnum) = (u64_at(&b, 0x28), u16_at(&b, 0x3a), u16_at(&b, 0x3c));
    let section = |i: usize| shoff + i * shentsize;
    let mut names = Vec::new();
    for i in 0..shnum {
        let s = section(i);
        if u32_at(&b, s + 4) != 11 {
            continue; // not SHT_DYNSYM
        }
        let (off, size, link, entsize) = (
            u64_at(&b, s + 0x18),
            u64_at(&b, s + 0x20),
            u32_at(&b, s + 0x28),
            u64_at(&b, s + 0x38),
        );
        let strtab = u64_at(&b, section(link) + 0x18);
        for k in 0..size / entsize {
            let e = off + k * entsize;
            let (name, info, shndx) = (u32_at(&b, e), b[e + 4], u16_at(&b, e + 6));
            let (bind, kind) = (info >> 4, info & 0xf);
            if shndx == 0 || kind != 2 || !(bind == 1 || bind == 2) {
                continue;
            }
            let start = strtab + name;
            let end = start + b[start..].iter().position(|&c| c == 0).unwrap();
            names.push(String::from_utf8_lossy(&b[start..end]).into_owned());
        }
    }
    names.sort();
    names
}

/// `ncclGetLastError`'s message.
pub fn last_error() -> String {
    // SAFETY: ncclGetLastError returns a NUL-terminated string valid until this thread's next
    // call.
    unsafe { std::ffi::CStr::from_ptr(nccl::errors::ncclGetLastError(std::ptr::null_mut())) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts `r == code` and that the last error contains every word of `words`.
#[track_caller]
pub fn expect(r: nccl::types::ncclResult_t, code: nccl::types::ncclResult_t, words: &[&str]) {
    let msg = last_error();
    assert_eq!(r, code, "got {r}, last error: {msg}");
    for w in words {
        assert!(msg.contains(w), "'{w}' not in: {msg}");
    }
}
