//! What `--format json|yaml` writes for knob entries: the registry entry, its version range and
//! rnccl support, and the explained setting when the knob is set.

use rnccl::config::KnobSpec;
use rnccl::explain::{Explained, Report};
use serde::Serialize;

/// One knob for JSON/YAML output.
#[derive(Serialize)]
pub struct KnobView<'a> {
    #[serde(flatten)]
    spec: &'a KnobSpec,
    versions: String,
    honoured: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    setting: Option<&'a Explained>,
}

/// Views of `knobs`, each with its setting from `report` when given and set.
pub fn knobs<'a>(knobs: &[&'a KnobSpec], report: Option<&'a Report>) -> Vec<KnobView<'a>> {
    knobs
        .iter()
        .map(|k| KnobView {
            spec: k,
            versions: k.versions(),
            honoured: k.honoured(),
            setting: report.and_then(|r| r.settings.iter().find(|s| s.name == k.name)),
        })
        .collect()
}
