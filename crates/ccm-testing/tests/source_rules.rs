//! The house rules that no compiler lint checks, read from the workspace's sources: every non-test source file
//! stays under 600 lines, and the files of a crate never import each other in a circle (`crate::` and `super::`
//! paths between files, in `use` items, code and macro bodies). The function limit is clippy's
//! `too_many_lines` (threshold in clippy.toml). A violation fails here naming the files.
//!
//! The modules are those the library and binary targets of `cargo metadata` declare, followed from their roots
//! through `mod` items (`#[path]` included); modules under `#[cfg(test)]` are tests and are not read.

#![allow(clippy::expect_used, clippy::too_many_lines)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use common::workspace_metadata;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Non-test source files stay under this many lines (docs/architecture.md, "File order and size").
const MAX_FILE_LINES: usize = 600;

/// One module tree: a library or binary target of a workspace member.
struct Target {
    name: String,
    root: PathBuf,
}

fn targets() -> Vec<Target> {
    let meta = workspace_metadata();
    let mut targets = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            let kinds = target["kind"].as_array().expect("kind");
            if kinds.iter().any(|k| k == "lib" || k == "bin") {
                targets.push(Target {
                    name: format!("{} ({})", package["name"].as_str().expect("name"), target["name"]),
                    root: PathBuf::from(target["src_path"].as_str().expect("src_path")),
                });
            }
        }
    }
    assert!(targets.len() > 10, "too few targets read: {}", targets.len());
    targets
}

/// A target's modules: the file of each module path (inline modules map to the file that holds them).
#[derive(Default)]
struct Modules {
    files: BTreeMap<Vec<String>, PathBuf>,
    parsed: BTreeMap<PathBuf, (Vec<String>, syn::File)>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs
        .iter()
        .find(|a| a.path().is_ident("path"))
        .and_then(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
}

impl Modules {
    fn read(root: &Path) -> Self {
        let mut modules = Self::default();
        modules.add_file(root, Vec::new(), root.parent().expect("root dir").to_path_buf());
        modules
    }

    /// Reads `file` as module `path`, whose `mod x;` children live in `children`.
    fn add_file(&mut self, file: &Path, path: Vec<String>, children: PathBuf) {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", file.display()));
        self.files.insert(path.clone(), file.to_path_buf());
        self.add_items(file, &ast.items, &path, &children);
        self.parsed.insert(file.to_path_buf(), (path, ast));
    }

    fn add_items(&mut self, file: &Path, items: &[syn::Item], path: &[String], children: &Path) {
        for item in items {
            let syn::Item::Mod(module) = item else { continue };
            if is_cfg_test(&module.attrs) {
                continue;
            }
            let name = module.ident.to_string();
            let mut child_path = path.to_vec();
            child_path.push(name.clone());
            if let Some((_, inner)) = &module.content {
                self.files.insert(child_path.clone(), file.to_path_buf());
                self.add_items(file, inner, &child_path, &children.join(&name));
                continue;
            }
            let (child, grandchildren) = match path_attr(&module.attrs) {
                Some(rel) => {
                    let dir = file.parent().expect("file dir");
                    let child = dir.join(rel);
                    let grandchildren = child.parent().expect("dir").to_path_buf();
                    (child, grandchildren)
                }
                None if children.join(format!("{name}.rs")).exists() => {
                    (children.join(format!("{name}.rs")), children.join(&name))
                }
                None => (children.join(&name).join("mod.rs"), children.join(&name)),
            };
            self.add_file(&child, child_path, grandchildren);
        }
    }

