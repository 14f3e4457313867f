//! Test hosts made of network namespaces: two joined by one veth pair, or more joined through a
//! bridge in a namespace of their own. Created by the test, deleted when dropped. Traffic only
//! goes between addresses inside these namespaces.

use std::process::Command;

/// A set of namespaces `hosts[i]` with address `addrs[i]` on interface `ifname`.
pub(crate) struct TestHosts {
    /// Namespace names, one per host.
    pub hosts: Vec<String>,
    /// IPv4 address of each host.
    pub addrs: Vec<String>,
    /// The interface name inside each host.
    pub ifname: String,
    extra: Vec<String>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl TestHosts {
    /// Creates `n` hosts (2 or more). Each gets `lo` up and one interface `rnv0` on a /24.
    ///
    /// Errors: the `ip` command is missing or refuses (not root).
    pub(crate) fn new(tag: &str, n: usize) -> Result<TestHosts, String> {
        let id = std::process::id() % 10_000;
        let net = 100 + (std::process::id() % 150);
        let mut t = TestHosts {
            hosts: Vec::new(),
            addrs: Vec::new(),
            ifname: "rnv0".into(),
            extra: Vec::new(),
        };
        for i in 0..n {
            let ns = format!("rn{tag}{id}h{i}");
            ip(&["netns", "add", &ns])?;
            t.hosts.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            t.addrs.push(format!("10.213.{net}.{}", i + 1));
        }
        if n == 2 {
            ip(&[
                "link",
                "add",
                "rnv0",
                "netns",
                &t.hosts[0],
                "type",
                "veth",
                "peer",
                "name",
                "rnv0",
                "netns",
                &t.hosts[1],
            ])?;
        } else {
            let br = format!("rn{tag}{id}sw");
            ip(&["netns", "add", &br])?;
            t.extra.push(br.clone());
            ip(&["-n", &br, "link", "add", "br0", "type", "bridge"])?;
            ip(&["-n", &br, "link", "set", "br0", "up"])?;
            for (i, h) in t.hosts.iter().enumerate() {
                let port = format!("p{i}");
                ip(&[
                    "link", "add", "rnv0", "netns", h, "type", "veth", "peer", "name", &port,
                    "netns", &br,
                ])?;
                ip(&["-n", &br, "link", "set", &port, "master", "br0"])?;
                ip(&["-n", &br, "link", "set", &port, "up"])?;
            }
        }
        for (h, a) in t.hosts.iter().zip(&t.addrs) {
            ip(&["-n", h, "addr", "add", &format!("{a}/24"), "dev", "rnv0"])?;
            ip(&["-n", h, "link", "set", "rnv0", "up"])?;
        }
        Ok(t)
    }
}

impl Drop for TestHosts {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain(&self.extra) {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}
