//! Malformed topology files: every problem is an error naming the line, nothing panics or hangs,
//! whatever the input.

use proptest::prelude::*;
use rnccl::topo::{System, TopoError};

const DGX: &str = include_str!("fixtures/synthetic/dgx8x16.xml");

fn err(text: &str) -> String {
    match System::from_xml_str(text) {
        Err(e @ TopoError::Xml { .. }) | Err(e @ TopoError::Unusable(_)) => e.to_string(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn missing_or_bad_attributes_name_element_and_line() {
    let base =
        "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n";
    let end = "  </cpu>\n</system>\n";
    let e = err(&format!(
        "{base}    <pci class=\"0x060400\" link_speed=\"\" link_width=\"16\"/>\n{end}"
    ));
    assert!(e.starts_with("<string>:3:") && e.contains("busid"), "{e}");
    let e = err(&format!(
        "{base}    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"16\">\n      <gpu dev=\"0\" sm=\"ninety\"/>\n    </pci>\n{end}"
    ));
    assert!(
        e.starts_with("<string>:4:") && e.contains("sm=\"ninety\""),
        "{e}"
    );
    let e = err("<system version=\"1\">\n  <cpu numaid=\"x\" arch=\"x86_64\"/>\n</system>\n");
    assert!(e.starts_with("<string>:2:") && e.contains("numaid"), "{e}");
    let e = err("<system version=\"1\">\n  <cpu numaid=\"0\"/>\n</system>\n");
    assert!(e.starts_with("<string>:2:") && e.contains("arch"), "{e}");
    // A complete file is read as it is: two GPUs claiming one rank. (A file that leaves
    // something to the host is filled first, and filling gives every GPU its rank, as NCCL
    // does on the host.)
    let e = err(&format!(
        "{base}    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"16\">\n      <gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"/>\n    </pci>\n    <pci busid=\"0000:02:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"16\">\n      <gpu dev=\"1\" sm=\"80\" rank=\"0\" gdr=\"1\"/>\n    </pci>\n{end}"
    ));
    assert!(
        e.starts_with("<string>:7:") && e.contains("rank 0 is already the GPU at line 4"),
        "{e}"
    );
    let e = err(&format!(
        "{base}    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"16\">\n      <gpu dev=\"0\" sm=\"80\">\n        <nvlink target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030200\"/>\n      </gpu>\n    </pci>\n    <pci busid=\"0000:02:00.0\" class=\"0x030200\" link_speed=\"\" link_width=\"16\">\n      <gpu dev=\"1\" sm=\"80\"/>\n    </pci>\n{end}"
    ));
    assert!(
        e.starts_with("<string>:5:") && e.contains("no <nvlink> back"),
        "one-sided NVLink: {e}"
    );
    let deep = format!(
        "{}{}",
        "<system version=\"1\">".to_string() + &"<pci>".repeat(100),
        "</pci>".repeat(100) + "</system>"
    );
    assert!(err(&deep).contains("nested more than 64"));
}

#[test]
fn notes_flag_what_nccl_itself_would_reject() {
    let text = "<?xml version=\"1.0\"?>\n<system version=\"1\">\n  <cpu numaid=\"0\"\tarch=\"x86_64\" vendor=\"AuthenticAMD\"/>\n  <gpu/>\n</system>\n";
    let sys = System::from_xml_str(text).unwrap();
    let notes = sys
        .notes
        .iter()
        .map(|n| n.message.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        notes.contains("line 1:") && notes.contains("declaration"),
        "{notes}"
    );
    assert!(
        notes.contains("line 3:") && notes.contains("tab"),
        "{notes}"
    );
    assert!(
        notes.contains("line 4:") && notes.contains("<gpu>"),
        "{notes}"
    );
    let rejects: Vec<bool> = sys.notes.iter().map(|n| n.nccl_rejects).collect();
    assert_eq!(
        rejects,
        [true, true, false],
        "the prolog and the tab make NCCL's parser fail; a misplaced element is only skipped: {:?}",
        sys.notes
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn mutated_files_never_panic(cut in 0usize..DGX.len(), len in 0usize..40, insert in "[<>/=\" a-z0-9]{0,8}") {
        let mut s = DGX.to_string();
        let start = cut.min(s.len());
        let end = (start + len).min(s.len());
        if s.is_char_boundary(start) && s.is_char_boundary(end) {
            s.replace_range(start..end, &insert);
        }
        let _ = System::from_xml_str(&s);
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = System::from_xml_str(&s);
    }
}
