//! Every printer of `rnccl` ends quietly when its reader goes away (`rnccl topo | head`): no
//! panic message, no error, exit status 0.

mod common;

use std::process::Stdio;

const TOPO: &str = "tests/fixtures/anchors/h200x2/topo.xml";

/// Runs `rnccl args` with its standard output closed by the reader before the command writes,
/// and returns the exit code and standard error.
fn closed_early(args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_rnccl"));
    cmd.env_clear()
        .current_dir(common::ROOT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn printers_exit_quietly_on_a_closed_pipe() {
    let cases: [&[&str]; 9] = [
        &["topo"],
        &["topo", "--topo-file", TOPO, "--format", "json"],
        &["topo", "--topo-file", TOPO, "--format", "xml"],
        &["rings", "--topo-file", TOPO],
        &["rings", "--topo-file", TOPO, "--format", "json"],
        &[
            "rings",
            "--topo-file",
            TOPO,
            "--format",
            "xml",
            "--tune",
            "all_reduce",
        ],
        &["env-explain", "--all"],
        &[
            "bench",
            "--threads",
            "--ranks",
            "2",
            "-e",
            "64",
            "-n",
            "1",
            "-w",
            "0",
        ],
        &["bench", "--ranks", "2", "-e", "64", "-n", "1", "-w", "0"],
    ];
    for args in cases {
        let (code, stderr) = closed_early(args);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("error"),
            "{args:?}: {stderr}"
        );
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}
