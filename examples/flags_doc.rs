//! The generated parts of docs/flags.md, docs/lb-plan.md and docs/doctor.md: the flag tables, rendered from the
//! binaries' command lines ([`crate::cli`]) between `<!-- generated: flags NAME ... -->` and
//! `<!-- end generated: flags NAME -->`. The prose around them is written by hand; a test fails when a table
//! differs from the flags, and `UPDATE_DOCS=1 cargo test -p ccm-examples --lib docs_flags_are_current` rewrites
//! them.

use clap::{Arg, Args, Command, CommandFactory};

use ccm_controller_manager::{CompatOptions, Options};

use crate::cli::{aws_ccm, doctor, lb_plan};

/// The command that rewrites the tables, as the markers and the test's failure say it.
pub const REGENERATE: &str = "UPDATE_DOCS=1 cargo test -p ccm-examples --lib docs_flags_are_current";

/// The files with generated tables, relative to docs/.
pub const FILES: [&str; 3] = ["flags.md", "lb-plan.md", "doctor.md"];

/// Each region's name and its Markdown.
pub fn regions() -> Vec<(&'static str, String)> {
    let runtime = Options::augment_args(Command::new("runtime"));
    let compat: Vec<String> = CompatOptions::names()
        .iter()
        .map(|n| format!("`--{n}`"))
        .collect();
    let runtime_ids: Vec<&str> = runtime.get_arguments().map(|a| a.get_id().as_str()).collect();
    let aws = aws_ccm::Cli::command();
    let aws_own = aws.get_arguments().filter(|a| {
        let id = a.get_id().as_str();
        !runtime_ids.contains(&id) && !id.starts_with("tagging_")
    });
    let compat_heading = "Accepted for compatibility (no effect)";
    let runtime_args = runtime
        .get_arguments()
        .filter(|a| a.get_help_heading() != Some(compat_heading));
    vec![
        ("runtime", by_heading(runtime_args)),
        ("aws-cloud-controller-manager", table(aws_own)),
        ("compatibility", format!("{}.\n", compat.join(", "))),
        ("lb-plan", table(lb_plan::Cli::command().get_arguments())),
        ("doctor", table(doctor::Cli::command().get_arguments())),
    ]
}

/// One table per help heading, in the order the headings first appear.
fn by_heading<'a>(args: impl Iterator<Item = &'a Arg>) -> String {
    let args: Vec<&Arg> = args.collect();
    let mut headings: Vec<&str> = Vec::new();
    for arg in &args {
        let heading = arg.get_help_heading().unwrap_or("Other");
        if !headings.contains(&heading) {
            headings.push(heading);
        }
    }
    let mut out = String::new();
    for heading in headings {
        let group = args
            .iter()
            .copied()
            .filter(|a| a.get_help_heading().unwrap_or("Other") == heading);
        out.push_str(&format!("### {heading}\n\n{}\n", table(group)));
    }
    out.pop();
    out
}

/// `| Flag | Default | Description |`, one row per shown flag.
fn table<'a>(args: impl Iterator<Item = &'a Arg>) -> String {
    let mut out = String::from("| Flag | Default | Description |\n|---|---|---|\n");
    for arg in args.filter(|a| !a.is_hide_set()) {
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(s), Some(l)) if l.len() == 1 => format!("`-{s}`, `--{l}`"),
            (Some(s), Some(l)) => format!("`--{l}`, `-{s}`"),
            (None, Some(l)) => format!("`--{l}`"),
            _ => {
                let names = arg.get_value_names().unwrap_or_default();
                let names: Vec<String> = names.iter().map(ToString::to_string).collect();
                format!("`{}` (argument)", names.join(" "))
            }
        };
        let aliases = arg.get_visible_aliases().unwrap_or_default();
        let flag = aliases
            .iter()
            .fold(flag, |flag, alias| format!("{flag}, `--{alias}`"));
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let default = match &defaults[..] {
            [] => String::new(),
            [one] if one.is_empty() => "`\"\"`".to_owned(),
            _ => format!("`{}`", defaults.join(",")),
        };
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        out.push_str(&format!("| {flag} | {default} | {} |\n", markdown(&help)));
    }
    out
}

