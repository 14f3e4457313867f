//! Test hosts made of network namespaces: two joined by one veth pair, or more joined through a
//! bridge in a namespace of their own, optionally with several rails (one interface per rail
//! on each host, each rail its own bridge and subnet). Created by the test, deleted when
//! dropped. Traffic only goes between addresses inside these namespaces; [`TestHosts::throttle`]
//! slows one pair of hosts on one rail with `tc`.

use std::process::Command;
use std::time::{Duration, Instant};

/// A set of namespaces `hosts[i]` with address `addrs[i]` on interface `ifname`.
pub(crate) struct TestHosts {
    /// Namespace names, one per host.
    pub hosts: Vec<String>,
    /// IPv4 address of each host on rail 0.
    pub addrs: Vec<String>,
    /// The interface name of rail 0 inside each host.
    pub ifname: String,
    /// Per rail, each host's IPv4 address (`rail_addrs[0] == addrs`); rail `k`'s interface is
    /// `rnv<k>`.
    pub rail_addrs: Vec<Vec<String>>,
    extra: Vec<String>,
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd} {args:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args)
}

impl TestHosts {
    /// Creates `n` hosts (2 or more). Each gets `lo` up and one interface `rnv0` on a /24.
    ///
    /// Errors: the `ip` command is missing or refuses (not root).
    pub(crate) fn new(tag: &str, n: usize) -> Result<TestHosts, String> {
        TestHosts::with_rails(tag, n, 1)
    }

    /// Creates `n` hosts with `rails` interfaces each, `rnv0` … `rnv<rails-1>`, rail `k` on
    /// its own bridge and subnet `10.<213+k>.x.0/24` (two hosts with one rail: a veth pair).
    /// Returns once every interface is running.
    ///
    /// Errors: the `ip` command is missing or refuses (not root).
    pub(crate) fn with_rails(tag: &str, n: usize, rails: usize) -> Result<TestHosts, String> {
        let id = std::process::id() % 10_000;
        let net = 100 + (std::process::id() % 150);
        let mut t = TestHosts {
            hosts: Vec::new(),
            addrs: Vec::new(),
            ifname: "rnv0".into(),
            rail_addrs: vec![Vec::new(); rails],
            extra: Vec::new(),
        };
        for i in 0..n {
            let ns = format!("rn{tag}{id}h{i}");
            ip(&["netns", "add", &ns])?;
            t.hosts.push(ns.clone());
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            for (k, addrs) in t.rail_addrs.iter_mut().enumerate() {
                addrs.push(format!("10.{}.{net}.{}", 213 + k, i + 1));
            }
        }
        t.addrs = t.rail_addrs[0].clone();
        if n == 2 && rails == 1 {
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
            let sw = format!("rn{tag}{id}sw");
            ip(&["netns", "add", &sw])?;
            t.extra.push(sw.clone());
            for k in 0..rails {
                let br = format!("br{k}");
                ip(&["-n", &sw, "link", "add", &br, "type", "bridge"])?;
                ip(&["-n", &sw, "link", "set", &br, "up"])?;
                let dev = format!("rnv{k}");
                for (i, h) in t.hosts.iter().enumerate() {
                    let port = format!("p{k}x{i}");
                    ip(&[
                        "link", "add", &dev, "netns", h, "type", "veth", "peer", "name", &port,
                        "netns", &sw,
                    ])?;
                    ip(&["-n", &sw, "link", "set", &port, "master", &br])?;
                    ip(&["-n", &sw, "link", "set", &port, "up"])?;
                }
            }
        }
        for (k, addrs) in t.rail_addrs.iter().enumerate() {
            let dev = format!("rnv{k}");
            for (h, a) in t.hosts.iter().zip(addrs) {
                ip(&["-n", h, "addr", "add", &format!("{a}/24"), "dev", &dev])?;
                ip(&["-n", h, "link", "set", &dev, "up"])?;
            }
        }
        t.wait_running(rails)?;
        Ok(t)
    }

    /// Waits (at most 10 s) until every host's `rnv*` interfaces are running: a veth reports
    /// its carrier a moment after both ends are up, and until then NCCL's rules skip it.
    fn wait_running(&self, rails: usize) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(10);
        for h in &self.hosts {
            for k in 0..rails {
                let dev = format!("rnv{k}");
                loop {
                    let out = Command::new("ip")
                        .args(["-n", h, "-o", "link", "show", "dev", &dev])
                        .output()
                        .map_err(|e| format!("ip link show: {e}"))?;
                    if String::from_utf8_lossy(&out.stdout).contains("LOWER_UP") {
                        break;
                    }
                    if Instant::now() > until {
                        return Err(format!("{dev} in {h} never came up"));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        Ok(())
    }

    /// Slows the traffic between hosts `a` and `b` on `rail` to `mbit` Mbit/s each way: on each
    /// one's interface, an htb class at that rate and a u32 filter sending it the packets for
    /// the other's address; everything else passes unshaped. One throttle per interface.
    ///
    /// Errors: `tc` is missing or refuses.
    pub(crate) fn throttle(
        &self,
        a: usize,
        b: usize,
        rail: usize,
        mbit: u32,
    ) -> Result<(), String> {
        self.shape(a, b, rail, &format!("{mbit}mbit"))
    }

    /// Stalls the traffic between hosts `a` and `b` on `rail`: [`TestHosts::throttle`] at
    /// 8 kbit/s, where a collective's data crawls while the hosts still answer.
    ///
    /// Errors: as [`TestHosts::throttle`].
    pub(crate) fn stall(&self, a: usize, b: usize, rail: usize) -> Result<(), String> {
        self.shape(a, b, rail, "8kbit")
    }

    fn shape(&self, a: usize, b: usize, rail: usize, rate: &str) -> Result<(), String> {
        let dev = format!("rnv{rail}");
        for (from, to) in [(a, b), (b, a)] {
            let ns = &self.hosts[from];
            let dst = format!("{}/32", self.rail_addrs[rail][to]);
            let tc = |args: &[&str]| {
                let mut all = vec!["netns", "exec", ns.as_str(), "tc"];
                all.extend_from_slice(args);
                run("ip", &all)
            };
            tc(&[
                "qdisc", "add", "dev", &dev, "root", "handle", "1:", "htb", "default", "10",
            ])?;
            tc(&[
                "class", "add", "dev", &dev, "parent", "1:", "classid", "1:20", "htb", "rate", rate,
            ])?;
            tc(&[
                "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "dst", &dst, "flowid", "1:20",
            ])?;
        }
        Ok(())
    }
}

impl Drop for TestHosts {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain(&self.extra) {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}
