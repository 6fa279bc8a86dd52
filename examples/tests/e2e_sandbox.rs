//! End to end: the README's main command's program, `sandbox`, initializes its nodes with the CCM binary and
//! prints them before and after, with its peak memory.

use std::process::Command;

#[test]
fn e2e_sandbox_shows_the_nodes_initialized() {
    ccm_testing::TestEnv::get();
    let output = Command::new(env!("CARGO_BIN_EXE_sandbox"))
        .output()
        .expect("run sandbox");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let (before, after) = stdout
        .split_once("\nafter (")
        .expect("a before and an after section");
    assert_eq!(before.matches("uninitialized").count(), 4, "{stdout}");
    assert_eq!(
        after.matches("providerID=aws:///us-east-1a/i-").count(),
        4,
        "{stdout}"
    );
    assert!(!after.contains("uninitialized"), "{stdout}");
    assert!(
        stdout.contains("aws-cloud-controller-manager memory: peak "),
        "{stdout}"
    );
    assert!(
        stdout.contains("aws-cloud-controller-manager stopped (exit status: 0)"),
        "{stdout}"
    );
}