/// The plain-text help as Markdown on one line: flags as code, docs/<page>.md as links, Markdown's special
/// characters escaped.
pub fn markdown(help: &str) -> String {
    let words: Vec<String> = help.split_whitespace().map(word).collect();
    words.join(" ")
}

fn word(w: &str) -> String {
    let start = w.find(|c: char| c != '(').unwrap_or(w.len());
    let end = w.trim_end_matches([')', ',', '.', ';', ':']).len().max(start);
    let (open, core, close) = (&w[..start], &w[start..end], &w[end..]);
    let core = if core.len() > 2 && core.starts_with("--") {
        format!("`{core}`")
    } else if let Some(page) = core.strip_prefix("docs/").filter(|p| p.ends_with(".md")) {
        format!("[{page}]({page})")
    } else {
        core.chars().fold(String::new(), |mut out, c| {
            match c {
                '*' | '|' | '_' | '[' | ']' | '\\' | '`' => out.extend(['\\', c]),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                _ => out.push(c),
            }
            out
        })
    };
    format!("{open}{core}{close}")
}

/// `text` with every region replaced by its rendering; an error names a region without its markers.
pub fn render_file(text: &str, regions: &[(&str, String)]) -> Result<String, String> {
    let mut out = text.to_owned();
    for (name, body) in regions {
        let begin = format!("<!-- generated: flags {name} ");
        let end = format!("<!-- end generated: flags {name} -->");
        let (Some(b), Some(e)) = (out.find(&begin), out.find(&end)) else {
            continue;
        };
        let body_start = out[b..]
            .find("-->\n")
            .map(|i| b + i + 4)
            .ok_or(format!("{begin}: unterminated"))?;
        if body_start > e {
            return Err(format!("{begin} ends after {end}"));
        }
        out.replace_range(body_start..e, &format!("\n{body}\n"));
    }
    Ok(out)
}

/// The opening marker of a region, as written in the docs.
pub fn begin_marker(name: &str) -> String {
    format!(
        "<!-- generated: flags {name} from the binaries' flag definitions (examples/cli); do not edit. Regenerate with: {REGENERATE} -->"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_flags_are_current() {
        let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs");
        let regions = regions();
        let mut seen = Vec::new();
        for file in FILES {
            let path = format!("{docs}/{file}");
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            let rendered = render_file(&committed, &regions).unwrap_or_else(|e| panic!("{path}: {e}"));
            seen.extend(
                regions
                    .iter()
                    .filter(|(n, _)| committed.contains(&begin_marker(n)))
                    .map(|(n, _)| *n),
            );
            if std::env::var_os("UPDATE_DOCS").is_some() {
                std::fs::write(&path, &rendered).unwrap_or_else(|e| panic!("writing {path}: {e}"));
                continue;
            }
            assert!(
                committed == rendered,
                "docs/{file} is stale: its flag tables must be the rendering of the flag definitions. Regenerate \
                 them with `{REGENERATE}` and commit them"
            );
        }
        for (name, _) in &regions {
            assert_eq!(
                seen.iter().filter(|n| *n == name).count(),
                1,
                "the region {name} must be in exactly one of {FILES:?}, opened by: {}",
                begin_marker(name)
            );
        }
    }

    #[test]
    fn help_becomes_markdown() {
        assert_eq!(
            markdown("Needs --leader-elect (docs/routes.md). '*' enables all, <id>"),
            "Needs `--leader-elect` ([routes.md](routes.md)). '\\*' enables all, &lt;id&gt;"
        );
        assert_eq!(
            markdown("(AWS: tagging, off: --controllers=*,tagging)."),
            "(AWS: tagging, off: `--controllers=*,tagging`)."
        );
    }

    #[test]
    fn a_stale_table_is_replaced_and_text_around_it_kept() {
        let regions = [("x", "| new |".to_owned())];
        let text = format!(
            "a\n{}\n| old |\n<!-- end generated: flags x -->\nb\n",
            begin_marker("x")
        );
        let out = render_file(&text, &regions).unwrap();
        assert_eq!(
            out,
            format!(
                "a\n{}\n\n| new |\n<!-- end generated: flags x -->\nb\n",
                begin_marker("x")
            )
        );
    }
}
