//! The remote-start command of `rnccl check`'s host-list mode: a template such as
//! `ssh -o BatchMode=yes {host}` (the default) or `ip netns exec {host}`, split into words as a
//! shell would (quotes kept together), `{host}` replaced in every word, the worker's command
//! appended. Appended words that hold shell metacharacters are quoted for the remote shell
//! (ssh runs its command through one).

use std::process::Command;

use anyhow::bail;

/// The default template: ssh that never prompts (a password prompt would hang the check).
pub const DEFAULT: &str = "ssh -o BatchMode=yes -o ConnectTimeout=10 {host}";

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rsh {
    words: Vec<String>,
}

impl Rsh {
    /// Parses `template`.
    ///
    /// Errors: unbalanced quotes, an empty template, or no `{host}` in it.
    pub fn parse(template: &str) -> anyhow::Result<Rsh> {
        let Some(words) = shlex::split(template) else {
            bail!("--rsh {template:?} has an unbalanced quote");
        };
        if words.is_empty() {
            bail!(
                "--rsh is empty: give the command that starts a program on {{host}}, e.g. {DEFAULT:?}"
            );
        }
        if !words.iter().any(|w| w.contains("{host}")) {
            bail!(
                "--rsh {template:?} has no {{host}}: write where the host name goes, e.g. {DEFAULT:?} or 'ip netns exec {{host}}'"
            );
        }
        Ok(Rsh { words })
    }

    /// The command that runs `remote` (program and arguments) on `host`.
    pub fn command(&self, host: &str, remote: &[String]) -> Command {
        let words: Vec<String> = self
            .words
            .iter()
            .map(|w| w.replace("{host}", host))
            .collect();
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]);
        cmd.args(
            remote
                .iter()
                .map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned())),
        );
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(c: &Command) -> Vec<String> {
        std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn templates_become_commands() {
        let r = Rsh::parse("ssh -o 'ProxyJump=jump host' {host}").unwrap();
        let c = r.command(
            "n1",
            &["/opt/rnccl".into(), "check".into(), "--worker".into()],
        );
        assert_eq!(
            argv(&c),
            [
                "ssh",
                "-o",
                "ProxyJump=jump host",
                "n1",
                "/opt/rnccl",
                "check",
                "--worker"
            ]
        );
        let r = Rsh::parse("ip netns exec {host} env NCCL_HOSTID={host}").unwrap();
        let c = r.command("ns2", &["/my dir/rnccl".into()]);
        assert_eq!(
            argv(&c),
            [
                "ip",
                "netns",
                "exec",
                "ns2",
                "env",
                "NCCL_HOSTID=ns2",
                "'/my dir/rnccl'"
            ]
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        let e = |t: &str| Rsh::parse(t).unwrap_err().to_string();
        assert!(e("ssh").contains("no {host}"));
        assert!(e("  ").contains("is empty"));
        assert!(e("ssh '{host}").contains("unbalanced quote"));
    }
}