    /// The file that holds the item at absolute module path `path` (its longest module prefix).
    /// The file of the longest module prefix of `path`: the file a path names as written (a name re-exported
    /// by a parent module is taken from the parent's file, as the path says).
    fn file_of(&self, path: &[String]) -> Option<(&PathBuf, String)> {
        (0..=path.len()).rev().find_map(|n| {
            let file = self.files.get(&path[..n])?;
            Some((file, path.get(n).cloned().unwrap_or_else(|| "*".into())))
        })
    }
}

/// The `crate::` and `super::` paths of one file, each with the module it is written in.
struct Paths {
    module: Vec<String>,
    found: Vec<(Vec<String>, Vec<String>)>,
}

impl Paths {
    fn push(&mut self, segments: Vec<String>) {
        if matches!(segments.first().map(String::as_str), Some("crate" | "super")) {
            self.found.push((self.module.clone(), segments));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
            syn::UseTree::Rename(r) => self.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
            syn::UseTree::Glob(_) => self.push(prefix.clone()),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }

    /// `crate :: a :: b` and `super :: ...` sequences in a macro's tokens.
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            match &flat[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" || id == "super" => {
                    let mut segments = vec![id.to_string()];
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(n)),
                    ) = (flat.get(i + 1), flat.get(i + 2), flat.get(i + 3))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segments.push(n.to_string());
                        i += 3;
                    }
                    self.push(segments);
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'a> Visit<'a> for Paths {
    fn visit_item_mod(&mut self, module: &'a syn::ItemMod) {
        if is_cfg_test(&module.attrs) {
            return;
        }
        self.module.push(module.ident.to_string());
        syn::visit::visit_item_mod(self, module);
        self.module.pop();
    }
    /// `pub(crate)` and `pub(super)` name a scope, not an item.
    fn visit_visibility(&mut self, _: &'a syn::Visibility) {}
    fn visit_item_use(&mut self, item: &'a syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }
    fn visit_path(&mut self, path: &'a syn::Path) {
        self.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }
    fn visit_macro(&mut self, mac: &'a syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// `segments` written in `module`, as an absolute module path (None when `super` climbs past the root).
fn absolute(module: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut base = module.to_vec();
    let mut rest = segments;
    if rest.first().is_some_and(|s| s == "crate") {
        base.clear();
        rest = &rest[1..];
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    Some([base, rest.to_vec()].concat())
}

/// File -> file edges of one target, with the names the first takes from the second.
fn edges(modules: &Modules) -> BTreeMap<(PathBuf, PathBuf), BTreeSet<String>> {
    let mut edges: BTreeMap<(PathBuf, PathBuf), BTreeSet<String>> = BTreeMap::new();
    for (file, (module, ast)) in &modules.parsed {
        let mut paths = Paths {
            module: module.clone(),
            found: Vec::new(),
        };
        paths.visit_file(ast);
        for (written_in, segments) in paths.found {
            let Some(target) = absolute(&written_in, &segments) else {
                continue;
            };
            let Some((to, name)) = modules.file_of(&target) else {
                continue;
            };
            if to != file {
                edges.entry((file.clone(), to.clone())).or_default().insert(name);
            }
        }
    }
    edges
}

/// Strongly connected groups of more than one file (Tarjan's algorithm, iterative over small graphs).
fn circles(edges: &BTreeMap<(PathBuf, PathBuf), BTreeSet<String>>) -> Vec<BTreeSet<PathBuf>> {
    let mut next: BTreeMap<&PathBuf, Vec<&PathBuf>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &PathBuf| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(at) = stack.pop() {
            for to in next.get(at).into_iter().flatten() {
                if seen.insert((*to).clone()) {
                    stack.push(to);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = next.keys().map(|f| (*f, reach(f))).collect();
    let mut groups: BTreeSet<BTreeSet<PathBuf>> = BTreeSet::new();
    for (file, reached) in &reachable {
        let group: BTreeSet<PathBuf> = reached
            .iter()
            .filter(|other| reachable.get(other).is_some_and(|back| back.contains(*file)))
            .cloned()
            .collect();
        if group.len() > 1 {
            groups.insert(group);
        }
    }
    groups.into_iter().collect()
}

fn relative(path: &Path) -> String {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workspace = workspace.canonicalize().expect("workspace dir");
    path.strip_prefix(&workspace)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_source_file_reaches_the_line_limit() {
    let mut long = BTreeSet::new();
    for target in targets() {
        for file in Modules::read(&target.root).parsed.keys() {
            let lines = std::fs::read_to_string(file).expect("read").lines().count();
            if lines >= MAX_FILE_LINES {
                long.insert(format!("{} ({lines} lines)", relative(file)));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files of {MAX_FILE_LINES} lines or more (split them by responsibility): {long:#?}"
    );
}

#[test]
fn no_files_of_a_crate_import_each_other_in_a_circle() {
    let mut found = Vec::new();
    let mut files_read = 0;
    for target in targets() {
        let modules = Modules::read(&target.root);
        files_read += modules.parsed.len();
        let edges = edges(&modules);
        for group in circles(&edges) {
            let mut ties = Vec::new();
            for ((from, to), names) in &edges {
                if group.contains(from) && group.contains(to) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    ties.push(format!(
                        "{} -> {}: {}",
                        relative(from),
                        relative(to),
                        names.join(", ")
                    ));
                }
            }
            found.push(format!("{}:\n    {}", target.name, ties.join("\n    ")));
        }
    }
    assert!(files_read > 200, "too few source files read: {files_read}");
    assert!(
        found.is_empty(),
        "module circles (move what both sides use into a module of its own):\n  {}",
        found.join("\n  ")
    );
}

/// The checks above see what they claim to: a circle and its names through `use`, `super::`, code and macros.
#[test]
fn the_circle_check_finds_a_planted_circle() {
    let dir = std::env::temp_dir().join(format!("source-rules-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).expect("mkdir");
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod c;\n#[cfg(test)]\nmod tests;\n");
    write(
        "a.rs",
        "mod inner;\npub fn f() { tracing::info!(\"{}\", crate::b::g()); }\n",
    );
    write("a/inner.rs", "pub fn h() { super::super::c::k() }\n");
    write(
        "b.rs",
        "pub fn g() -> u8 { 1 }\npub fn j() { crate::a::inner::h() }\n",
    );
    write("c.rs", "use crate::{b::g as gee, a};\npub(crate) fn k() {}\n");
    let modules = Modules::read(&dir.join("lib.rs"));
    let edges = edges(&modules);
    let found = circles(&edges);
    std::fs::remove_dir_all(&dir).expect("clean up");
    let names: Vec<BTreeSet<String>> = found
        .iter()
        .map(|g| {
            g.iter()
                .map(|f| f.file_name().expect("name").to_string_lossy().into_owned())
                .collect()
        })
        .collect();
    let expected: BTreeSet<String> = ["a.rs", "b.rs", "inner.rs", "c.rs"].map(String::from).into();
    assert_eq!(names, vec![expected], "edges: {edges:#?}");
    assert_eq!(modules.parsed.len(), 5, "the cfg(test) module is not read");
}
