//! What the tests with the Go controller as a peer share: the AWS resources of one test's VPC as flat facts (one
//! `key = value` per listener, attribute, tag, target, security group rule...), read from moto the way an operator
//! reads them with the AWS CLI; the difference of two such snapshots; and the writes a controller made, read from
//! the request log of the `FaultProxy` between it and moto.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod cases;
pub mod cluster;
pub mod normalise;

use std::{collections::BTreeMap, fmt};

use aws_sdk_ec2::types::{Filter, IpPermission};
use aws_sdk_elasticloadbalancing as elb;
use aws_sdk_elasticloadbalancingv2 as elbv2;
use ccm_testing::{FaultProxy, TestEnv};

/// The facts of a snapshot, by key (`clb <name> listener 80`, `sg <id> ingress tcp 80-80 from 0.0.0.0/0`, ...).
pub type Snapshot = BTreeMap<String, String>;

/// One key's change between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Added(String),
    Removed(String),
    Changed(String, String),
}

impl fmt::Display for Delta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Added(v) => write!(f, "added {v:?}"),
            Self::Removed(v) => write!(f, "removed {v:?}"),
            Self::Changed(a, b) => write!(f, "changed {a:?} -> {b:?}"),
        }
    }
}

/// Every key that differs between `before` and `after`.
pub fn diff(before: &Snapshot, after: &Snapshot) -> BTreeMap<String, Delta> {
    let mut out = BTreeMap::new();
    for (key, old) in before {
        match after.get(key) {
            None => {
                out.insert(key.clone(), Delta::Removed(old.clone()));
            }
            Some(new) if new != old => {
                out.insert(key.clone(), Delta::Changed(old.clone(), new.clone()));
            }
            Some(_) => {}
        }
    }
    for (key, new) in after {
        if !before.contains_key(key) {
            out.insert(key.clone(), Delta::Added(new.clone()));
        }
    }
    out
}

/// A diff, one line a key.
pub fn show(diff: &BTreeMap<String, Delta>) -> String {
    if diff.is_empty() {
        return "  (no difference)\n".to_owned();
    }
    diff.iter().map(|(k, d)| format!("  {k}: {d}\n")).collect()
}

/// moto's EC2, ELB and ELBv2.
pub struct Aws {
    pub ec2: aws_sdk_ec2::Client,
    pub elb: elb::Client,
    pub v2: elbv2::Client,
}

impl Aws {
    pub async fn connect() -> Self {
        let config = TestEnv::get().aws_config().await;
        Self {
            ec2: aws_sdk_ec2::Client::new(&config),
            elb: elb::Client::new(&config),
            v2: elbv2::Client::new(&config),
        }
    }

    /// Every Classic ELB, NLB, target group and security group in `vpc`, as facts.
    pub async fn snapshot(&self, vpc: &str) -> Snapshot {
        let mut facts = Snapshot::new();
        self.classic(vpc, &mut facts).await;
        self.network(vpc, &mut facts).await;
        self.target_groups(vpc, &mut facts).await;
        self.security_groups(vpc, &mut facts).await;
        facts
    }

    async fn classic(&self, vpc: &str, facts: &mut Snapshot) {
        let all = self.elb.describe_load_balancers().send().await.unwrap();
        for lb in all.load_balancer_descriptions() {
            if lb.vpc_id() != Some(vpc) {
                continue;
            }
            let name = lb.load_balancer_name().unwrap_or_default();
            let k = |what: &str| format!("clb {name} {what}");
            facts.insert(k("dns"), lb.dns_name().unwrap_or_default().to_owned());
            // moto derives a Classic ELB's DNS name from its name alone: only the creation time tells a
            // recreated one.
            facts.insert(k("created"), format!("{:?}", lb.created_time()));
            facts.insert(k("scheme"), lb.scheme().unwrap_or_default().to_owned());
            facts.insert(k("subnets"), sorted(lb.subnets()));
            facts.insert(k("security-groups"), lb.security_groups().join(","));
            facts.insert(k("health-check"), format!("{:?}", lb.health_check()));
            for l in lb.listener_descriptions() {
                let Some(listener) = l.listener() else { continue };
                let value = format!(
                    "{}:{} -> {}:{} cert={:?} policies={:?}",
                    listener.protocol(),
                    listener.load_balancer_port(),
                    listener.instance_protocol().unwrap_or_default(),
                    listener.instance_port(),
                    listener.ssl_certificate_id(),
                    l.policy_names(),
                );
                facts.insert(k(&format!("listener {}", listener.load_balancer_port())), value);
            }
            let instances: Vec<String> = lb
                .instances()
                .iter()
                .filter_map(|i| i.instance_id().map(str::to_owned))
                .collect();
            facts.insert(k("instances"), sorted(&instances));
            for b in lb.backend_server_descriptions() {
                let port = b.instance_port().unwrap_or_default();
                facts.insert(k(&format!("backend {port}")), format!("{:?}", b.policy_names()));
            }
            self.classic_details(name, facts).await;
        }
    }

