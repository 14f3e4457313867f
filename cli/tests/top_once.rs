//! `rnccl top --once`: one screen as text, no terminal, from the pages in a folder — here a
//! page as rnccl's NCCL profiler plugin writes it for a rank of NVIDIA NCCL (kernel-channel
//! links, the last with an unknown peer).

use assert_cmd::Command;
use rnccl::stats::page::{CommPage, Page, encode, page_path};
use rnccl::stats::{Direction, LinkSnapshot, OpInfo, OpSnapshot, Path, UNKNOWN_PEER};
use rnccl::{DataType, Func};

fn link(channel: u16, peer: usize, direction: Direction, bytes: u64) -> LinkSnapshot {
    LinkSnapshot {
        peer,
        channel,
        index: 0,
        direction,
        transport: Path::NcclKernel,
        bytes,
        slots: 1,
        wait_ns: 0,
        stalled_ns: 0,
    }
}

#[test]
fn once_prints_one_screen_of_the_jobs_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    // A page of this (live) process, so it is not stale.
    let pid = std::process::id();
    let page = Page {
        pid,
        written_unix_ns: 1,
        status: None,
        comms: vec![CommPage {
            comm_id: 0xabcd,
            rank: 0,
            nranks: 4,
            device: Some(0),
            ops_completed: 3,
            op: Some(OpSnapshot {
                info: OpInfo {
                    seq: 4,
                    func: Func::AllGather,
                    count: 1 << 20,
                    dtype: DataType::Bfloat16,
                    fused: 1,
                    algo: "NVLS",
                    nchannels: 2,
                    direct: false,
                },
                elapsed_s: 0.5,
                steps_total: 2,
                steps_done: 1,
                bytes_done: 1 << 20,
            }),
            links: vec![
                link(0, 1, Direction::Send, 1 << 30),
                link(1, UNKNOWN_PEER, Direction::Recv, 1 << 30),
            ],
        }],
    };
    std::fs::write(page_path(dir.path(), pid), encode(&page)).unwrap();
    let out = Command::cargo_bin("rnccl")
        .unwrap()
        .args(["top", "--once", "--interval", "50", "--pages"])
        .arg(dir.path())
        .env("COLUMNS", "120")
        .env("LINES", "40")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines().count(),
        80,
        "the jobs screen and the job's: {text}"
    );
    assert!(text.contains(&pid.to_string()), "the job's pid: {text}");
    assert!(
        text.contains("AllGather"),
        "the operation in flight: {text}"
    );
    assert!(text.contains("NCCL kernel"), "the links' transport: {text}");
    assert!(text.contains("← ?"), "an unknown peer shows as ?: {text}");
}
