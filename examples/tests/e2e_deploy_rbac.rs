//! End to end: the RBAC of `deploy/kustomize/base` is enough, and is what is used. The ClusterRoles and bindings
//! rendered by `kubectl kustomize` are applied to the real kube-apiserver; the `aws-cloud-controller-manager`
//! binary runs as the ServiceAccount `kube-system/cloud-controller-manager` (a token from the TokenRequest API,
//! nothing else) with the base's `--use-service-account-credentials=true`, so every controller acts as its own
//! account bound only to its own ClusterRole. The cloud-node, cloud-node-lifecycle and tagging controllers do
//! their work, and nothing in the log is forbidden. (The service and route controllers need load-balancer and
//! route-table fixtures: their RBAC is checked by the dry run and rule comparison of deploy_manifests.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::{path::Path, process::Command};

use ccm_testing::TestEnv;
use common::{Ccm, World, eventually, initialized, label};
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::{
    Api,
    api::{DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams},
    discovery,
};
use serde_json::Value;

const CHECKSUM_LABEL: &str = "k8s.io/cloud-provider-aws";

fn kustomize_base() -> Vec<Value> {
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".to_owned());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kustomize/base");
    let out = Command::new(&kubectl).arg("kustomize").arg(&dir).output().unwrap_or_else(|e| {
        panic!("cannot run `{kubectl} kustomize`: {e}; install Debian's kubernetes-client (scripts/setup.sh does)")
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_saphyr::from_multiple::<Value>(&String::from_utf8(out.stdout).unwrap())
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// Applies the base's RBAC objects and ServiceAccount for real (server-side apply; idempotent).
async fn apply_rbac(client: &kube::Client) {
    for obj in kustomize_base() {
        let kind = obj["kind"].as_str().unwrap();
        if !matches!(
            kind,
            "ClusterRole" | "ClusterRoleBinding" | "RoleBinding" | "ServiceAccount"
        ) {
            continue;
        }
        let (group, version) = obj["apiVersion"]
            .as_str()
            .unwrap()
            .split_once('/')
            .unwrap_or(("", "v1"));
        let (ar, caps) = discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .unwrap();
        let api: Api<DynamicObject> = match caps.scope {
            discovery::Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj["metadata"]["namespace"].as_str().unwrap(),
                &ar,
            ),
            discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        let name = obj["metadata"]["name"].as_str().unwrap();
        api.patch(
            name,
            &PatchParams::apply("e2e-deploy-rbac").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"));
    }
}

/// A kubeconfig that authenticates as `kube-system/cloud-controller-manager` only.
async fn service_account_kubeconfig(client: &kube::Client, world: &World) -> std::path::PathBuf {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "kube-system");
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = sas
        .create_token_request("cloud-controller-manager", &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let server = &TestEnv::get().kube_apiserver;
    let path = world.dir.join("ccm-sa.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    \
             insecure-skip-tls-verify: true\nusers:\n- name: ccm\n  user:\n    token: {token}\ncontexts:\n- name: \
             e2e\n  context:\n    cluster: e2e\n    user: ccm\ncurrent-context: e2e\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test]
async fn e2e_deploy_rbac_is_enough_for_the_controllers() {
    let admin = TestEnv::get().kube_client().await.unwrap();
    apply_rbac(&admin).await;
    let world = World::new("").await;
    let kubeconfig = service_account_kubeconfig(&admin, &world).await;
    // The CCM's credentials are really restricted: reading Secrets is forbidden to them.
    let restricted = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::all(restricted);
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("the service account's token must not read Secrets: {other:?}"),
    }
    let launched = world.launch(2).await;
    let names = [launched[0].private_dns.clone(), launched[1].id.clone()];
    for name in &names {
        world.register_node(name, None).await;
    }
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let tags = format!("--tags=e2e-rbac={}", world.cluster_id);
    let mut ccm = Ccm::start(
        &world,
        &[
            // The later --kubeconfig wins (pflag semantics).
            kubeconfig_flag.as_str(),
            "--use-service-account-credentials=true",
            "--configure-cloud-routes=false",
            "--controllers=*,tagging",
            tags.as_str(),
            "--resources=instance",
        ],
    );

    let nodes = world.nodes.clone();
    eventually(&mut ccm, "both nodes initialized and tagged", 90, async || {
        let mut all = true;
        for name in &names {
            all &= nodes
                .get(name)
                .await
                .is_ok_and(|n| initialized(&n) && label(&n, CHECKSUM_LABEL).is_some());
        }
        all
    })
    .await;
    let described = world
        .raw
        .describe_instances()
        .instance_ids(&launched[0].id)
        .send()
        .await
        .unwrap();
    let instance_tags = described.reservations()[0].instances()[0].tags();
    assert!(
        instance_tags
            .iter()
            .any(|t| t.key() == Some("e2e-rbac") && t.value() == Some(world.cluster_id.as_str())),
        "the tagging controller tagged the instance: {instance_tags:?}"
    );

    // The node-lifecycle controller (account node-controller) deletes the Node of a terminated instance.
    world.set_ready(&names[1], "False").await;
    world
        .raw
        .terminate_instances()
        .instance_ids(&launched[1].id)
        .send()
        .await
        .unwrap();
    eventually(
        &mut ccm,
        "the terminated instance's node deleted",
        60,
        async || nodes.get_opt(&names[1]).await.unwrap().is_none(),
    )
    .await;

    let status = ccm.terminate().await;
    let log = ccm.log_text();
    assert!(status.success(), "{status}\n{log}");
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "something was forbidden to the deployed RBAC:\n{log}"
    );
    world.cleanup().await;
}
