//! The staleness check of the generated `docs/annotations.md` (CI runs every test).

use crate::annotations::render_markdown;

#[test]
fn docs_annotations_md_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/annotations.md");
    let rendered = render_markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(path, &rendered).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == rendered,
        "docs/annotations.md is stale: it must be the rendering of the annotation table. Regenerate it with \
         `UPDATE_DOCS=1 cargo test -p ccm-load-balancers --lib docs_annotations_md_is_current` and commit it"
    );
}
