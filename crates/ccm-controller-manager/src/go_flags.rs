//! What Go's command line does before flags are parsed: `_` in flag names read as `-` (component-base's
//! `WordSepNormalizeFunc`, so `--leader_elect=false` works) and `--version` in Kubernetes' form (`verflag`); and
//! the check that every boolean flag of a command takes pflag's forms.

use std::{any::TypeId, ffi::OsString};

use clap::{ArgAction, Command, builder::Resettable};

/// Go's `strconv.ParseBool`, which boolean flags use: `--flag`, `--flag=true|false|1|0|t|f|T|F|TRUE|FALSE|True|False`.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!(
            "{s:?} is not a boolean (accepted: true, false, 1, 0, t, f)"
        )),
    }
}

/// What is wrong with the boolean flags of `cmd`: each must take pflag's forms, `--x` and `--x=true` (true),
/// `--x=false` (false), and the other values of Go's `strconv.ParseBool` (`1`, `F`, ...), and refuse anything
/// else. A plain clap `bool` (`ArgAction::SetTrue`) refuses `--x=true`, which Go's manifests pass. Each flag is
/// parsed alone (its `required`, `requires` and conflicts dropped), so that every one is checked whatever the
/// others need. Empty when every boolean flag is right; call it from a test of each binary's `Command`, so that
/// a new flag is checked without naming it. Declare a boolean flag as [`crate::Options`] does:
/// `action = ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true",
/// value_parser = parse_go_bool`.
pub fn bool_flag_problems(cmd: &Command) -> Vec<String> {
    let mut problems = Vec::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let is_bool = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse)
            || arg.get_value_parser().type_id() == TypeId::of::<bool>();
        if !is_bool {
            continue;
        }
        let alone = Command::new("check").no_binary_name(true).arg(
            arg.clone()
                .required(false)
                .requires(Resettable::Reset)
                .conflicts_with(Resettable::Reset)
                .overrides_with(Resettable::Reset)
                .group(Resettable::Reset),
        );
        let id = arg.get_id().as_str();
        for (form, want) in [
            (format!("--{long}"), true),
            (format!("--{long}=true"), true),
            (format!("--{long}=false"), false),
            (format!("--{long}=1"), true),
            (format!("--{long}=F"), false),
        ] {
            match alone.clone().try_get_matches_from([&form]) {
                Ok(m) => match m.try_get_one::<bool>(id) {
                    Ok(Some(&got)) if got == want => {}
                    got => problems.push(format!("{form}: read as {got:?}, not {want}")),
                },
                Err(e) => problems.push(format!("{form}: refused: {}", e.kind())),
            }
        }
        // As Go: `--x false` is the flag and an argument, and a value ParseBool refuses is an error.
        for bad in [
            vec![format!("--{long}=maybe")],
            vec![format!("--{long}"), "false".to_owned()],
        ] {
            if alone.clone().try_get_matches_from(&bad).is_ok() {
                problems.push(format!("{}: accepted", bad.join(" ")));
            }
        }
    }
    problems
}

/// The arguments with `_` replaced by `-` in every long flag name (`--cloud_config=/x_y` becomes
/// `--cloud-config=/x_y`; values and positional arguments are kept). Call it on the program's arguments before
/// parsing them.
pub fn normalize_flag_names<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut after_terminator = false;
    args.into_iter()
        .map(Into::into)
        .map(|arg| {
            let Some(text) = arg.to_str() else {
                return arg;
            };
            if after_terminator || !text.starts_with("--") || text == "--" {
                after_terminator |= text == "--";
                return arg;
            }
            let (name, value) = text.split_at(text.find('=').unwrap_or(text.len()));
            OsString::from(format!("{}{value}", name.replace('_', "-")))
        })
        .collect()
}

