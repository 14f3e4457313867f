//! Running the built `rnccl` binary as a user would, from the repository root with an empty
//! environment (no NCCL_* from the caller leaks in).

pub mod procs;

use assert_cmd::Command;

/// The repository root (fixtures are named relative to it).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// `rnccl` with a cleared environment, started in [`ROOT`].
pub fn rnccl() -> Command {
    let mut c = Command::cargo_bin("rnccl").unwrap();
    c.env_clear().current_dir(ROOT);
    c
}

/// Runs `rnccl args…`, asserts success and returns its standard output.
#[allow(dead_code)] // each test binary compiles this module; not all of them use every helper
pub fn stdout(args: &[&str]) -> String {
    let out = rnccl()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}
