//! Making a [`System`]: from XML text or a file (another machine, offline), or from this host's
//! detection merged with `NCCL_TOPO_FILE` as NCCL merges them.

use std::path::Path as FsPath;

use super::assume::Assumptions;
use super::assume::host::{Needs, offline_host};
use super::detect::fusion::Fusion;
use super::detect::report::{filled_notes, host_notes};
use super::detect::{self, Inventory};
use super::params::TopoParams;
use super::system::{System, build};
use super::xml::read::{Schema, parse};
use super::xml::{XmlDoc, write};
use super::{TopoError, TopoNote, paths};
use crate::config::Config;

impl System {
    /// Reads a whole machine from NCCL topology XML (an `NCCL_TOPO_DUMP_FILE`, or a file written
    /// for `NCCL_TOPO_FILE`), as if every GPU in it were a rank of one communicator: GPUs without
    /// a `rank` attribute are numbered by host, then `dev`. Paths use NCCL's default knobs. A
    /// skeleton is filled as [`System::from_xml_assuming`] fills it, with guessed assumptions.
    ///
    /// Errors: [`TopoError::Xml`] naming the line when the XML is malformed or lacks what NCCL
    /// requires (see `topo::system::build` (NCCL `ncclTopoGetSystemFromXml`)).
    pub fn from_xml_str(text: &str) -> Result<System, TopoError> {
        System::from_xml_text(text, "<string>", TopoParams::default())
    }

    /// As [`System::from_xml_str`], naming `source` in errors and computing paths with `params`.
    ///
    /// Errors: as [`System::from_xml_assuming`].
    pub fn from_xml_text(
        text: &str,
        source: &str,
        params: TopoParams,
    ) -> Result<System, TopoError> {
        System::from_xml_assuming(text, source, params, &Assumptions::default())
    }

    /// Reads a topology file offline. A file that leaves to the host what NCCL fills from it
    /// (a cloud skeleton: `<cpu>` without `arch`, bare GPU and NIC `<pci>` elements, `<nvlink>`
    /// without `tclass`...), or any file when `assume` states something, is first filled as
    /// NCCL fills it on a live host, from a host made of the file and `assume` (guessed from PCI
    /// ids, classes and link speeds where `assume` is silent; see
    /// [`crate::topo::assume::host::offline_host`]). Every assumption and every filled value is
    /// a [`TopoNote`]. Complete files are read as they are.
    ///
    /// Errors: [`TopoError::Xml`] naming the line when the XML is malformed or lacks what NCCL
    /// itself requires (see `topo::system::build` (NCCL `ncclTopoGetSystemFromXml`)); [`TopoError::Unusable`] for a skeleton that
    /// names no GPU and cannot be read as it is (only PCI switches the live host's devices hang
    /// under).
    pub fn from_xml_assuming(
        text: &str,
        source: &str,
        params: TopoParams,
        assume: &Assumptions,
    ) -> Result<System, TopoError> {
        let parsed = parse(text, source, Schema::Topology)?;
        let needs = Needs::of(&parsed.doc);
        let hosts = build::host_ids(&parsed.doc).1.len();
        let fill = needs.any() || !assume.is_empty();
        if hosts > 1 || !fill {
            let mut notes = parsed.notes;
            notes.extend(nvlinks_left_to_the_host(&parsed.doc, hosts));
            return System::from_doc(parsed.doc, true, params, notes, None);
        }
        let (inv, assumed) = offline_host(&parsed.doc, assume);
        if inv.gpus.is_empty() {
            let as_is = System::from_doc(parsed.doc.clone(), true, params, parsed.notes, None);
            let has_pci = parsed.doc.find_tag("pci").is_some();
            if as_is.is_ok() || !has_pci {
                return as_is;
            }
            return Err(TopoError::Unusable(format!(
                "{source} names no GPU: it is a skeleton of PCI switches and NUMA nodes that NCCL hangs the devices it detects under; \
                 offline there is nothing to place. Apply it to the instance (NCCL_TOPO_FILE={source} rnccl topo there), \
                 or to a tree captured there (tests/fixtures/capture_sysfs.py, then --sysfs-root)"
            )));
        }
        let doc = detect::fill::node_view(&parsed.doc, &inv, &params.fusion)?;
        let mut notes = parsed.notes;
        notes.extend(assumed);
        notes.extend(filled_notes(&parsed.doc, &doc, "the assumptions"));
        System::from_doc(doc, false, params, notes, None)
    }

    /// Reads the topology file `path` as [`System::from_xml_text`] does.
    ///
    /// Errors: [`TopoError::Io`] when the file cannot be read, else as [`System::from_xml_str`].
    pub fn from_file(path: &FsPath, params: TopoParams) -> Result<System, TopoError> {
        System::from_file_assuming(path, params, &Assumptions::default())
    }

