//! Two proxies in two network namespaces joined by a veth pair (as root): slots across, and a
//! child process in one namespace killed mid-transfer.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::bootstrap::{Deadline, Retry};
use crate::transport::tcp::{self, listener::DataListener};

/// Runs `f` on a thread that has joined network namespace `ns`: sockets it creates live there.
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let fd = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(&fd, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("joining {path}: {e}"));
        f()
    })
    .join()
    .unwrap()
}

fn test_hosts(tag: &str) -> Option<netns::TestHosts> {
    if !procs::require(
        procs::is_root(),
        "root, to create network namespaces (run the suite as root)",
    ) {
        return None;
    }
    Some(netns::TestHosts::new(tag, 2).expect("creating test hosts (is iproute2 installed?)"))
}

/// The job magic of the namespace tests' connections.
const MAGIC: u64 = 0x6e73;

/// This rank's data listener in namespace `ns` on `ip`.
fn listen_in(ns: &str, ip: &str) -> DataListener {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    in_netns(ns, move || DataListener::bind(ip, MAGIC).unwrap())
}

/// How a sending end dials connection `token` to the listener at `addr` (20 s to do it).
fn dialing<'a>(addr: SocketAddr, token: u64, peer: &'a str) -> tcp::Dial<'a> {
    tcp::Dial {
        addr,
        peer,
        what: peer,
        magic: MAGIC,
        token,
        sockets: 2,
        retry: Retry {
            count: 20,
            step: Duration::from_millis(50),
        },
        deadline: Deadline::after(Duration::from_secs(20)),
        silent: None,
        congestion: None,
    }
}

/// The receiving end of connection `token` on `l` over `e`'s slots, naming rank `peer`: waits
/// up to 20 s for the two sockets (a child that failed to start must fail the test, not hang
/// it).
fn collect_from(l: &DataListener, token: u64, e: &End, peer: usize) -> Link {
    let abort = AtomicBool::new(false);
    let who = name(peer);
    let c = tcp::Collect {
        listener: l,
        token,
        sockets: 2,
        peer: &who,
        what: &who,
        deadline: Deadline::after(Duration::from_secs(20)),
        abort: &abort,
        gave_up: &|| None,
        silent: None,
    };
    Link::Recv(Box::new(
        tcp::collect(&c, e.fifo.slot_bytes, 0, e.slots()).unwrap(),
    ))
}

#[test]
fn slots_cross_two_network_namespaces() {
    let Some(h) = test_hosts("gn") else { return };
    let (slot, count) = (4099, 600);
    let l = listen_in(&h.hosts[1], &h.addrs[1]);
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let (addr, slots) = (l.addr(), ea.slots());
    let sa = in_netns(&h.hosts[0], move || {
        tcp::dial(&dialing(addr, 7, &name(1)), slot, 0, slots).unwrap()
    });
    let lb = collect_from(&l, 7, &eb, 0);
    let _pa = start(vec![conn(Link::Send(Box::new(sa)), &ea, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(lb, &eb, 0, 0)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..count));
        kb.recv(0..count).unwrap();
        t.join().unwrap().unwrap();
    });
}

/// The variable that makes [`netns_child`] act: `send,<slot bytes>,<parent's listener>` (the
/// child dials it as connection 1) or `recv,<slot bytes>,<child's own address>` (the child
/// listens there, prints its listener's address on a line, and collects connection 2).
const CHILD_ENV: &str = "GPU_NET_TEST_CHILD";

/// The other rank of the namespace tests, as a process of its own (this test binary, started
/// by [`spawn_child`] inside a namespace): connects to the parent and sends or receives slots
/// until it is killed (or 60 s pass).
#[test]
#[ignore = "the child process of the network-namespace tests; does nothing by itself"]
fn netns_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut it = spec.splitn(3, ',');
    let (role, slot, at) = (
        it.next().unwrap(),
        it.next().unwrap().parse::<usize>().unwrap(),
        it.next().unwrap().to_string(),
    );
    let r = Rank::new();
    let e = End::new(slot);
    let sends = role == "send";
    let link = if sends {
        let addr: SocketAddr = at.parse().unwrap();
        Link::Send(Box::new(
            tcp::dial(&dialing(addr, 1, &name(0)), slot, 0, e.slots()).unwrap(),
        ))
    } else {
        let l = DataListener::bind(at.parse().unwrap(), MAGIC).unwrap();
        println!("LISTENING {}", l.addr());
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        collect_from(&l, 2, &e, 0)
    };
    let _p = start(vec![conn(link, &e, 0, 0)], &r, LONG);
    let mut k = Kernel::new(&e, &r, Duration::from_secs(60));
    let _ = if sends {
        k.send(0..u64::MAX)
    } else {
        k.pause = Duration::from_micros(300);
        k.recv(0..u64::MAX)
    };
}

