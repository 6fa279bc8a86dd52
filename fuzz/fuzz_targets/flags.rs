//! Command lines of the controller manager: Go-style names (`--leader_elect`, `-v`), every flag of `Options` with
//! arbitrary values, `--version` forms and raw arguments → `version_request`, `normalize_flag_names`,
//! `Options::try_parse_from` and `Options::validate`. Must never panic; a refusal is a clap error or an
//! `OptionsError` naming the flag.
#![no_main]

use std::sync::OnceLock;

use ccm_controller_manager::{Options, normalize_flag_names, version_request};
use clap::Args;
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Arg {
    /// A flag of `Options` (by index), its value attached (`--x=v`), separate (`--x v`) or absent.
    Known {
        flag: u16,
        value: Option<String>,
        separate: bool,
        go_style: bool,
    },
    Version(Option<String>),
    Raw(String),
}

/// Every long flag name of `Options`, from its clap definition.
fn names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        Options::augment_args(clap::Command::new("fuzz"))
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect()
    })
}

fn push(args: &mut Vec<String>, arg: Arg) {
    match arg {
        Arg::Known {
            flag,
            value,
            separate,
            go_style,
        } => {
            let names = names();
            let mut name = names[usize::from(flag) % names.len()].clone();
            if go_style {
                name = name.replace('-', "_");
            }
            match value {
                Some(v) if separate => args.extend([format!("--{name}"), v]),
                Some(v) => args.push(format!("--{name}={v}")),
                None => args.push(format!("--{name}")),
            }
        }
        Arg::Version(Some(v)) => args.push(format!("--version={v}")),
        Arg::Version(None) => args.push("--version".to_owned()),
        Arg::Raw(raw) => args.push(raw),
    }
}

fuzz_target!(|input: Vec<Arg>| {
    let mut args = Vec::new();
    for arg in input.into_iter().take(16) {
        push(&mut args, arg);
    }
    if let Err(message) = version_request(&args, "1.33.0") {
        assert!(message.contains("--version"), "{args:?}: {message}");
    }
    let normalized = normalize_flag_names(&args);
    assert_eq!(normalized.len(), args.len());
    if let Ok(options) = Options::try_parse_from(normalized) {
        if let Err(error) = options.validate() {
            assert!(!error.to_string().is_empty(), "{args:?}");
        }
        let _ = options.ignored_flags();
    }
});