    /// Reads the topology file `path` as [`System::from_xml_assuming`] does.
    ///
    /// Errors: [`TopoError::Io`] when the file cannot be read, else as
    /// [`System::from_xml_assuming`].
    pub fn from_file_assuming(
        path: &FsPath,
        params: TopoParams,
        assume: &Assumptions,
    ) -> Result<System, TopoError> {
        let text = std::fs::read_to_string(path).map_err(|error| TopoError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        })?;
        System::from_xml_assuming(&text, &path.display().to_string(), params, assume)
    }

    /// Builds the graph and its paths from a document.
    ///
    /// Errors: as `topo::system::build` (NCCL `ncclTopoGetSystemFromXml`), and [`TopoError::Unusable`] for a one-sided link.
    pub fn from_doc(
        doc: XmlDoc,
        assign_ranks: bool,
        params: TopoParams,
        notes: Vec<TopoNote>,
        inventory: Option<Inventory>,
    ) -> Result<System, TopoError> {
        let built = build::build(&doc, assign_ranks)?;
        let mut nodes = built.nodes;
        paths::compute(&mut nodes, &params)?;
        let mut notes = notes;
        notes.extend(built.notes);
        Ok(System {
            nodes,
            hosts: built.hosts,
            params,
            notes,
            inventory,
            xml: doc,
        })
    }

    /// The topology as NCCL's `NCCL_TOPO_DUMP_FILE` writer prints it.
    pub fn to_xml_string(&self) -> String {
        write::to_string(&self.xml)
    }

    /// This host's topology as NCCL would see it for a communicator of all its GPUs.
    ///
    /// With `NCCL_TOPO_FILE` set, the file is the starting point and every detected GPU and
    /// network device is filled into it by bus id, each rank's view trimmed and the views fused,
    /// as NCCL does (PCI skeletons from cloud vendors work this way); on a host without GPUs the
    /// file alone is read as [`System::from_file`] does. Without it, the topology is detected
    /// from `sysfs_root` (`/` for this host, or a captured tree) and NVML (or the `nvml.json`
    /// facts captured in a tree other than `/`). Network devices are fused as
    /// `NCCL_NET_MERGE_LEVEL` says. `NCCL_TOPO_DUMP_FILE`, when set, receives the result in
    /// NCCL's format, as NCCL writes it during init (with the physical network devices: NCCL
    /// does not fuse while dumping). What filling the file changed, and devices on one side
    /// only, are [`TopoNote`]s.
    ///
    /// Returns `Ok(None)` on a host with no GPU and no topology file.
    ///
    /// Errors: [`TopoError::Config`] for unusable knob values, [`TopoError::Io`] when the topology
    /// file cannot be read or the dump file written, [`TopoError::Xml`] when the file is malformed.
    pub fn load(cfg: &Config, sysfs_root: &FsPath) -> Result<Option<System>, TopoError> {
        let inventory = detect::detect(sysfs_root, cfg)?;
        System::from_host(cfg, inventory)
    }

    /// As [`System::load`], from an inventory already read with [`detect::detect`].
    ///
    /// Errors: as [`System::load`].
    pub fn from_host(cfg: &Config, inventory: Inventory) -> Result<Option<System>, TopoError> {
        let params = TopoParams::from_config(cfg)?;
        let file = match cfg.string("NCCL_TOPO_FILE") {
            Some(f) => {
                let path = FsPath::new(f);
                let text = std::fs::read_to_string(path).map_err(|error| TopoError::Io {
                    action: "read",
                    path: path.to_path_buf(),
                    error,
                })?;
                Some(parse(&text, f, Schema::Topology)?)
            }
            None => None,
        };
        let mut dump = None;
        let system = match (file, inventory.gpus.is_empty()) {
            (None, true) => return Ok(None),
            (Some(p), true) => {
                let mut s = System::from_doc(p.doc, true, params, p.notes, Some(inventory))?;
                s.notes.push(TopoNote::note(
                    "no GPU detected on this host: the topology file is read alone",
                ));
                s
            }
            (file, false) => {
                let (base, mut notes) = match file {
                    Some(p) => (p.doc, p.notes),
                    None => (XmlDoc::new_system("detected"), Vec::new()),
                };
                let doc = detect::fill::node_view(&base, &inventory, &params.fusion)?;
                if base
                    .root()
                    .is_some_and(|r| !base.node(r).children.is_empty())
                {
                    notes.extend(host_notes(&base, &inventory));
                    notes.extend(filled_notes(&base, &doc, "this host"));
                }
                if cfg.string("NCCL_TOPO_DUMP_FILE").is_some() {
                    let physical = detect::fill::node_view(&base, &inventory, &Fusion::none())?;
                    dump = Some(write::to_string(&physical));
                }
                System::from_doc(doc, false, params, notes, Some(inventory))?
            }
        };
        if let Some(dump_file) = cfg.string("NCCL_TOPO_DUMP_FILE") {
            let text = dump.unwrap_or_else(|| system.to_xml_string());
            std::fs::write(dump_file, text).map_err(|error| TopoError::Io {
                action: "write",
                path: dump_file.into(),
                error,
            })?;
        }
        Ok(Some(system))
    }
}

/// A note for GPUs of a hand-written file (no `host_hash`: not an NCCL dump) that have a `<gpu>`
/// element but no `<nvlink>`: on the host NCCL adds what NVML reports, offline rnccl cannot know.
fn nvlinks_left_to_the_host(doc: &XmlDoc, hosts: usize) -> Option<TopoNote> {
    let root = doc.root()?;
    let all = doc.descendants(root);
    let dump = all
        .iter()
        .any(|&i| doc.node(i).name == "cpu" && doc.attr(i, "host_hash").is_some());
    if dump || hosts > 1 {
        return None;
    }
    let bare: Vec<usize> = all
        .into_iter()
        .filter(|&g| {
            doc.node(g).name == "gpu"
                && doc.sub(g, "nvlink").is_none()
                && doc
                    .attr(g, "sm")
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .is_some_and(|sm| sm >= 60)
        })
        .collect();
    let first = *bare.first()?;
    Some(TopoNote::note(format!(
        "line {}: {} GPU(s) have a <gpu> element without <nvlink>: on the live host NCCL adds the NVLinks NVML reports; offline rnccl assumes none (state them with --assume fabric=nvswitch, or gpu=MODEL)",
        doc.node(first).line,
        bare.len()
    )))
}
