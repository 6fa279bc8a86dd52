//! `/configz`: the effective configuration as component-base's configz serves it for the Go controller manager
//! (`{"cloudcontrollermanager.config.k8s.io": <CloudControllerManagerConfiguration v1alpha1>}`), built from the
//! flags.

use std::time::Duration;

use serde_json::{Value, json};

use crate::Options;

/// The configz name of the cloud controller manager (upstream's `ConfigzName`).
pub(crate) const CONFIGZ_NAME: &str = "cloudcontrollermanager.config.k8s.io";

/// Go's `time.Duration.String()`, which `metav1.Duration` serializes: `5m0s`, `15s`, `1h0m0s`, `500ms`.
pub(crate) fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, secs / 60 % 60);
    let frac = d.subsec_millis();
    let s = if frac == 0 {
        format!("{}s", secs % 60)
    } else {
        format!("{}.{}s", secs % 60, format!("{frac:03}").trim_end_matches('0'))
    };
    match (h, m) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

/// The `/configz` body for `o`.
pub(crate) fn render(o: &Options) -> String {
    let d = |v: Duration| Value::String(go_duration(v));
    let config = json!({
        "kind": "CloudControllerManagerConfiguration",
        "apiVersion": format!("{CONFIGZ_NAME}/v1alpha1"),
        "Generic": {
            "Port": 0,
            "Address": "",
            "MinResyncPeriod": "12h0m0s",
            "ClientConnection": {
                "Kubeconfig": o.kubeconfig,
                "AcceptContentTypes": "",
                "ContentType": "application/json",
                "QPS": o.kube_api_qps,
                "Burst": o.kube_api_burst,
            },
            "ControllerStartInterval": d(o.controller_start_interval),
            "LeaderElection": {
                "LeaderElect": o.leader_elect,
                "LeaseDuration": d(o.leader_elect_lease_duration),
                "RenewDeadline": d(o.leader_elect_renew_deadline),
                "RetryPeriod": d(o.leader_elect_retry_period),
                "ResourceLock": o.leader_elect_resource_lock,
                "ResourceName": o.leader_elect_resource_name,
                "ResourceNamespace": o.leader_elect_resource_namespace,
            },
            "Controllers": o.controllers,
            "Debugging": {"EnableProfiling": false, "EnableContentionProfiling": false},
            "LeaderMigrationEnabled": o.enable_leader_migration,
        },
        "KubeCloudShared": {
            "CloudProvider": {"Name": o.cloud_provider, "CloudConfigFile": o.cloud_config},
            "UseServiceAccountCredentials": o.use_service_account_credentials,
            "RouteReconciliationPeriod": d(o.route_reconciliation_period),
            "NodeMonitorPeriod": d(o.node_monitor_period),
            "ClusterName": o.cluster_name,
            "ClusterCIDR": o.cluster_cidr,
            "AllocateNodeCIDRs": o.allocate_node_cidrs,
            "ConfigureCloudRoutes": o.configure_cloud_routes,
        },
        "ServiceController": {"ConcurrentServiceSyncs": o.concurrent_service_syncs},
        "NodeController": {"ConcurrentNodeSyncs": o.concurrent_node_syncs},
        "NodeStatusUpdateFrequency": d(o.node_status_update_frequency),
    });
    json!({ CONFIGZ_NAME: config }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(go_duration(Duration::from_secs(15)), "15s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_millis(2500)), "2.5s");
        assert_eq!(go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn configz_has_upstreams_shape() {
        let o = Options::try_parse_from(["--cloud-provider=aws", "--concurrent-service-syncs=3"]).unwrap();
        let v: Value = serde_json::from_str(&render(&o)).unwrap();
        let c = &v[CONFIGZ_NAME];
        assert_eq!(c["kind"], "CloudControllerManagerConfiguration");
        assert_eq!(c["KubeCloudShared"]["CloudProvider"]["Name"], "aws");
        assert_eq!(c["ServiceController"]["ConcurrentServiceSyncs"], 3);
        assert_eq!(c["Generic"]["LeaderElection"]["LeaseDuration"], "15s");
        assert_eq!(c["NodeStatusUpdateFrequency"], "5m0s");
    }
}
