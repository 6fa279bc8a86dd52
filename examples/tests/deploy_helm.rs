//! The Helm chart, rendered (support/helm.rs): every object of every example values file is accepted by the
//! real kube-apiserver (server-side-apply dry run, no field dropped); `cloudConfig` becomes a ConfigMap that the
//! binary's own parser reads without a warning, mounted where `--cloud-config` points; contradictory values fail
//! with a message naming them; without an image (none is published) the chart fails, saying how to build one;
//! the metrics Service and ServiceMonitor select the pods' port; NOTES.txt renders; the chart README documents
//! every value.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod support;

use ccm_aws::CloudConfig;
use ccm_testing::TestEnv;
use helm::{IMAGE_REPOSITORY, chart, object, schema, template, template_exactly, values_file};
use manifests::assert_all_kept;
use serde_json::{Value, json};
use support::{helm, manifests};

/// Every `[Global]` key the schema offers, with a valid value.
fn every_global_key() -> Value {
    json!({
        "Zone": "eu-west-1a",
        "Region": "eu-west-1",
        "VPC": "vpc-0123",
        "SubnetID": "subnet-0123",
        "RouteTableID": "rtb-0123",
        "RoleARN": "arn:aws:iam::123456789012:role/ccm",
        "SourceARN": "arn:aws:eks:eu-west-1:123456789012:cluster/prod",
        "KubernetesClusterTag": "prod",
        "KubernetesClusterID": "prod",
        "DisableSecurityGroupIngress": true,
        "ElbSecurityGroup": "sg-0123",
        "NodeIPFamilies": ["ipv6", "ipv4"],
        "ClusterServiceLoadBalancerHealthProbeMode": "Shared",
        "ClusterServiceSharedLoadBalancerHealthProbePort": 10257,
        "ClusterServiceSharedLoadBalancerHealthProbePath": "/livez",
        "SupportedTopologyInstanceTypePattern": "^p[0-9]+\\.",
        "NLBSecurityGroupMode": "Managed",
        "AdoptUntaggedLoadBalancers": true,
        "ExtraLoadBalancerAttributeKeys": "new.key.enabled, other.key",
        "AllowedHealthCheckPorts": "8080, 9000-9100",
        "NodeZoneLabel": "ZoneID",
    })
}

/// The chart's schema offers every `[Global]` key the binary reads: a key missing there is refused at install
/// time (`additionalProperties: false`), so the chart's object form could not set it.
#[test]
fn the_schema_offers_every_global_key_of_the_binary() {
    let schema = schema();
    let global = &schema["properties"]["cloudConfig"]["oneOf"][1]["properties"]["global"]["properties"];
    let offered = global.as_object().expect("the schema's cloudConfig.global");
    let missing: Vec<&&str> = ccm_aws::cloud_config::GLOBAL_KEYS
        .iter()
        .filter(|k| !offered.contains_key(**k))
        .collect();
    assert_eq!(missing, Vec::<&&str>::new(), "keys the chart's schema refuses");
    let tested = every_global_key();
    let untested: Vec<&String> = offered
        .keys()
        .filter(|k| tested.get(k.as_str()).is_none())
        .collect();
    assert_eq!(
        untested,
        Vec::<&String>::new(),
        "schema keys without a value in every_global_key"
    );
    // The chart's defaults with every key are valid; a port that is not a number is refused at install time.
    let validator = jsonschema::validator_for(&schema).unwrap();
    let mut values = manifests::yaml_file(&chart().join("values.yaml"));
    values["cloudConfig"] = cloud_config_values()["cloudConfig"].clone();
    assert!(validator.is_valid(&values), "{values}");
    for bad in ["ssh", "8080,", "9000-", "80 443"] {
        values["cloudConfig"]["global"]["AllowedHealthCheckPorts"] = json!(bad);
        assert!(!validator.is_valid(&values), "{bad:?} accepted");
    }
}

fn cloud_config_values() -> Value {
    json!({"cloudConfig": {
        "global": every_global_key(),
        "serviceOverrides": {
            "ec2": {"Service": "EC2", "Region": "eu-west-1", "URL": "https://vpce-0123.ec2.eu-west-1.vpce.amazonaws.com",
                    "SigningRegion": "eu-west-1"},
            "elb \"quoted\"": {"Service": "Elastic Load Balancing", "Region": "eu-west-1",
                    "URL": "http://127.0.0.1:5000", "SigningRegion": "eu-west-1", "SigningName": "elasticloadbalancing"},
        },
    }})
}

