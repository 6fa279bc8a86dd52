//! Every binary's command line, checked over `commands()`: a flag added to any binary is covered without being
//! named here.

use clap::{Command, CommandFactory, Parser};

use super::{ConfigMapRef, commands, doctor, lb_plan};

fn name(cmd: &Command) -> String {
    cmd.get_name().to_owned()
}

#[test]
fn every_command_is_well_formed() {
    for cmd in commands() {
        cmd.debug_assert();
    }
}

#[test]
fn every_boolean_flag_of_every_binary_takes_gos_forms() {
    let mut checked = 0;
    for cmd in commands() {
        let problems = ccm_controller_manager::bool_flag_problems(&cmd);
        assert!(problems.is_empty(), "{}: {problems:#?}", name(&cmd));
        checked += cmd
            .get_arguments()
            .filter(|a| a.get_value_parser().type_id() == std::any::TypeId::of::<bool>())
            .count();
    }
    // The runtime's 6 and its 13 compatibility booleans in each of the two managers, the AWS binary's 3
    // (tagging's included), lb-plan's 1 and doctor's 3: the check saw them all (it finds them by type).
    assert!(
        checked >= 2 * (6 + 13) + 3 + 1 + 3,
        "only {checked} boolean flags found"
    );
}

#[test]
fn the_flags_the_issue_named_take_true_and_false() {
    use super::aws_ccm::Cli;
    let base = ["aws-cloud-controller-manager", "--cloud-provider=aws"];
    for (flag, want) in [
        ("--allow-load-balancer-recreation=true", true),
        ("--allow-load-balancer-recreation=false", false),
        ("--allow-load-balancer-recreation", true),
    ] {
        let cli = Cli::try_parse_from(base.iter().copied().chain([flag])).unwrap();
        assert_eq!(cli.allow_load_balancer_recreation, want, "{flag}");
    }
    let cli = Cli::try_parse_from(
        base.iter()
            .copied()
            .chain(["--tagging-controller-enable-batching=0"]),
    );
    assert!(!cli.unwrap().tagging.enable_batching);
    let cli =
        doctor::Cli::try_parse_from(["doctor", "--cloud-config=", "--json=false", "--delete=true"]).unwrap();
    assert!(!cli.json && cli.delete);
}

/// `--help` is plain text: no Markdown code spans (they print as backticks), not even from a library's doc
/// comment on a flattened struct.
#[test]
fn no_help_prints_markdown() {
    for mut cmd in commands() {
        let help = cmd.render_long_help().to_string();
        assert!(!help.contains('`'), "{}:\n{help}", name(&cmd));
        let short = cmd.render_help().to_string();
        assert!(!short.contains('`'), "{}:\n{short}", name(&cmd));
        for arg in cmd.get_arguments() {
            for help in [arg.get_help(), arg.get_long_help()].into_iter().flatten() {
                let text = help.to_string();
                assert!(
                    !text.contains('`') && !text.contains("]("),
                    "{} --{}: {text}",
                    name(&cmd),
                    arg.get_long().unwrap_or_default()
                );
            }
        }
    }
}

#[test]
fn dry_run_is_a_generic_flag_and_kubeconfig_says_the_order_used() {
    for cmd in commands() {
        for arg in cmd.get_arguments() {
            let long = arg.get_long().unwrap_or_default();
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            if long == "dry-run" {
                assert_eq!(arg.get_help_heading(), Some("Generic"), "{}", name(&cmd));
            }
            // kube's `Config::infer`, which every binary uses without --kubeconfig: the kubeconfig file first.
            if long == "kubeconfig" {
                let file = help.find("~/.kube/config").unwrap_or(usize::MAX);
                let in_cluster = help.find("in-cluster").unwrap_or(0);
                assert!(file < in_cluster, "{}: {help}", name(&cmd));
            }
        }
    }
}

#[test]
fn lb_plan_takes_a_service_by_name_or_a_file_and_a_cloud_config() {
    let cli = lb_plan::Cli::try_parse_from(["lb-plan", "default/web", "--cloud-config=c.conf"]).unwrap();
    assert_eq!(cli.service.as_deref(), Some("default/web"));
    let cli = lb_plan::Cli::try_parse_from([
        "lb-plan",
        "-f",
        "web.yaml",
        "--cloud-config-configmap=kube-system/ccm-cloud-config",
    ])
    .unwrap();
    assert_eq!(cli.filename.as_deref(), Some("web.yaml"));
    assert_eq!(
        cli.cloud_config_configmap,
        Some(ConfigMapRef {
            namespace: "kube-system".into(),
            name: "ccm-cloud-config".into()
        })
    );
    // The README's form keeps working.
    let cli = lb_plan::Cli::try_parse_from(["lb-plan", "--service=web.json", "--cloud-config=c"]).unwrap();
    assert_eq!(cli.filename.as_deref(), Some("web.json"));
    for (args, words) in [
        (&["lb-plan", "--cloud-config=c"][..], "NAMESPACE/NAME"),
        (&["lb-plan", "a/b"][..], "--cloud-config"),
        (
            &["lb-plan", "a/b", "-f", "x", "--cloud-config=c"][..],
            "cannot be used",
        ),
        (
            &["lb-plan", "a/b", "--cloud-config-configmap=nope"][..],
            "NAMESPACE/NAME",
        ),
    ] {
        let err = lb_plan::Cli::try_parse_from(args).unwrap_err().to_string();
        assert!(err.contains(words), "{args:?}: {err}");
    }
}

#[test]
fn configmap_references() {
    assert!(ConfigMapRef::parse("kube-system/x").is_ok());
    for bad in ["x", "/x", "x/", "a/b/c"] {
        assert!(
            ConfigMapRef::parse(bad).unwrap_err().contains("NAMESPACE/NAME"),
            "{bad}"
        );
    }
    assert_eq!(doctor::Cli::command().get_name(), "doctor");
}