    async fn classic_details(&self, name: &str, facts: &mut Snapshot) {
        let k = |what: &str| format!("clb {name} {what}");
        let attrs = self
            .elb
            .describe_load_balancer_attributes()
            .load_balancer_name(name)
            .send()
            .await
            .unwrap();
        if let Some(a) = attrs.load_balancer_attributes() {
            facts.insert(
                k("attr cross-zone"),
                format!("{:?}", a.cross_zone_load_balancing()),
            );
            facts.insert(k("attr access-log"), format!("{:?}", a.access_log()));
            facts.insert(k("attr draining"), format!("{:?}", a.connection_draining()));
            facts.insert(k("attr idle"), format!("{:?}", a.connection_settings()));
            for extra in a.additional_attributes() {
                let key = extra.key().unwrap_or_default();
                facts.insert(
                    k(&format!("attr {key}")),
                    extra.value().unwrap_or_default().to_owned(),
                );
            }
        }
        let tags = self
            .elb
            .describe_tags()
            .load_balancer_names(name)
            .send()
            .await
            .unwrap();
        for t in tags.tag_descriptions().iter().flat_map(|d| d.tags()) {
            facts.insert(
                k(&format!("tag {}", t.key())),
                t.value().unwrap_or_default().to_owned(),
            );
        }
        let policies = self
            .elb
            .describe_load_balancer_policies()
            .load_balancer_name(name)
            .send()
            .await
            .unwrap();
        for p in policies.policy_descriptions() {
            let attrs: Vec<String> = p
                .policy_attribute_descriptions()
                .iter()
                .map(|a| {
                    format!(
                        "{}={}",
                        a.attribute_name().unwrap_or_default(),
                        a.attribute_value().unwrap_or_default()
                    )
                })
                .collect();
            let value = format!("{} {}", p.policy_type_name().unwrap_or_default(), attrs.join(","));
            facts.insert(
                k(&format!("policy {}", p.policy_name().unwrap_or_default())),
                value,
            );
        }
    }

