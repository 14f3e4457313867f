//! Shell completions and man pages, generated from the clap definitions (clap_complete,
//! clap_mangen), so they never drift from the flags: `rnccl completions SHELL` prints one
//! script, `rnccl man DIR` writes one page per command. The repository keeps the generated
//! files in `completions/` and `man/`; a test checks they are current
//! (`RNCCL_BLESS=1 cargo test -p rnccl-cli generated` rewrites them).

use std::path::PathBuf;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::output_file::write_whole;
use crate::{Cli, GlobalOpts};

/// Options of `rnccl completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: Shell,
}

/// Options of `rnccl man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Folder to write the pages to (`rnccl.1`, `rnccl-bench.1`, …); created if missing.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// The completion script for `shell`.
pub fn completion(shell: Shell) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "rnccl", &mut out);
    out
}

/// Every man page: (`file name`, `roff text`), `rnccl.1` first, then one per subcommand.
pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut cmd = Cli::command();
    cmd.build();
    let mut pages = Vec::new();
    let mut top = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut top)?;
    pages.push(("rnccl.1".to_string(), top));
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("rnccl-{}", sub.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub.clone().name(name.clone())).render(&mut page)?;
        pages.push((format!("{name}.1"), page));
    }
    Ok(pages)
}

/// `rnccl completions SHELL`: the script on standard output.
///
/// Errors: standard output cannot be written.
pub fn run_completions(
    args: CompletionArgs,
    _global: &GlobalOpts,
) -> anyhow::Result<std::process::ExitCode> {
    use std::io::Write;
    std::io::stdout().write_all(&completion(args.shell))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `rnccl man DIR`: writes every page into `DIR`.
///
/// Errors: the folder cannot be created or a page written.
pub fn run_man(args: ManArgs, _global: &GlobalOpts) -> anyhow::Result<std::process::ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    for (name, page) in man_pages()? {
        let path = args.dir.join(&name);
        write_whole(&path, &page).with_context(|| format!("cannot write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The files the repository keeps: paths relative to its root, and their content.
    fn generated_files() -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
        let mut files: Vec<(PathBuf, Vec<u8>)> = [
            (Shell::Bash, "rnccl.bash"),
            (Shell::Zsh, "_rnccl"),
            (Shell::Fish, "rnccl.fish"),
        ]
        .into_iter()
        .map(|(shell, name)| (Path::new("completions").join(name), completion(shell)))
        .collect();
        for (name, page) in man_pages()? {
            files.push((Path::new("man").join(name), page));
        }
        Ok(files)
    }

    /// `completions/` and `man/` hold what the clap definitions generate now.
    #[test]
    fn generated_files_are_current() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let bless = std::env::var_os("RNCCL_BLESS").is_some();
        let mut stale = Vec::new();
        for (rel, want) in generated_files().unwrap() {
            let path = root.join(&rel);
            if std::fs::read(&path).ok().as_deref() == Some(&want[..]) {
                continue;
            }
            if bless {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &want).unwrap();
            } else {
                stale.push(rel.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "generated files are out of date: {stale:?}; run `RNCCL_BLESS=1 cargo test -p \
             rnccl-cli generated` and commit them"
        );
    }

    #[test]
    fn every_subcommand_has_a_page_and_completes() {
        let pages = man_pages().unwrap();
        for sub in [
            "bench",
            "plot",
            "env-explain",
            "topo",
            "rings",
            "top",
            "tune",
            "completions",
            "man",
        ] {
            assert!(
                pages.iter().any(|(n, _)| n == &format!("rnccl-{sub}.1")),
                "{sub}"
            );
        }
        let bash = String::from_utf8(completion(Shell::Bash)).unwrap();
        for word in [
            "bench",
            "--minbytes",
            "--plot",
            "plot",
            "--metric",
            "env-explain",
            "--interval",
        ] {
            assert!(
                bash.contains(word),
                "{word} missing from the bash completion"
            );
        }
        let page = &pages.iter().find(|(n, _)| n == "rnccl-bench.1").unwrap().1;
        let page = String::from_utf8_lossy(page);
        assert!(page.contains(".TH rnccl-bench"), "{page}");
    }
}
