//! `rnccl completions` and `rnccl man` through the real binary.

use assert_cmd::Command;

fn rnccl() -> Command {
    Command::cargo_bin("rnccl").unwrap()
}

#[test]
fn completions_print_a_script_per_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _rnccl"),
        ("zsh", "#compdef rnccl"),
        ("fish", "complete -c rnccl"),
    ] {
        let out = rnccl().args(["completions", shell]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(marker), "{shell}: {text}");
        assert!(
            text.contains("env-explain"),
            "{shell}: subcommands complete"
        );
    }
    let out = rnccl().args(["completions", "cmd.exe"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
}

#[test]
fn man_writes_one_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = rnccl().arg("man").arg(dir.path()).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in ["rnccl.1", "rnccl-bench.1", "rnccl-top.1", "rnccl-man.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(
            text.starts_with(".ie") && text.contains(".SH NAME"),
            "{page}"
        );
    }
}

/// `rnccl --help` opens with a summary naming every command it lists.
#[test]
fn help_summary_names_every_command() {
    let out = rnccl().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The summary is the paragraph before "Usage:" (clap wraps it).
    let summary = text.split("\n\n").next().unwrap_or("").replace('\n', " ");
    // Command lines start with two spaces and a name; wrapped descriptions with more spaces.
    let commands: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert_eq!(commands.len(), 12, "{text}");
    for c in commands {
        assert!(
            summary.contains(c),
            "the summary '{summary}' leaves out {c}"
        );
    }
}

#[test]
fn version_names_the_nccl_api_level_ncclgetversion_reports() {
    let out = rnccl().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let (major, minor, patch) = rnccl::NCCL_API_VERSION;
    assert_eq!(text.trim(), format!("rnccl {}", rnccl::version_line()));
    assert!(
        text.contains(&format!("NCCL {major}.{minor}.{patch} API")),
        "{text}"
    );
    let sub = rnccl().args(["bench", "--version"]).output().unwrap();
    assert!(String::from_utf8_lossy(&sub.stdout).contains(" API; knobs"));
}
