//! The pieces of the ownership gate's adversarial matrix (`lb_ownership_gate_moto.rs`): victims (load balancers
//! made first by their legitimate owners), actors (Services that name them), the paths an actor takes, and what a
//! victim looks like from outside, compared before and after every actor's call.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, Tags,
    ec2::IpPermission,
    elb::ClassicLoadBalancer,
    elbv2::{ListenerV2, LoadBalancerV2, Target, TargetGroup},
};
use ccm_cloud_provider::{Ensured, LoadBalancer, LoadBalancerStatus, NodeView};
use ccm_load_balancers::annotations::Key;
use ccm_testing::{TestEnv, fixtures::ServiceBuilder};
use k8s_openapi::api::core::v1::{Service, ServiceStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use ccm_testing::lb_world::{Lbs, World, uid};

/// The controller's `--cluster-name`.
pub const CLUSTER: &str = "kubernetes";

/// The node port of every Service here (an actor of the same namespace and name then wants the victim's target
/// group names: upstream's carry no UID).
pub const NODE_PORT: i32 = 30080;

/// A victim's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Classic,
    Network,
    /// An application load balancer another tool made.
    Application,
}

/// A load balancer made first by its legitimate owner.
pub struct Victim {
    /// For messages.
    pub what: &'static str,
    pub kind: Kind,
    pub name: String,
    /// Its DNS name.
    pub hostname: String,
    /// The Service that made it, with its status (`None`: made by another tool).
    pub service: Option<Service>,
    /// Whether this cluster made it (an actor of the same namespace and name is then its successor).
    pub ours: bool,
    /// What a refusal must say besides the name: the holder.
    pub holder: String,
}

/// A Service naming a victim's load balancer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// `moto/thief`.
    SameNamespace,
    /// `tenant/web`.
    OtherNamespace,
    /// `moto/web` under another UID: the victim's Service deleted and re-created.
    Recreated,
}

/// What the actor does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// A full ensure.
    Ensure,
    /// A refused ensure, then a host update with another node list.
    HostUpdate,
    /// The drift pass with the actor among the Services, then the re-ensure of what it reports.
    Drift,
    /// The actor has a load balancer of its own (its status shows it) and now wants the victim's name.
    Rename { consent: bool },
    /// The actor's deletion, naming the victim by annotation and/or status hostname.
    Delete { annotation: bool, status: bool },
    /// The dry run.
    DryRun,
}

/// Every path, in the matrix's order.
pub const PATHS: [Path; 10] = [
    Path::Ensure,
    Path::HostUpdate,
    Path::Drift,
    Path::Rename { consent: false },
    Path::Rename { consent: true },
    Path::Delete {
        annotation: true,
        status: false,
    },
    Path::Delete {
        annotation: true,
        status: true,
    },
    Path::Delete {
        annotation: false,
        status: true,
    },
    Path::Delete {
        annotation: false,
        status: false,
    },
    Path::DryRun,
];

/// A victim's load balancer as described: either flavour (an ELBv2 one without its `state`, which moto moves
/// on by itself).
#[derive(Debug, PartialEq)]
pub enum Described {
    Classic(ClassicLoadBalancer),
    V2 {
        load_balancer: LoadBalancerV2,
        listeners: Vec<ListenerV2>,
        target_groups: Vec<(TargetGroup, Tags, Vec<Target>)>,
    },
}

/// What a victim looks like from outside, and every security group of the VPC (ingress sorted, tags): the
/// managed groups and the node rules.
#[derive(Debug, PartialEq)]
pub struct Seen {
    pub load_balancer: Option<(Described, Tags)>,
    pub groups: BTreeMap<String, (Vec<IpPermission>, Tags)>,
}

/// Service `namespace/name` with `uid`, port 80, an NLB unless `kind` is Classic, and `annotations`.
pub fn service(namespace: &str, name: &str, uid: &str, kind: Kind, annotations: &[(Key, &str)]) -> Service {
    let mut svc = ServiceBuilder::new(namespace, name)
        .uid(uid)
        .port(80, "TCP", Some(NODE_PORT));
    if kind != Kind::Classic {
        svc = svc.annotation(Key::Type.name(), "nlb");
    }
    for (key, value) in annotations {
        svc = svc.annotation(key.name(), value);
    }
    svc.build()
}

