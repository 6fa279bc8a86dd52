//! Every library's README examples compile: a crate whose README has Rust code blocks includes the README as a
//! doc test (`#[cfg(doctest)] #[doc = include_str!("../README.md")]` in its `lib.rs`), and no block is `ignore`,
//! which rustdoc would skip without a word (`no_run` compiles without running; docs/using-the-crates.md).

#![allow(clippy::expect_used)]

use std::path::Path;

/// The README's Rust code blocks' info strings (`rust`, `rust,no_run`, ...).
fn rust_blocks(readme: &str) -> Vec<&str> {
    let mut inside = false;
    let mut found = Vec::new();
    for line in readme.lines() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            if !inside && info.starts_with("rust") {
                found.push(info);
            }
            inside = !inside;
        }
    }
    found
}

#[test]
fn every_readme_example_is_a_doc_test() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/") {
        let dir = entry.expect("entry").path();
        let (Ok(readme), Ok(lib)) = (
            std::fs::read_to_string(dir.join("README.md")),
            std::fs::read_to_string(dir.join("src/lib.rs")),
        ) else {
            continue;
        };
        let name = dir.file_name().expect("name").to_string_lossy().into_owned();
        let blocks = rust_blocks(&readme);
        if blocks.is_empty() {
            continue;
        }
        checked += 1;
        if !lib.contains("#[doc = include_str!(\"../README.md\")]") {
            problems.push(format!(
                "{name}: src/lib.rs does not include README.md as a doc test"
            ));
        }
        for info in blocks
            .iter()
            .filter(|i| i.split(',').any(|w| w.trim() == "ignore"))
        {
            problems.push(format!(
                "{name}: a README block is ```{info} (rustdoc skips it): use no_run"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 7, "only {checked} READMEs with Rust examples found");
}

#[test]
fn an_ignored_block_is_found() {
    let readme = "text\n```rust,ignore\nlet x = 1;\n```\n```toml\n[a]\n```\n```rust,no_run\nfn f() {}\n```\n";
    assert_eq!(rust_blocks(readme), ["rust,ignore", "rust,no_run"]);
}
