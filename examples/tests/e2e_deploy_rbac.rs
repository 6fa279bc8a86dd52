//! End to end: the RBAC of `deploy/kustomize/base` is enough, and is what is used. The Roles, ClusterRoles and
//! bindings rendered by `kubectl kustomize` are applied to the real kube-apiserver; the
//! `aws-cloud-controller-manager` binary runs as the ServiceAccount `kube-system/cloud-controller-manager` (a
//! token from the TokenRequest API, nothing else) with the base's `--use-service-account-credentials=true`, so
//! every controller acts as its own account bound only to its own ClusterRole, and the manager takes the Lease
//! `kube-system/cloud-controller-manager` through the name-limited leader-election Role (a Lease of another name,
//! or in another namespace, is denied). Then the same with the Helm chart's RBAC as the chart renders it (one
//! ClusterRole from `clusterRoleRules`, one account, its own lease Role) under test names. The cloud-node,
//! cloud-node-lifecycle, route, service and tagging controllers do their work, and nothing in the log is
//! forbidden.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;
mod support;

use std::{path::Path, process::Command};
use support::helm;

use ccm_testing::TestEnv;
use common::{
    Ccm, World, eventually, initialized, label,
    lb::{public_subnet, service},
};
use k8s_openapi::api::core::v1::Service;
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
    let objects: Vec<Value> = kustomize_base()
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" | "ServiceAccount")
            )
        })
        .collect();
    apply(client, &objects).await;
}

async fn apply(client: &kube::Client, objects: &[Value]) {
    for obj in objects {
        let kind = obj["kind"].as_str().unwrap();
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

/// The Helm chart's RBAC as the chart renders it (ServiceAccount, ClusterRole from `clusterRoleRules`, the lease
/// Role, bindings), under test names so that it cannot be confused with the kustomize objects.
async fn apply_helm_rbac(client: &kube::Client) {
    let values = helm::values_file(
        "e2e-helm-rbac",
        &serde_json::json!({
            "serviceAccountName": HELM_ACCOUNT,
            "clusterRoleName": HELM_ROLE,
            "roleBindingName": "e2e-helm:apiserver-authentication-reader",
            "leaderElection": {"namespace": "kube-system", "leaseNames": [HELM_LEASE], "roleName": "e2e-helm:leader-election"},
        }),
    );
    let (objects, _) = helm::template(&[&values]).unwrap();
    let rbac: Vec<Value> = objects
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding" | "ServiceAccount")
            )
        })
        .collect();
    assert_eq!(
        rbac.len(),
        6,
        "ServiceAccount, ClusterRole and its binding, lease Role and its binding, reader binding: {rbac:?}"
    );
    apply(client, &rbac).await;
}

const HELM_ACCOUNT: &str = "e2e-helm-cloud-controller-manager";
const HELM_ROLE: &str = "e2e-helm:cloud-controller-manager";
const HELM_LEASE: &str = "e2e-helm-cloud-controller-manager";
/// The Lease name the kustomize base's Role allows (the binary's default).
const BASE_LEASE: &str = "cloud-controller-manager";

/// Whether `kube-system/<account>` may `verb` the Lease `namespace/name`, as the apiserver decides.
async fn may(client: &kube::Client, account: &str, verb: &str, namespace: &str, name: &str) -> bool {
    may_on(
        client,
        account,
        ("coordination.k8s.io", "leases"),
        verb,
        namespace,
        name,
    )
    .await
}

