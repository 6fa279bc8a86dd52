//! The other load balancers on the nodes' security groups, as a handover reads them. AWS keeps one rule once,
//! under the description of the load balancer that made it; when another needs the same rule (two NLBs in the
//! same subnets, or one group given to a Classic ELB and an NLB with kube-proxy's shared health port), the one
//! giving it up hands it over instead of revoking it. Here: the descriptions that name a rule's load balancer,
//! for both flavours, and the reads of what the named load balancers need. The handovers are
//! `classic::node_rules::network_heirs` and `nlb::node_rules::find_heirs`.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{Elb, Elbv2, SecurityGroupId, SubnetId, elb::ClassicLoadBalancer, elbv2::TargetGroup};

use crate::Error;

/// The description prefix of a Classic ELB's node rules: `kubernetes.io/rule/elb=<load balancer name>`.
pub const NODE_RULE_PREFIX: &str = "kubernetes.io/rule/elb=";
/// The description prefix of an NLB's client rules: `kubernetes.io/rule/nlb/client=<load balancer name>`.
pub const CLIENT_RULE_PREFIX: &str = "kubernetes.io/rule/nlb/client=";
/// The description prefix of an NLB's health check rules: `kubernetes.io/rule/nlb/health=<load balancer name>`.
pub const HEALTH_RULE_PREFIX: &str = "kubernetes.io/rule/nlb/health=";

/// The Classic ELB a node rule's description names.
pub(crate) fn classic_owner(description: &str) -> Option<&str> {
    description.strip_prefix(NODE_RULE_PREFIX)
}

/// The NLB a node rule's description names (a client or a health rule's).
pub(crate) fn network_owner(description: &str) -> Option<&str> {
    description
        .strip_prefix(CLIENT_RULE_PREFIX)
        .or_else(|| description.strip_prefix(HEALTH_RULE_PREFIX))
}

/// The port of a Classic health check target: `TCP:30080`, `HTTP:10256/healthz`.
pub(crate) fn classic_health_port(target: &str) -> Option<i32> {
    let (_, rest) = target.split_once(':')?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The ports an observed Classic ELB sends to: its listeners' instance ports and its health check port.
pub fn load_balancer_ports(lb: &ClassicLoadBalancer) -> BTreeSet<i32> {
    let mut ports: BTreeSet<i32> = lb.listeners.iter().map(|l| l.instance_port).collect();
    ports.extend(
        lb.health_check
            .as_ref()
            .and_then(|h| classic_health_port(&h.target)),
    );
    ports
}

/// What the Classic ELBs named `names` need on their nodes: per one that exists, the group its node rules come
/// from (its first) and the ports it sends to. One `DescribeLoadBalancers` per name.
pub(crate) async fn classic_needs<L: Elb>(
    elb: &L,
    names: &BTreeSet<&str>,
) -> Result<BTreeMap<String, (SecurityGroupId, BTreeSet<i32>)>, Error> {
    let mut needs = BTreeMap::new();
    for name in names {
        let found = elb
            .load_balancer(name)
            .await
            .map_err(Error::aws("reading the Classic ELBs that use the nodes' groups"))?;
        if let Some(lb) = found
            && let Some(source) = lb.security_groups.first()
        {
            needs.insert((*name).to_owned(), (source.clone(), load_balancer_ports(&lb)));
        }
    }
    Ok(needs)
}

/// What one NLB shows of its nodes' needs.
pub(crate) struct NetworkNeeds {
    /// Its security groups (the source of its rules when it has any).
    pub security_groups: Vec<SecurityGroupId>,
    /// Its subnets (the sources of its health rules when it has no groups).
    pub subnets: Vec<SubnetId>,
    /// The ports of its target groups that carry TCP (its client rules).
    pub client_ports: BTreeSet<i32>,
    /// Its target groups' health check ports.
    pub health_ports: BTreeSet<i32>,
}

/// Reads the load balancers named `names` that exist (with `uses`, only the NLBs that have that security group):
/// one `DescribeLoadBalancers` per name, one `DescribeTargetGroups` per load balancer kept. `context` says why,
/// for the error.
pub(crate) async fn network_needs<V: Elbv2>(
    elbv2: &V,
    names: &BTreeSet<&str>,
    uses: Option<&SecurityGroupId>,
    context: &'static str,
) -> Result<BTreeMap<String, NetworkNeeds>, Error> {
    let mut out = BTreeMap::new();
    for name in names {
        let Some(lb) = elbv2.load_balancer(name).await.map_err(Error::aws(context))? else {
            continue;
        };
        if uses.is_some_and(|g| lb.lb_type != "network" || !lb.security_groups.contains(g)) {
            continue;
        }
        let groups = elbv2.target_groups(&lb.arn).await.map_err(Error::aws(context))?;
        let needs = NetworkNeeds {
            client_ports: groups
                .iter()
                .filter(|tg| carries_tcp(&tg.protocol))
                .map(|tg| tg.port)
                .collect(),
            health_ports: groups.iter().filter_map(network_health_port).collect(),
            subnets: lb
                .availability_zones
                .iter()
                .filter_map(|z| z.subnet_id.clone())
                .collect(),
            security_groups: lb.security_groups,
        };
        out.insert((*name).to_owned(), needs);
    }
    Ok(out)
}

/// What the NLBs named `names` need from their security group `source` on the nodes, for Classic ELBs using the
/// same group: per NLB that exists and uses `source`, each `tcp` port with the description of its rule (client
/// ports as client rules, other health check ports as health rules). One `DescribeLoadBalancers` per name and
/// one `DescribeTargetGroups` per NLB using `source`.
pub(crate) async fn network_needs_from<V: Elbv2>(
    elbv2: &V,
    source: &SecurityGroupId,
    names: &BTreeSet<&str>,
) -> Result<BTreeMap<String, BTreeMap<i32, String>>, Error> {
    let context = "reading the NLBs that use the same security group";
    let needs = network_needs(elbv2, names, Some(source), context).await?;
    Ok(needs
        .into_iter()
        .map(|(name, needs)| {
            let mut ports: BTreeMap<i32, String> = needs
                .client_ports
                .iter()
                .map(|port| (*port, format!("{CLIENT_RULE_PREFIX}{name}")))
                .collect();
            for port in needs.health_ports {
                ports
                    .entry(port)
                    .or_insert_with(|| format!("{HEALTH_RULE_PREFIX}{name}"));
            }
            (name, ports)
        })
        .collect())
}

/// Whether a target group's protocol reaches the nodes over TCP.
fn carries_tcp(protocol: &str) -> bool {
    matches!(protocol.to_ascii_uppercase().as_str(), "TCP" | "TLS" | "TCP_UDP")
}

/// The port a target group's health check probes.
fn network_health_port(tg: &TargetGroup) -> Option<i32> {
    match tg.health_check.port.as_deref() {
        None | Some("traffic-port") => Some(tg.port),
        Some(port) => port.parse().ok(),
    }
}