/// `svc` with `status`, as the service controller writes it.
pub fn with_status(mut svc: Service, status: &LoadBalancerStatus) -> Service {
    svc.status = Some(ServiceStatus {
        load_balancer: Some(k8s_openapi::api::core::v1::LoadBalancerStatus {
            ingress: status.ingress.clone(),
        }),
        ..ServiceStatus::default()
    });
    svc
}

/// A status showing `hostname`.
pub fn status_of(hostname: &str) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![k8s_openapi::api::core::v1::LoadBalancerIngress {
            hostname: Some(hostname.to_owned()),
            ..Default::default()
        }]),
    }
}

/// The hostname of an ensure's status.
pub fn hostname(status: &LoadBalancerStatus) -> String {
    status.ingress.as_ref().unwrap()[0].hostname.clone().unwrap()
}

/// A name of its own per run: names are unique in an account and moto outlives test runs.
pub fn chosen(tag: &str) -> String {
    format!("{tag}-{}", &uid()[..8])
}

/// Ensure with every Node of the world.
pub async fn ensure(lbs: &Lbs, w: &World, svc: &Service) -> ccm_cloud_provider::Result<Ensured> {
    let nodes = w.nodes();
    let nodes: Vec<&NodeView> = nodes.iter().collect();
    lbs.ensure_load_balancer_reporting(CLUSTER, svc, &nodes).await
}

/// The victim made by its Service `moto/web` through `lbs` (this cluster's, or another's).
pub async fn made(lbs: &Lbs, w: &World, kind: Kind, what: &'static str, ours: bool) -> Victim {
    let name = chosen(what);
    let svc = service("moto", "web", &uid(), kind, &[(Key::LoadBalancerName, &name)]);
    let status = ensure(lbs, w, &svc).await.unwrap().status;
    let cluster = lbs.config().cluster.key();
    Victim {
        what,
        kind,
        hostname: hostname(&status),
        service: Some(with_status(svc, &status)),
        ours,
        holder: if ours {
            "Service moto/web".to_owned()
        } else {
            cluster
        },
        name,
    }
}

// === impl Actor ===

impl Actor {
    /// The actor's Service of UID `uid`, wanting `kind`, with `annotations`.
    pub fn service(self, uid: &str, kind: Kind, annotations: &[(Key, &str)]) -> Service {
        let (namespace, name) = match self {
            Actor::SameNamespace => ("moto", "thief"),
            Actor::OtherNamespace => ("tenant", "web"),
            Actor::Recreated => ("moto", "web"),
        };
        service(namespace, name, uid, kind, annotations)
    }
}

// === impl Path ===

impl Path {
    /// Whether the actor's call must be refused with an error naming the holder (else it must succeed, or, for
    /// the read-only passes, may do either).
    pub fn refused(self) -> Option<bool> {
        match self {
            Path::Ensure | Path::HostUpdate | Path::Rename { .. } => Some(true),
            Path::Delete { .. } => Some(false),
            Path::Drift | Path::DryRun => None,
        }
    }

    /// Whether `actor` against `victim` is an attack: a re-created incarnation of the victim's own Service
    /// takes its load balancer over by design, so for it only deletion (refused: the UID tag names the other
    /// incarnation) and the dry run apply.
    pub fn applies(self, victim: &Victim, actor: Actor) -> bool {
        actor != Actor::Recreated || !victim.ours || matches!(self, Path::Delete { .. } | Path::DryRun)
    }
}

// === impl Victim ===

impl Victim {
    /// What a refusal must contain: the name, taken, and the holder.
    pub fn refusal(&self) -> [String; 2] {
        [
            format!("load balancer name {} is taken", self.name),
            self.holder.clone(),
        ]
    }

    /// The flavour of the actor's Service: the victim's (an NLB for an ALB's name).
    pub fn actor_kind(&self) -> Kind {
        match self.kind {
            Kind::Classic => Kind::Classic,
            Kind::Network | Kind::Application => Kind::Network,
        }
    }
}

