//! Two proxies in two network namespaces joined by a veth pair (as root): slots across, and a
//! child process in one namespace killed mid-transfer.

use super::*;

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

/// Listens in namespace `ns` on `ip`; returns the listener and its address.
fn listen_in(ns: &str, ip: &str) -> (TcpListener, SocketAddr) {
    let ip = ip.to_string();
    in_netns(ns, move || {
        let l = TcpListener::bind((ip.as_str(), 0)).unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    })
}

/// Accepts `n` prepared sockets, panicking when they have not all arrived within 20 s (a
/// child that failed to start must fail the test, not hang it).
fn accept_n(l: &TcpListener, n: usize) -> Vec<TcpStream> {
    l.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut socks = Vec::with_capacity(n);
    while socks.len() < n {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                prepare_socket(&s, None).unwrap();
                socks.push(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "{} of {n} child sockets arrived within 20 s",
                    socks.len()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("accepting a child socket: {e}"),
        }
    }
    socks
}

#[test]
fn slots_cross_two_network_namespaces() {
    let Some(h) = test_hosts("gn") else { return };
    let (slot, count, nsocks) = (4099, 600, 2);
    let (l, addr) = listen_in(&h.hosts[1], &h.addrs[1]);
    let sa: Vec<TcpStream> = in_netns(&h.hosts[0], move || {
        (0..nsocks)
            .map(|_| {
                let s = TcpStream::connect(addr).unwrap();
                prepare_socket(&s, None).unwrap();
                s
            })
            .collect()
    });
    let sb = accept_n(&l, nsocks);
    let (ra, rb) = (Rank::new(), Rank::new());
    let (ea, eb) = (End::new(slot), End::new(slot));
    let _pa = start(vec![conn(Side::Send, &ea, sa, 1, 0)], &ra, LONG);
    let _pb = start(vec![conn(Side::Recv, &eb, sb, 0, 0)], &rb, LONG);
    let (ka, kb) = (Kernel::new(&ea, &ra, LONG), Kernel::new(&eb, &rb, LONG));
    std::thread::scope(|sc| {
        let t = sc.spawn(move || ka.send(0..count));
        kb.recv(0..count).unwrap();
        t.join().unwrap().unwrap();
    });
}

/// The variable that makes [`netns_child`] act: `send|recv,<slot bytes>,<parent address>`.
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
    let (role, slot, addr) = (
        it.next().unwrap(),
        it.next().unwrap().parse::<usize>().unwrap(),
        it.next().unwrap().parse::<SocketAddr>().unwrap(),
    );
    let socks: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = TcpStream::connect(addr).unwrap();
            prepare_socket(&s, None).unwrap();
            s
        })
        .collect();
    let r = Rank::new();
    let e = End::new(slot);
    let side = if role == "send" {
        Side::Send
    } else {
        Side::Recv
    };
    let _p = start(vec![conn(side, &e, socks, 0, 0)], &r, LONG);
    let mut k = Kernel::new(&e, &r, Duration::from_secs(60));
    let _ = if side == Side::Send {
        k.send(0..u64::MAX)
    } else {
        k.pause = Duration::from_micros(300);
        k.recv(0..u64::MAX)
    };
}

/// Starts [`netns_child`] in namespace `ns` and accepts its two sockets on a listener in
/// namespace `here`.
fn spawn_child(
    h: &netns::TestHosts,
    here: usize,
    role: &str,
    slot: usize,
) -> (std::process::Child, Vec<TcpStream>) {
    let (l, addr) = listen_in(&h.hosts[here], &h.addrs[here]);
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", &h.hosts[1 - here]])
        .arg(std::env::current_exe().unwrap())
        .args([
            "transport::gpu::tests::namespaces::netns_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, format!("{role},{slot},{addr}"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("starting the child rank");
    let socks = accept_n(&l, 2);
    (child, socks)
}

/// The receiving rank's process is killed mid-transfer: the sender, in the other namespace,
/// reports an error naming it within the deadline and stops its kernel.
#[test]
fn killing_the_receiving_process_fails_the_sender_across_namespaces() {
    let Some(h) = test_hosts("gk") else { return };
    let slot = 65536;
    let (mut child, socks) = spawn_child(&h, 0, "recv", slot);
    let r = Rank::new();
    let e = End::new(slot);
    let p = start(vec![conn(Side::Send, &e, socks, 1, 3)], &r, LONG);
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
    let (mut child, socks) = spawn_child(&h, 1, "send", slot);
    let r = Rank::new();
    let e = End::new(slot);
    let p = start(vec![conn(Side::Recv, &e, socks, 1, 6)], &r, LONG);
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
