//! The state table in docs/PROTOCOL.md is the one the code implements.

#[test]
fn protocol_md_state_table_matches_the_code() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/PROTOCOL.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let begin = "<!-- state-table:begin -->\n";
    let end = "<!-- state-table:end -->";
    let a = doc.find(begin).expect("begin marker") + begin.len();
    let b = doc.find(end).expect("end marker");
    let want = xtp_proto::State::table_markdown();
    if std::env::var_os("XPRESS_BLESS").is_some() {
        let updated = format!("{}{}{}", &doc[..a], want, &doc[b..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    assert_eq!(&doc[a..b], want, "docs/PROTOCOL.md state table is stale; rerun with XPRESS_BLESS=1");
}