#[tokio::test]
async fn every_example_renders_into_objects_the_apiserver_accepts() {
    let client = TestEnv::get().kube_client().await.expect("kube client");
    let all = values_file(
        "all-features",
        &json!({"cloudConfig": cloud_config_values()["cloudConfig"],
                "metrics": {"service": {"enabled": true}, "serviceMonitor": {"enabled": true}}}),
    );
    let examples = [
        chart().join("ci/example-values.yaml"),
        chart().join("ci/irsa-values.yaml"),
        all,
    ];
    let sets: Vec<Vec<&std::path::Path>> = std::iter::once(Vec::new())
        .chain(examples.iter().map(|p| vec![p.as_path()]))
        .collect();
    for files in sets {
        let (objects, _) = template(&files).unwrap_or_else(|e| panic!("{files:?}: {e}"));
        for want in [
            "DaemonSet",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
        ] {
            object(&objects, want, None);
        }
        // The test apiserver has no Prometheus Operator CRDs: the ServiceMonitor is checked below.
        let served: Vec<Value> = objects
            .iter()
            .filter(|o| o["kind"] != "ServiceMonitor")
            .cloned()
            .collect();
        assert_all_kept(&client, &served, &format!("{files:?}: ")).await;
    }
}

#[test]
fn cloud_config_is_a_config_map_the_binary_reads_and_mounts() {
    let values = values_file("cloud-config", &cloud_config_values());
    let (objects, notes) = template(&[&values]).unwrap();
    let cm = object(
        &objects,
        "ConfigMap",
        Some("aws-cloud-controller-manager-cloud-config"),
    );
    let text = cm["data"]["cloud.conf"].as_str().unwrap();
    let parsed = CloudConfig::parse(text)
        .unwrap_or_else(|e| panic!("the binary rejects the rendered config: {e}\n{text}"));
    assert_eq!(
        parsed.warnings,
        Vec::<String>::new(),
        "every schema key is known to the binary:\n{text}"
    );
    let g = &parsed.global;
    assert_eq!(g.kubernetes_cluster_id.as_deref(), Some("prod"));
    assert_eq!(g.role_arn.as_deref(), Some("arn:aws:iam::123456789012:role/ccm"));
    assert_eq!(
        format!("{:?}", g.node_ip_families),
        "[Ipv6, Ipv4]",
        "list values keep their order"
    );
    assert_eq!(g.shared_health_probe_port, 10257);
    assert_eq!(g.shared_health_probe_path, "/livez");
    assert!(g.disable_security_group_ingress && g.adopt_untagged_load_balancers);
    assert_eq!(
        g.extra_load_balancer_attribute_keys,
        ["new.key.enabled", "other.key"]
    );
    assert_eq!(g.supported_topology_instance_type_pattern, "^p[0-9]+\\.");
    assert_eq!(g.allowed_health_check_ports, [(8080, 8080), (9000, 9100)]);
    let names: Vec<&str> = parsed.service_overrides.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["ec2", "elb \"quoted\""]);
    assert_eq!(parsed.service_overrides[1].url, "http://127.0.0.1:5000");

    // Mounted where --cloud-config points, from that ConfigMap.
    let pod = &object(&objects, "DaemonSet", None)["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let flag = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|a| a.starts_with("--cloud-config="))
        .expect("--cloud-config passed");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "cloud-config")
        .expect("the cloud config mounted");
    assert_eq!(
        flag,
        format!(
            "--cloud-config={}/cloud.conf",
            mount["mountPath"].as_str().unwrap()
        )
    );
    assert_eq!(mount["readOnly"], true);
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "cloud-config")
        .unwrap();
    assert_eq!(volume["configMap"]["name"], cm["metadata"]["name"]);
    assert!(
        notes.contains("aws-cloud-controller-manager-cloud-config"),
        "{notes}"
    );

    // A change of the config rolls the pods; the text form is passed as written.
    let checksum = |objects: &[Value]| {
        object(objects, "DaemonSet", None)["spec"]["template"]["metadata"]["annotations"]["checksum/cloud-config"].clone()
    };
    let text_form = "[Global]\nKubernetesClusterID = other\n";
    let (changed, _) = template(&[&values_file(
        "cloud-config-text",
        &json!({"cloudConfig": text_form}),
    )])
    .unwrap();
    assert!(checksum(&objects).is_string());
    assert_ne!(checksum(&objects), checksum(&changed));
    let cm = object(&changed, "ConfigMap", None);
    assert_eq!(
        cm["data"]["cloud.conf"].as_str().unwrap().trim_end(),
        text_form.trim_end()
    );

    // Without cloudConfig: no ConfigMap, no flag, no volume.
    let (plain, _) = template(&[]).unwrap();
    assert!(!plain.iter().any(|o| o["kind"] == "ConfigMap"));
    assert!(!plain.iter().any(|o| o.to_string().contains("--cloud-config")));
}