/// Whether `kube-system/<account>` may `verb` the object `namespace/name` of `(group, resource)`.
async fn may_on(
    client: &kube::Client,
    account: &str,
    (group, resource): (&str, &str),
    verb: &str,
    namespace: &str,
    name: &str,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:kube-system:{account}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:kube-system".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    api.create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

/// The leader-election Role grants exactly the named Lease in kube-system.
async fn assert_lease_rights(client: &kube::Client, account: &str, lease: &str) {
    assert!(
        may(client, account, "update", "kube-system", lease).await,
        "{account} may update {lease}"
    );
    assert!(
        may(client, account, "create", "kube-system", lease).await,
        "{account} may create Leases"
    );
    assert!(
        !may(
            client,
            account,
            "update",
            "kube-system",
            "kube-controller-manager"
        )
        .await,
        "{account} must not update another component's Lease"
    );
    assert!(
        !may(client, account, "update", "default", lease).await,
        "{account} must not update Leases outside kube-system"
    );
}

/// Events are created and, when they repeat, patched (their count): a clean run rarely repeats one, so the
/// rights are asked of the apiserver rather than waited for.
async fn assert_event_rights(client: &kube::Client, account: &str) {
    for verb in ["create", "patch"] {
        assert!(
            may_on(client, account, ("", "events"), verb, "default", "web.17a").await,
            "{account} may {verb} Events"
        );
    }
}

#[tokio::test]
async fn e2e_deploy_rbac_is_enough_for_the_controllers() {
    let admin = TestEnv::get().kube_client().await.unwrap();
    // The kustomize base: each controller as its own account, bound to its own ClusterRole.
    apply_rbac(&admin).await;
    assert_lease_rights(&admin, "cloud-controller-manager", BASE_LEASE).await;
    for account in ["node-controller", "service-controller", "route-controller"] {
        assert_event_rights(&admin, account).await;
    }
    exercise(
        &admin,
        "cloud-controller-manager",
        "--use-service-account-credentials=true",
        BASE_LEASE,
    )
    .await;
    // The Helm chart: everything as one account bound to `clusterRoleRules`.
    apply_helm_rbac(&admin).await;
    assert_lease_rights(&admin, HELM_ACCOUNT, HELM_LEASE).await;
    assert_event_rights(&admin, HELM_ACCOUNT).await;
    exercise(
        &admin,
        HELM_ACCOUNT,
        "--use-service-account-credentials=false",
        HELM_LEASE,
    )
    .await;
}

/// Runs the CCM as `kube-system/<account>` with every controller (cloud-node, cloud-node-lifecycle, route, service
/// and tagging) and checks that each did its work and that nothing was forbidden.
async fn exercise(admin: &kube::Client, account: &str, credentials_flag: &str, lease: &str) {
    let world = World::new("").await;
    let kubeconfig = world.service_account_kubeconfig(admin, account).await;
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
    // Routes and a load balancer too, so that the route and service controllers' roles are exercised.
    public_subnet(&world).await;
    let table = world
        .raw
        .create_route_table()
        .vpc_id(&world.network.vpc)
        .send()
        .await
        .unwrap();
    let table = table.route_table().unwrap().route_table_id().unwrap().to_owned();
    let cluster_tag = aws_sdk_ec2::types::Tag::builder()
        .key(world.cluster_key())
        .value("owned")
        .build();
    world
        .raw
        .create_tags()
        .resources(&table)
        .tags(cluster_tag)
        .send()
        .await
        .unwrap();
    let launched = world.launch(2).await;
    let names = [launched[0].private_dns.clone(), launched[1].id.clone()];
    for (k, name) in names.iter().enumerate() {
        world.register_node(name, Some(&format!("10.244.{k}.0/24"))).await;
    }
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let tags = format!("--tags=e2e-rbac={}", world.cluster_id);
    // The Lease the deployed Role allows (the later flag wins over Ccm::start's per-test name).
    let lease_flag = format!("--leader-elect-resource-name={lease}");
    let mut ccm = Ccm::start(
        &world,
        &[
            // The later --kubeconfig wins (pflag semantics).
            kubeconfig_flag.as_str(),
            credentials_flag,
            lease_flag.as_str(),
            "--configure-cloud-routes=true",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=2s",
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
    // It leads through the leader-election Role: the Lease is held by this process.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(admin.clone(), "kube-system");
    let holder = leases
        .get(lease)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert!(
        holder.is_some_and(|h| !h.is_empty()),
        "{account}: nobody holds Lease {lease}"
    );
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

    // The route controller (account route-controller): routes in the tagged table, NetworkUnavailable=False.
    eventually(
        &mut ccm,
        "a route per node and NetworkUnavailable=False",
        90,
        async || {
            let tables = world
                .raw
                .describe_route_tables()
                .route_table_ids(&table)
                .send()
                .await
                .unwrap();
            let routes = tables.route_tables()[0]
                .routes()
                .iter()
                .filter(|r| r.instance_id().is_some())
                .count();
            let mut ready = routes == names.len();
            for name in &names {
                let conditions = nodes
                    .get(name)
                    .await
                    .unwrap()
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default();
                ready &= conditions
                    .iter()
                    .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False");
            }
            ready
        },
    )
    .await;

    // The service controller (account service-controller): a Classic ELB, its status, its finalizer, deletion.
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    let svc_name = ccm_testing::unique_name("rbac");
    services
        .create(
            &Default::default(),
            &service(&svc_name, &[80], &Default::default()),
        )
        .await
        .unwrap();
    let svcs = services.clone();
    eventually(&mut ccm, "the Service's load balancer hostname", 90, async || {
        let svc = svcs.get(&svc_name).await.unwrap();
        svc.status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .is_some()
    })
    .await;
    services.delete(&svc_name, &Default::default()).await.unwrap();
    eventually(
        &mut ccm,
        "the Service deleted (finalizer removed)",
        90,
        async || svcs.get_opt(&svc_name).await.unwrap().is_none(),
    )
    .await;

    // The node-lifecycle controller (account node-controller) deletes the Node of a terminated instance.
    world.set_ready(&names[1], "False").await;
    world.terminate(&launched[1].id).await;
    eventually(
        &mut ccm,
        "the terminated instance's node deleted",
        // A lifecycle pass covers every NotReady Node of the shared apiserver (other tests leave hundreds).
        180,
        async || nodes.get_opt(&names[1]).await.unwrap().is_none(),
    )
    .await;

    let status = ccm.terminate().await;
    let log = ccm.log_text();
    assert!(status.success(), "{account}: {status}\n{log}");
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "{account}: something was forbidden to the deployed RBAC:\n{log}"
    );
    world.cleanup().await;
}
