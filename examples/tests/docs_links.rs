//! The documentation holds together: every relative link in `docs/*.md` and `README.md` points to an existing
//! file (and, for `#anchor`s into Markdown, to an existing heading, with GitHub's anchor rules); code fences are
//! closed; `yaml` and `json` blocks parse.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// GitHub's heading anchor: lower case, punctuation other than `-` and `_` dropped, spaces become `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A fenced code block: info string, body, line of the opening fence.
type Block = (String, String, usize);

/// The lines outside fenced code blocks, the fenced blocks, and whether the last fence is left open.
fn split(text: &str) -> (Vec<&str>, Vec<Block>, bool) {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new(), i + 1)),
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some((_, body, _)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => prose.push(line),
        }
    }
    let unclosed = open.is_some();
    (prose, blocks, unclosed)
}

fn anchors_of(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let (prose, _, _) = split(&text);
    let mut seen = BTreeSet::new();
    for line in prose {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = anchor(heading);
        let mut a = base.clone();
        let mut n = 0;
        while seen.contains(&a) {
            n += 1;
            a = format!("{base}-{n}");
        }
        seen.insert(a);
    }
    seen
}

/// `](target)` link targets in a line of prose (inline code spans removed first).
fn link_targets(line: &str) -> Vec<String> {
    let mut clean = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            clean.push_str(part);
        }
    }
    clean
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &clean[i + 2..];
            rest.find(')').map(|end| rest[..end].trim().to_owned())
        })
        .collect()
}

#[test]
fn relative_links_resolve() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let (prose, _, _) = split(&text);
        for (n, line) in prose.iter().enumerate() {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, frag) = target.split_once('#').unwrap_or((&target, ""));
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let here = format!(
                    "{}: `{target}` (prose line {})",
                    file.strip_prefix(repo()).unwrap().display(),
                    n + 1
                );
                if !dest.exists() {
                    broken.push(format!("{here}: no such file"));
                    continue;
                }
                if !frag.is_empty()
                    && dest.extension().is_some_and(|e| e == "md")
                    && !anchors_of(&dest).contains(frag)
                {
                    broken.push(format!("{here}: no heading with anchor #{frag}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 50,
        "only {checked} relative links found: is the scanner broken?"
    );
}

#[test]
fn code_blocks_are_closed_and_yaml_and_json_parse() {
    let mut bad = Vec::new();
    for file in markdown_files() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let (_, blocks, unclosed) = split(&text);
        if unclosed {
            bad.push(format!("{name}: a code fence is not closed"));
        }
        for (info, body, line) in blocks {
            let result = match info.split_whitespace().next().unwrap_or("") {
                "yaml" | "yml" => serde_saphyr::from_multiple::<serde_json::Value>(&body)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                "json" => serde_json::from_str::<serde_json::Value>(&body)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                _ => Ok(()),
            };
            if let Err(e) = result {
                bad.push(format!("{name}: {info} block at line {line}: {e}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_helpers_follow_github() {
    assert_eq!(
        anchor(" Differences from `kubernetes/cloud-provider-aws`"),
        "differences-from-kubernetescloud-provider-aws"
    );
    assert_eq!(
        anchor(" Nodes (the ECR credential provider): `deploy/iam/node.json`"),
        "nodes-the-ecr-credential-provider-deployiamnodejson"
    );
    assert_eq!(
        link_targets("see [a](b.md#c) and `[x](y)` and [d](e/)"),
        ["b.md#c", "e/"]
    );
    let (prose, blocks, unclosed) = split("a\n```yaml\nk: v\n```\nb\n");
    assert_eq!(prose, ["a", "b"]);
    assert_eq!(blocks, [("yaml".to_owned(), "k: v\n".to_owned(), 2)]);
    assert!(!unclosed);
}