    async fn network(&self, vpc: &str, facts: &mut Snapshot) {
        let all = self.v2.describe_load_balancers().send().await.unwrap();
        for lb in all.load_balancers() {
            if lb.vpc_id() != Some(vpc) {
                continue;
            }
            let name = lb.load_balancer_name().unwrap_or_default();
            let arn = lb.load_balancer_arn().unwrap_or_default();
            let k = |what: &str| format!("nlb {name} {what}");
            facts.insert(k("arn"), arn.to_owned());
            facts.insert(k("dns"), lb.dns_name().unwrap_or_default().to_owned());
            facts.insert(k("created"), format!("{:?}", lb.created_time()));
            facts.insert(k("type"), format!("{:?}", lb.r#type()));
            facts.insert(k("scheme"), format!("{:?}", lb.scheme()));
            facts.insert(k("ip-address-type"), format!("{:?}", lb.ip_address_type()));
            facts.insert(k("security-groups"), sorted(lb.security_groups()));
            let subnets: Vec<String> = lb
                .availability_zones()
                .iter()
                .map(|z| {
                    format!(
                        "{}:{}",
                        z.zone_name().unwrap_or_default(),
                        z.subnet_id().unwrap_or_default()
                    )
                })
                .collect();
            facts.insert(k("subnets"), sorted(&subnets));
            let attrs = self
                .v2
                .describe_load_balancer_attributes()
                .load_balancer_arn(arn)
                .send()
                .await
                .unwrap();
            for a in attrs.attributes() {
                let key = a.key().unwrap_or_default();
                facts.insert(
                    k(&format!("attr {key}")),
                    a.value().unwrap_or_default().to_owned(),
                );
            }
            let mut tagged = vec![(k(""), arn.to_owned())];
            let listeners = self
                .v2
                .describe_listeners()
                .load_balancer_arn(arn)
                .send()
                .await
                .unwrap();
            for l in listeners.listeners() {
                let key = k(&format!("listener {}", l.port().unwrap_or_default()));
                let forward: Vec<&str> = l
                    .default_actions()
                    .iter()
                    .filter_map(|a| a.target_group_arn())
                    .collect();
                let certs: Vec<&str> = l
                    .certificates()
                    .iter()
                    .filter_map(|c| c.certificate_arn())
                    .collect();
                let value = format!(
                    "{:?} arn={} forward={forward:?} certs={certs:?} ssl-policy={:?} alpn={:?}",
                    l.protocol(),
                    l.listener_arn().unwrap_or_default(),
                    l.ssl_policy(),
                    l.alpn_policy(),
                );
                facts.insert(key.clone(), value);
                tagged.push((format!("{key} "), l.listener_arn().unwrap_or_default().to_owned()));
            }
            self.v2_tags(&tagged, facts).await;
        }
    }

    async fn target_groups(&self, vpc: &str, facts: &mut Snapshot) {
        let all = self.v2.describe_target_groups().send().await.unwrap();
        for tg in all.target_groups() {
            if tg.vpc_id() != Some(vpc) {
                continue;
            }
            let name = tg.target_group_name().unwrap_or_default();
            let arn = tg.target_group_arn().unwrap_or_default();
            let k = |what: &str| format!("tg {name} {what}");
            facts.insert(k("arn"), arn.to_owned());
            facts.insert(
                k("target"),
                format!("{:?}:{:?} {:?}", tg.protocol(), tg.port(), tg.target_type()),
            );
            facts.insert(k("load-balancers"), sorted(tg.load_balancer_arns()));
            let check = format!(
                "enabled={:?} {:?}:{:?} path={:?} interval={:?} timeout={:?} healthy={:?} unhealthy={:?} matcher={:?}",
                tg.health_check_enabled(),
                tg.health_check_protocol(),
                tg.health_check_port(),
                tg.health_check_path(),
                tg.health_check_interval_seconds(),
                tg.health_check_timeout_seconds(),
                tg.healthy_threshold_count(),
                tg.unhealthy_threshold_count(),
                tg.matcher(),
            );
            facts.insert(k("health-check"), check);
            let attrs = self
                .v2
                .describe_target_group_attributes()
                .target_group_arn(arn)
                .send()
                .await
                .unwrap();
            for a in attrs.attributes() {
                let key = a.key().unwrap_or_default();
                facts.insert(
                    k(&format!("attr {key}")),
                    a.value().unwrap_or_default().to_owned(),
                );
            }
            let health = self
                .v2
                .describe_target_health()
                .target_group_arn(arn)
                .send()
                .await
                .unwrap();
            let targets: Vec<String> = health
                .target_health_descriptions()
                .iter()
                .filter_map(|d| d.target())
                .map(|t| format!("{}:{}", t.id().unwrap_or_default(), t.port().unwrap_or_default()))
                .collect();
            facts.insert(k("targets"), sorted(&targets));
            self.v2_tags(&[(k(""), arn.to_owned())], facts).await;
        }
    }

    /// The tags of each ARN, under `<prefix>tag <key>`.
    async fn v2_tags(&self, arns: &[(String, String)], facts: &mut Snapshot) {
        let prefix: BTreeMap<&str, &str> = arns.iter().map(|(p, a)| (a.as_str(), p.as_str())).collect();
        for chunk in arns.chunks(20) {
            let ids: Vec<String> = chunk.iter().map(|(_, a)| a.clone()).collect();
            let out = self
                .v2
                .describe_tags()
                .set_resource_arns(Some(ids))
                .send()
                .await
                .unwrap();
            for d in out.tag_descriptions() {
                let p = prefix
                    .get(d.resource_arn().unwrap_or_default())
                    .copied()
                    .unwrap_or("? ");
                for t in d.tags() {
                    let key = t.key().unwrap_or_default();
                    facts.insert(format!("{p}tag {key}"), t.value().unwrap_or_default().to_owned());
                }
            }
        }
    }

    async fn security_groups(&self, vpc: &str, facts: &mut Snapshot) {
        let out = self
            .ec2
            .describe_security_groups()
            .filters(Filter::builder().name("vpc-id").values(vpc).build())
            .send()
            .await
            .unwrap();
        for g in out.security_groups() {
            let k = |what: &str| format!("sg {} {what}", g.group_id().unwrap_or_default());
            facts.insert(k("name"), g.group_name().unwrap_or_default().to_owned());
            facts.insert(k("description"), g.description().unwrap_or_default().to_owned());
            for t in g.tags() {
                facts.insert(
                    k(&format!("tag {}", t.key().unwrap_or_default())),
                    t.value().unwrap_or_default().to_owned(),
                );
            }
            for (direction, rules) in [
                ("ingress", g.ip_permissions()),
                ("egress", g.ip_permissions_egress()),
            ] {
                for (rule, description) in rules.iter().flat_map(rule_facts) {
                    facts.insert(k(&format!("{direction} {rule}")), description);
                }
            }
        }
    }
}

/// One fact per source of a permission: (`<protocol> <from>-<to> from <source>`, description).
fn rule_facts(p: &IpPermission) -> Vec<(String, String)> {
    let protocol = p.ip_protocol().unwrap_or_default();
    let ports = match (p.from_port(), p.to_port()) {
        (None, None) => "all".to_owned(),
        (from, to) => format!("{}-{}", from.unwrap_or_default(), to.unwrap_or_default()),
    };
    let rule = |source: &str| format!("{protocol} {ports} from {source}");
    let mut out = Vec::new();
    for r in p.ip_ranges() {
        out.push((
            rule(r.cidr_ip().unwrap_or_default()),
            r.description().unwrap_or_default().to_owned(),
        ));
    }
    for r in p.ipv6_ranges() {
        out.push((
            rule(r.cidr_ipv6().unwrap_or_default()),
            r.description().unwrap_or_default().to_owned(),
        ));
    }
    for r in p.user_id_group_pairs() {
        out.push((
            rule(r.group_id().unwrap_or_default()),
            r.description().unwrap_or_default().to_owned(),
        ));
    }
    for r in p.prefix_list_ids() {
        out.push((
            rule(r.prefix_list_id().unwrap_or_default()),
            r.description().unwrap_or_default().to_owned(),
        ));
    }
    out
}

fn sorted(items: &[String]) -> String {
    let mut items = items.to_vec();
    items.sort();
    items.join(",")
}

/// The mutating requests a controller made through `proxy` (every action but `Describe*`, `Get*`, `List*`), by
/// action, with how many times each.
pub fn writes(proxy: &FaultProxy) -> BTreeMap<String, u64> {
    proxy
        .requests_by_action()
        .into_iter()
        .filter(|(action, _)| !["Describe", "Get", "List"].iter().any(|p| action.starts_with(p)))
        .collect()
}

/// The requests of each action in `counts` as `<service> <Action> key=value ...`, one a line, the last
/// `counts[action]` requests of each action (the ones `counts` counted), form-decoded.
pub fn list_requests(proxy: &FaultProxy, counts: &BTreeMap<String, u64>) -> String {
    let mut out = String::new();
    for (action, n) in counts {
        let bodies = proxy.bodies(action);
        let skip = bodies
            .len()
            .saturating_sub(usize::try_from(*n).unwrap_or(usize::MAX));
        for body in &bodies[skip..] {
            out.push_str(&format!("  {}\n", describe_request(body)));
        }
    }
    out
}

/// `Action=X&Version=Y&K=V...` as `<service> X K=V ...` (the service named from the API version).
fn describe_request(body: &str) -> String {
    let mut action = String::new();
    let mut service = "?";
    let mut params = Vec::new();
    for pair in body.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = decode(v);
        match k {
            "Action" => action = v,
            "Version" => {
                service = match v.as_str() {
                    "2016-11-15" => "ec2",
                    "2012-06-01" => "elb",
                    "2015-12-01" => "elbv2",
                    _ => "?",
                }
            }
            _ => params.push(format!("{}={v}", decode(k))),
        }
    }
    format!("{service} {action} {}", params.join(" "))
}

/// Form decoding (`+` and `%XX`).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
