//! Placeholder during bring-up.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Inventory {
    pub gpus: Vec<u32>,
}
pub fn detect(
    _r: &std::path::Path,
    _c: &crate::config::Config,
) -> Result<Inventory, crate::topo::TopoError> {
    Ok(Inventory::default())
}
pub mod fill {
    pub fn node_view(
        b: &crate::topo::xml::XmlDoc,
        _i: &super::Inventory,
    ) -> Result<crate::topo::xml::XmlDoc, crate::topo::TopoError> {
        Ok(b.clone())
    }
}