/// What `victim` and the VPC's security groups look like now.
pub async fn seen(w: &World, victim: &Victim) -> Seen {
    let load_balancer = match victim.kind {
        Kind::Classic => classic(w, &victim.name).await,
        Kind::Network | Kind::Application => v2(w, &victim.name).await,
    };
    let filters = [Filter::new("vpc-id", [w.vpc.as_str()])];
    let groups = w.adapter.ec2().security_groups(&filters).await.unwrap();
    let groups = groups
        .into_iter()
        .map(|g| {
            let mut ingress = g.ingress;
            ingress.sort();
            (g.id.to_string(), (ingress, g.tags))
        })
        .collect();
    Seen {
        load_balancer,
        groups,
    }
}

async fn classic(w: &World, name: &str) -> Option<(Described, Tags)> {
    let mut lb = w.adapter.elb().load_balancer(name).await.unwrap()?;
    lb.instances.sort();
    let tags = w.adapter.elb().tags(name).await.unwrap();
    Some((Described::Classic(lb), tags))
}

async fn v2(w: &World, name: &str) -> Option<(Described, Tags)> {
    let elbv2 = w.adapter.elbv2();
    let mut lb = elbv2.load_balancer(name).await.unwrap()?;
    lb.state.clear();
    let mut listeners = elbv2.listeners(&lb.arn).await.unwrap();
    listeners.sort_by_key(|l| l.port);
    // moto answers TargetGroupNotFound for a load balancer without any.
    let groups = elbv2.target_groups(&lb.arn).await.unwrap_or_default();
    let mut arns: Vec<String> = groups.iter().map(|g| g.arn.clone()).collect();
    arns.push(lb.arn.clone());
    let mut tags = elbv2.tags(&arns).await.unwrap();
    let mut target_groups = Vec::new();
    for group in groups {
        let mut targets: Vec<Target> = elbv2
            .target_health(&group.arn)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.target)
            .collect();
        targets.sort();
        let group_tags = tags.remove(&group.arn).unwrap_or_default();
        target_groups.push((group, group_tags, targets));
    }
    target_groups.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let lb_tags = tags.remove(&lb.arn).unwrap_or_default();
    let described = Described::V2 {
        load_balancer: lb,
        listeners,
        target_groups,
    };
    Some((described, lb_tags))
}

/// The members of what [`seen`] saw: registered instances (Classic) or targets (every target group).
pub fn members(seen: &Seen) -> Vec<String> {
    match &seen.load_balancer {
        Some((Described::Classic(lb), _)) => lb.instances.iter().map(ToString::to_string).collect(),
        Some((Described::V2 { target_groups, .. }, _)) => target_groups
            .iter()
            .flat_map(|(_, _, targets)| targets.iter().map(|t| format!("{}:{}", t.id, t.port)))
            .collect(),
        None => Vec::new(),
    }
}

/// Creates an application load balancer `name` in the world's subnets with `tags`, as another tool would: the
/// adapter makes only NLBs and this crate's tests have no ELBv2 SDK client, so one Query API call goes to moto
/// as plain HTTP (moto reads the service from the credential scope and does not check signatures).
pub async fn plant_alb(w: &World, name: &str, tags: &[(&str, &str)]) {
    let env = TestEnv::get();
    let mut form: Vec<(String, String)> = [
        ("Action", "CreateLoadBalancer"),
        ("Version", "2015-12-01"),
        ("Name", name),
        ("Type", "application"),
        ("Scheme", "internet-facing"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    for (i, subnet) in w.subnets.iter().enumerate() {
        form.push((format!("Subnets.member.{}", i + 1), subnet.clone()));
    }
    for (i, (k, v)) in tags.iter().enumerate() {
        form.push((format!("Tags.member.{}.Key", i + 1), (*k).to_owned()));
        form.push((format!("Tags.member.{}.Value", i + 1), (*v).to_owned()));
    }
    let body: Vec<String> = form
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let body = body.join("&");
    let authority = env
        .aws_endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let region = &env.aws_region;
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/x-www-form-urlencoded; \
         charset=utf-8\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20240101/{region}/\
         elasticloadbalancing/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "CreateLoadBalancer (ALB): {response}"
    );
    let lb = w.adapter.elbv2().load_balancer(name).await.unwrap();
    assert_eq!(lb.map(|lb| lb.lb_type).as_deref(), Some("application"));
}

/// Percent-encoding of a form value (unreserved characters kept).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