/// What `--version` asks for, Kubernetes style: `--version` or `--version=true` print `<program> v<version>`
/// (the program's file name from the first argument; Go's binaries print `Kubernetes v<release>`, which here would
/// claim a Kubernetes release this version is not), `--version=raw` the version information as Go prints
/// `version.Info`; `--version=false` (or no flag) nothing. `Err` names a value `--version` does not take.
pub fn version_request<I, T>(args: I, version: &str) -> Result<Option<String>, String>
where
    I: IntoIterator<Item = T>,
    T: AsRef<std::ffi::OsStr>,
{
    let mut out = Ok(None);
    let mut program = None;
    for arg in args {
        let program = program.get_or_insert_with(|| {
            std::path::Path::new(arg.as_ref()).file_name().map_or_else(
                || "cloud-controller-manager".into(),
                |n| n.to_string_lossy().into_owned(),
            )
        });
        let Some(text) = arg.as_ref().to_str() else {
            continue;
        };
        if text == "--" {
            break;
        }
        let value = match text.strip_prefix("--version") {
            Some("") => "true",
            Some(v) if v.starts_with('=') => &v[1..],
            _ => continue,
        };
        // As a repeated Go flag, the last one wins.
        out = match value {
            "true" | "1" | "t" | "T" | "TRUE" | "True" => Ok(Some(format!("{program} v{version}"))),
            "raw" => Ok(Some(raw_version(version))),
            "false" | "0" | "f" | "F" | "FALSE" | "False" => Ok(None),
            other => Err(format!(
                "invalid argument {other:?} for \"--version\" flag (accepted: true, false, raw)"
            )),
        };
    }
    out
}

fn raw_version(version: &str) -> String {
    let mut parts = version.split('.');
    let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    format!(
        "version.Info{{Major:\"{major}\", Minor:\"{minor}\", GitVersion:\"v{version}\", GitCommit:\"\", \
         GitTreeState:\"\", BuildDate:\"\", GoVersion:\"\", Compiler:\"rustc\", Platform:\"{}/{}\"}}",
        std::env::consts::OS,
        match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_clap_bool_is_a_problem_and_a_go_bool_is_not() {
        use clap::Arg;
        let plain = Command::new("t").arg(Arg::new("json").long("json").action(ArgAction::SetTrue));
        let problems = bool_flag_problems(&plain);
        assert!(
            problems.iter().any(|p| p.starts_with("--json=true: refused")),
            "{problems:?}"
        );
        let go = Command::new("t").arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true")
                .default_value("false")
                .value_parser(parse_go_bool),
        );
        assert_eq!(bool_flag_problems(&go), Vec::<String>::new());
        // clap's own bool parser knows neither 1 nor F.
        let clap_bool = Command::new("t").arg(
            Arg::new("json")
                .long("json")
                .action(ArgAction::Set)
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true"),
        );
        let clap_bool = clap_bool.mut_arg("json", |a| a.value_parser(clap::value_parser!(bool)));
        let problems = bool_flag_problems(&clap_bool);
        assert!(
            problems.iter().any(|p| p.starts_with("--json=1: refused")),
            "{problems:?}"
        );
    }

    #[test]
    fn underscores_in_flag_names_become_dashes() {
        let out = normalize_flag_names([
            "--leader_elect=false",
            "--cloud_config",
            "/etc/my_dir/cloud.conf",
            "-v=2",
            "--cluster-name=my_cluster",
            "--",
            "--not_a_flag",
        ]);
        assert_eq!(
            out,
            [
                "--leader-elect=false",
                "--cloud-config",
                "/etc/my_dir/cloud.conf",
                "-v=2",
                "--cluster-name=my_cluster",
                "--",
                "--not_a_flag",
            ]
        );
    }

    #[test]
    fn version_in_kubernetes_style() {
        assert_eq!(
            version_request(["ccm", "--version"], "1.2.3"),
            Ok(Some("ccm v1.2.3".to_owned()))
        );
        assert_eq!(
            version_request(
                ["/usr/bin/aws-cloud-controller-manager", "--version=true"],
                "1.2.3"
            ),
            Ok(Some("aws-cloud-controller-manager v1.2.3".to_owned()))
        );
        assert_eq!(version_request(["--version=false"], "1.2.3"), Ok(None));
        assert_eq!(version_request(["--v=2"], "1.2.3"), Ok(None));
        let raw = version_request(["--version=raw"], "1.2.3").unwrap().unwrap();
        assert!(
            raw.starts_with("version.Info{Major:\"1\", Minor:\"2\", GitVersion:\"v1.2.3\""),
            "{raw}"
        );
        assert!(
            version_request(["--version=yes"], "1.2.3")
                .unwrap_err()
                .contains("raw")
        );
    }
}