#[test]
fn contradictory_values_fail_with_a_message_naming_them() {
    let both = values_file(
        "both-cloud-configs",
        &json!({"cloudConfig": "[Global]\n", "args": ["--cloud-provider=aws", "--cloud-config=/etc/cloud.conf"]}),
    );
    let err = template(&[&both]).expect_err("cloudConfig and --cloud-config together");
    assert!(
        err.contains("cloudConfig") && err.contains("--cloud-config=/etc/cloud.conf"),
        "{err}"
    );
    let monitor = values_file(
        "monitor-only",
        &json!({"metrics": {"serviceMonitor": {"enabled": true}}}),
    );
    let err = template(&[&monitor]).expect_err("a ServiceMonitor without its Service");
    assert!(err.contains("metrics.service.enabled"), "{err}");
}

#[test]
fn without_an_image_the_chart_fails_saying_how_to_build_one() {
    let empty = values_file("empty-image", &json!({"image": {"repository": ""}}));
    let irsa = chart().join("ci/irsa-values.yaml");
    for files in [vec![], vec![empty.as_path()], vec![irsa.as_path()]] {
        let err = template_exactly(&files).expect_err("no image.repository");
        // The message itself (the renderer also quotes the template's source, which holds the same text).
        let err = err.rsplit("error calling required: ").next().unwrap();
        for needle in [
            "image.repository is required",
            "no aws-cloud-controller-manager image is published",
            "scripts/images.sh",
            "docker buildx build",
            "--set image.repository=",
        ] {
            assert!(
                err.contains(needle),
                "{files:?}: the error lacks {needle:?}: {err}"
            );
        }
    }
    // With one, the DaemonSet runs it, with the chart's tag unless one is given.
    let (objects, _) = template(&[]).unwrap();
    let container = &object(&objects, "DaemonSet", None)["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], format!("{IMAGE_REPOSITORY}:v0.1.0"));
    let (objects, _) = template_exactly(&[&chart().join("ci/example-values.yaml")]).unwrap();
    let container = &object(&objects, "DaemonSet", None)["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/aws-cloud-controller-manager:v0.1.0",
        "a Go values file that sets image works as it is"
    );
}

#[test]
fn metrics_service_and_monitor_select_the_pods_port() {
    let (objects, notes) = template(&[&values_file(
        "metrics",
        &json!({"metrics": {"service": {"enabled": true}, "serviceMonitor": {"enabled": true, "labels": {"release": "prom"}}}}),
    )])
    .unwrap();
    let ds = object(&objects, "DaemonSet", None);
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    let port = &ds["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    let svc = object(&objects, "Service", Some("aws-cloud-controller-manager-metrics"));
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "the Service selects the pods");
    }
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port["name"]);
    assert_eq!(svc["spec"]["ports"][0]["port"], port["containerPort"]);
    let sm = object(&objects, "ServiceMonitor", None);
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["metadata"]["labels"]["release"], "prom");
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &svc["metadata"]["labels"][k], v,
            "the ServiceMonitor selects the Service"
        );
    }
    let endpoint = &sm["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], svc["spec"]["ports"][0]["name"]);
    assert_eq!(
        (endpoint["scheme"].as_str(), endpoint["path"].as_str()),
        (Some("https"), Some("/metrics"))
    );
    let reader = object(
        &objects,
        "ClusterRole",
        Some("aws-cloud-controller-manager-metrics-reader"),
    );
    assert_eq!(
        reader["rules"],
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    );
    assert!(
        notes.contains("aws-cloud-controller-manager-metrics-reader"),
        "{notes}"
    );

    let (plain, _) = template(&[]).unwrap();
    assert!(
        !plain
            .iter()
            .any(|o| o["kind"] == "Service" || o["kind"] == "ServiceMonitor")
    );
}

#[test]
fn notes_tell_how_to_check_the_install() {
    let (_, notes) = template(&[]).unwrap();
    for needle in [
        "kube-system/aws-cloud-controller-manager",
        "get lease cloud-controller-manager",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "kubectl create service loadbalancer",
        "lb-plan",
        "No cloudConfig is set",
    ] {
        assert!(notes.contains(needle), "NOTES.txt lacks {needle:?}:\n{notes}");
    }
    assert!(!notes.contains("WARNING"), "{notes}");
    let (_, warned) = template(&[&values_file(
        "sa-credentials",
        &json!({"args": ["--cloud-provider=aws", "--use-service-account-credentials=true"]}),
    )])
    .unwrap();
    assert!(
        warned.contains("WARNING: args has --use-service-account-credentials=true"),
        "{warned}"
    );
}

#[test]
fn chart_readme_documents_every_value() {
    let readme = std::fs::read_to_string(chart().join("README.md")).unwrap();
    let schema = schema();
    for key in schema["properties"].as_object().unwrap().keys() {
        if key == "global" {
            continue; // Helm's own
        }
        assert!(
            readme.contains(&format!("`{key}")),
            "the chart README does not document {key}"
        );
    }
    for example in ["ci/example-values.yaml", "ci/irsa-values.yaml"] {
        assert!(
            readme.contains(example),
            "the chart README does not show {example}"
        );
    }
}
