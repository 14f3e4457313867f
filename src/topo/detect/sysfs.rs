//! Reading files of a sysfs/procfs tree rooted anywhere (`/` for this host, a captured copy in
//! tests), as NCCL reads them: whole file, trailing newline dropped, unreadable = absent.

use std::path::{Path, PathBuf};

/// A sysfs tree: every path is given as on the host (`/sys/...`) and read under `root`.
#[derive(Debug, Clone)]
pub struct Root {
    root: PathBuf,
}

impl Root {
    /// The tree under `root`.
    pub fn new(root: &Path) -> Root {
        Root {
            root: root.to_path_buf(),
        }
    }

    /// Whether this is the live host (`/`).
    pub fn is_host(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The real location of host path `p`.
    pub fn at(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    /// The content of host path `p` without its trailing newline; `None` when missing, unreadable
    /// or empty (sysfs returns errors for attributes a device does not support).
    pub fn read(&self, p: &str) -> Option<String> {
        let bytes = std::fs::read(self.at(p)).ok()?;
        let s = String::from_utf8_lossy(&bytes);
        let s = s.strip_suffix('\n').unwrap_or(&s).to_string();
        (!s.is_empty()).then_some(s)
    }

    /// Host path `p` opened for reading (for reads at offsets); `None` when it cannot be.
    pub fn open(&self, p: &str) -> Option<std::fs::File> {
        std::fs::File::open(self.at(p)).ok()
    }

    /// Names in directory `p`, sorted.
    pub fn list(&self, p: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.at(p))
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// The host path a symlink (or directory) at host path `p` resolves to, within the tree.
    pub fn resolve(&self, p: &str) -> Option<String> {
        let real = std::fs::canonicalize(self.at(p)).ok()?;
        let root = std::fs::canonicalize(&self.root).ok()?;
        let rel = real.strip_prefix(&root).ok()?;
        Some(format!("/{}", rel.display()))
    }

    /// The last component of the target of symlink `p` (e.g. `pci` for a `subsystem` link),
    /// read without following it, so captured trees need not hold the target.
    pub fn link_name(&self, p: &str) -> Option<String> {
        let t = std::fs::read_link(self.at(p)).ok()?;
        t.file_name().map(|n| n.to_string_lossy().into_owned())
    }
}

/// The last component of a host path.
pub fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The parent of a host path.
pub fn dirname(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}
