//! The engine takes its channel count and ring order from the topology model when one is
//! available (here: NCCL's own topology dump of a 2×H200 NVSwitch host via NCCL_TOPO_FILE).

mod common;

use common::{all_ok, on_threads};
use rnccl::RedOp;

fn anchor() -> String {
    format!(
        "{}/tests/fixtures/anchors/h200x2/topo.xml",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn channels_and_rings_come_from_the_topology() {
    let topo = anchor();
    // NCCL dumped 12 ring channels there and doubled them to 24 ("Channel 00/24 : 0 1").
    all_ok(on_threads(2, &[("NCCL_TOPO_FILE", &topo)], |c| {
        if c.nchannels() != 24 || c.rings().iter().any(|r| r != &vec![0, 1]) {
            return Err(format!("{} channels, rings {:?}", c.nchannels(), c.rings()));
        }
        let mut v = vec![1f32; 1 << 20];
        c.all_reduce_in_place(&mut v, RedOp::Sum)
            .map_err(|e| e.to_string())?;
        if v.iter().any(|&x| x != 2.0) {
            Err("wrong sum".into())
        } else {
            Ok(())
        }
    }));
    // NCCL_MAX_NCHANNELS still bounds the model's count.
    all_ok(on_threads(
        2,
        &[("NCCL_TOPO_FILE", &topo), ("NCCL_MAX_NCHANNELS", "4")],
        |c| {
            if c.nchannels() == 4 {
                Ok(())
            } else {
                Err(format!("{} channels", c.nchannels()))
            }
        },
    ));
    // Three ranks on a two-GPU topology: the model does not apply; rank order on the default.
    all_ok(on_threads(3, &[("NCCL_TOPO_FILE", &topo)], |c| {
        if c.nchannels() == 2 && c.rings()[0] == vec![0, 1, 2] {
            Ok(())
        } else {
            Err(format!("{:?}", c.rings()))
        }
    }));
}

#[test]
fn a_malformed_topology_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("topo.xml");
    std::fs::write(
        &bad,
        "<system version=\"1\">\n  <cpu numaid=\"0\"\n</system>\n",
    )
    .unwrap();
    let mut cfg = rnccl::config::Config::defaults();
    cfg.set(
        "NCCL_TOPO_FILE",
        bad.to_str().unwrap(),
        rnccl::config::Source::Program("test".into()),
    );
    let start = std::time::Instant::now();
    let e = rnccl::Communicator::init_all_with(
        2,
        rnccl::CommConfig::with_knobs(std::sync::Arc::new(cfg)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("NCCL_TOPO_FILE") && e.contains("topo.xml:2:"),
        "the error names the file and line: {e}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(30),
        "every rank learns of rank 0's failure at once"
    );
}

/// NCCL_GRAPH_DUMP_FILE is written by the engine (not only by `rnccl rings`), on the rank
/// NCCL_GRAPH_DUMP_FILE_RANK names, with the graphs NCCL dumped on the anchor host.
#[test]
fn the_engine_writes_nccl_graph_dump_file() {
    let topo = anchor();
    let dir = tempfile::tempdir().unwrap();
    for dump_rank in ["0", "1"] {
        let out = dir.path().join(format!("graph{dump_rank}.xml"));
        let path = out.to_str().unwrap().to_string();
        all_ok(on_threads(
            2,
            &[
                ("NCCL_TOPO_FILE", &topo),
                ("NCCL_GRAPH_DUMP_FILE", &path),
                ("NCCL_GRAPH_DUMP_FILE_RANK", dump_rank),
            ],
            |_| Ok(()),
        ));
        let got = std::fs::read_to_string(&out).expect("the dump was written");
        let want = std::fs::read_to_string(format!(
            "{}/tests/fixtures/anchors/h200x2/graph.xml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assert_eq!(got, want, "rank {dump_rank}'s dump differs from NCCL's");
    }
}

/// NCCL_GRAPH_FILE replaces the search in the engine too: a ring graph of 3 channels read from
/// the file gives 6 channels once doubled, and a file that fails NCCL's checks is an error
/// naming the knob, file and line.
#[test]
fn the_engine_reads_nccl_graph_file() {
    let topo = anchor();
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("graph.xml");
    let channel = "<channel><gpu dev=\"0x1\"/><gpu dev=\"0\"/></channel>";
    std::fs::write(
        &graph,
        format!(
            "<graphs version=\"1\">\n<graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"3\" speedintra=\"40\" speedinter=\"40\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\">{}</graph>\n</graphs>\n",
            channel.repeat(3)
        ),
    )
    .unwrap();
    let g = graph.to_str().unwrap().to_string();
    all_ok(on_threads(
        2,
        &[("NCCL_TOPO_FILE", &topo), ("NCCL_GRAPH_FILE", &g)],
        |c| {
            if c.nchannels() != 6 {
                return Err(format!("{} channels", c.nchannels()));
            }
            Ok(())
        },
    ));
    std::fs::write(
        &graph,
        "<graphs version=\"1\">\n<graph id=\"0\" pattern=\"4\" crossnic=\"0\" nchannels=\"1\" speedintra=\"40\" speedinter=\"40\" latencyinter=\"0\" typeintra=\"NVL\" typeinter=\"PIX\" samechannels=\"1\">\n<channel><gpu dev=\"0x7\"/><gpu dev=\"0\"/></channel></graph>\n</graphs>\n",
    )
    .unwrap();
    let mut cfg = rnccl::config::Config::defaults();
    for (k, v) in [
        ("NCCL_TOPO_FILE", topo.as_str()),
        ("NCCL_GRAPH_FILE", g.as_str()),
    ] {
        cfg.set(k, v, rnccl::config::Source::Program("test".into()));
    }
    let e = rnccl::Communicator::init_all_with(
        2,
        rnccl::CommConfig::with_knobs(std::sync::Arc::new(cfg)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("NCCL_GRAPH_FILE")
            && e.contains("graph.xml:3:")
            && e.contains("dev 7 not found"),
        "{e}"
    );
}
