//! End to end: the sandbox binary, run as a process against the shared environment, reports the apiserver's
//! version, its namespaces and moto.

use std::process::Command;

use ccm_testing::TestEnv;

#[test]
fn e2e_testenv_smoke_reports_what_it_reached() {
    let env = TestEnv::get();
    let output = Command::new(env!("CARGO_BIN_EXE_testenv-smoke"))
        .output()
        .expect("run testenv-smoke");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(stdout.contains("kube-apiserver v1.20.2"), "{stdout}");
    assert!(stdout.contains(&env.kube_apiserver), "{stdout}");
    assert!(
        stdout.contains("kube-system"),
        "the apiserver's own namespaces are listed: {stdout}"
    );
    assert!(
        stdout.contains(&format!("moto (AWS emulator) at {}", env.aws_endpoint)),
        "{stdout}"
    );
}

#[test]
fn e2e_testenv_smoke_fails_clearly_without_an_environment() {
    let output = Command::new(env!("CARGO_BIN_EXE_testenv-smoke"))
        .env_remove("CCM_TEST_KUBECONFIG")
        .output()
        .expect("run testenv-smoke");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CCM_TEST_KUBECONFIG is not set"), "{stderr}");
}