/// Starts [`netns_child`] in the namespace other than `here`, playing `role`, and connects to
/// it from namespace `here` over `e`'s slots: the parent receives what a sending child sends,
/// and sends to a receiving child.
fn spawn_child(
    h: &netns::TestHosts,
    here: usize,
    role: &str,
    e: &End,
) -> (std::process::Child, Link) {
    let slot = e.fifo.slot_bytes;
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &h.hosts[1 - here]])
        .arg(std::env::current_exe().unwrap())
        .args([
            "transport::gpu::tests::namespaces::netns_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit());
    if role == "send" {
        let l = listen_in(&h.hosts[here], &h.addrs[here]);
        let child = cmd
            .env(CHILD_ENV, format!("send,{slot},{}", l.addr()))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("starting the child rank");
        (child, collect_from(&l, 1, e, 1))
    } else {
        let mut child = cmd
            .env(CHILD_ENV, format!("recv,{slot},{}", h.addrs[1 - here]))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting the child rank");
        // The test harness prints its own lines first.
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let line = std::io::BufRead::lines(out)
            .map_while(Result::ok)
            .find(|l| l.starts_with("LISTENING "))
            .expect("the child said where it listens");
        let addr: SocketAddr = line["LISTENING ".len()..]
            .parse()
            .unwrap_or_else(|e| panic!("the child said {line:?} for its address: {e}"));
        let slots = e.slots();
        let s = in_netns(&h.hosts[here], move || {
            tcp::dial(&dialing(addr, 2, &name(1)), slot, 0, slots).unwrap()
        });
        (child, Link::Send(Box::new(s)))
    }
}

/// The receiving rank's process is killed mid-transfer: the sender, in the other namespace,
/// reports an error naming it within the deadline and stops its kernel.
#[test]
fn killing_the_receiving_process_fails_the_sender_across_namespaces() {
    let Some(h) = test_hosts("gk") else { return };
    let slot = 65536;
    let r = Rank::new();
    let e = End::new(slot);
    let (mut child, link) = spawn_child(&h, 0, "recv", &e);
    let p = start(vec![conn(link, &e, 1, 3)], &r, LONG);
    let k = Kernel::new(&e, &r, LONG);
    std::thread::scope(|sc| {
        let t = sc.spawn(move || k.send(0..u64::MAX));
        assert!(
            eventually(Duration::from_secs(10), || e.load(e.fifo.head) >= 64),
            "the child received nothing"
        );
        let t0 = Instant::now();
        child.kill().unwrap();
        child.wait().unwrap();
        let err = t.join().unwrap().unwrap_err();
        assert!(err.contains("aborted"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    });
    let e = p.failure().expect("the proxy reports the peer").to_string();
    assert!(e.contains("rank 1") && e.contains("channel 3"), "{e}");
}

/// The sending rank's process is killed mid-transfer: the receiver, in the other namespace,
/// reports it naming the peer and stops its kernel. The receiving kernel pauses first, so the
/// child's slots (larger than its sockets hold) back up and the cut falls inside one.
#[test]
fn killing_the_sending_process_fails_the_receiver_across_namespaces() {
    let Some(h) = test_hosts("gs") else { return };
    let slot = 4 << 20;
    let r = Rank::new();
    let e = End::new(slot);
    let (mut child, link) = spawn_child(&h, 1, "send", &e);
    let p = start(vec![conn(link, &e, 1, 6)], &r, LONG);
    let k = Kernel::new(&e, &r, LONG);
    k.recv(0..4).unwrap();
    // The receiving proxy fills its 8 free slots, then leaves the rest in the sockets.
    assert!(eventually(Duration::from_secs(10), || e.load(e.fifo.tail) == 4 + SLOTS));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    let err = k.recv(4..u64::MAX).unwrap_err();
    assert!(err.contains("aborted"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let e = p.failure().expect("the proxy reports the peer").to_string();
    assert!(
        e.contains("rank 1") && e.contains("channel 6") && e.contains("middle of a slot"),
        "{e}"
    );
}
