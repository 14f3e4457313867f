//! Making a [`System`]: from XML text or a file (another machine, offline), or from this host's
//! detection merged with `NCCL_TOPO_FILE` as NCCL merges them.

use std::path::Path as FsPath;

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
    /// a `rank` attribute are numbered by `dev`. Paths use NCCL's default knobs.
    ///
    /// Errors: [`TopoError::Xml`] naming the line when the XML is malformed or lacks what NCCL
    /// requires (see [`build::build`]).
    pub fn from_xml_str(text: &str) -> Result<System, TopoError> {
        System::from_xml_text(text, "<string>", TopoParams::default())
    }

    /// As [`System::from_xml_str`], naming `source` in errors and computing paths with `params`.
    ///
    /// Errors: as [`System::from_xml_str`].
    pub fn from_xml_text(
        text: &str,
        source: &str,
        params: TopoParams,
    ) -> Result<System, TopoError> {
        let parsed = parse(text, source, Schema::Topology)?;
        System::from_doc(parsed.doc, true, params, parsed.notes, None)
    }

    /// Reads the topology file `path` as [`System::from_xml_text`] does.
    ///
    /// Errors: [`TopoError::Io`] when the file cannot be read, else as [`System::from_xml_str`].
    pub fn from_file(path: &FsPath, params: TopoParams) -> Result<System, TopoError> {
        let text = std::fs::read_to_string(path).map_err(|error| TopoError::Io {
            action: "read",
            path: path.to_path_buf(),
            error,
        })?;
        System::from_xml_text(&text, &path.display().to_string(), params)
    }

    /// Builds the graph and its paths from a document.
    ///
    /// Errors: as [`build::build`], and [`TopoError::Unusable`] for a one-sided link.
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
    /// facts captured in a tree other than `/`). `NCCL_TOPO_DUMP_FILE`, when set, receives the
    /// result in NCCL's format, as NCCL writes it during init.
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
                let (base, notes) = match file {
                    Some(p) => (p.doc, p.notes),
                    None => (XmlDoc::new_system("detected"), Vec::new()),
                };
                let doc = detect::fill::node_view(&base, &inventory)?;
                System::from_doc(doc, false, params, notes, Some(inventory))?
            }
        };
        if let Some(dump) = cfg.string("NCCL_TOPO_DUMP_FILE") {
            std::fs::write(dump, system.to_xml_string()).map_err(|error| TopoError::Io {
                action: "write",
                path: dump.into(),
                error,
            })?;
        }
        Ok(Some(system))
    }
}
