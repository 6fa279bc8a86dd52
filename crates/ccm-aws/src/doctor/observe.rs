//! The AWS side of the report, read through the ports: every Classic ELB, ELBv2 load balancer and target group
//! of the region with their tags (20 per `DescribeTags`), the security groups of the VPC, the cluster's route
//! tables, the cluster's instances and the instances routes point to; then, for each uninitialized Node, the
//! instance the CCM would look up for it.

use std::collections::{BTreeMap, BTreeSet};

use ccm_aws_api::{
    AwsError, Ec2, Elb, Elbv2, Filter, InstanceId, InstanceRef, ProviderId, RouteTableId, Tags,
    ec2::{Instance, RouteTable, SecurityGroup},
    elb::ClassicLoadBalancer,
    elbv2::{LoadBalancerV2, TargetGroup},
};
use ccm_tagging::LEGACY_CLUSTER_TAG;

use super::{DoctorError, NodeLookup, Ports, Scope, Snapshot, UNINITIALIZED_TAINT, node_instance_id};

/// AWS's limit on resources per ELBv2 `DescribeTags`.
const ARNS_PER_TAG_CALL: usize = 20;

/// What AWS holds, as far as the report cares.
#[derive(Debug, Default)]
pub(super) struct Inventory {
    /// Every Classic ELB of the region with its tags.
    pub classic: Vec<(ClassicLoadBalancer, Tags)>,
    /// Every ELBv2 load balancer of the region; tags are read for NLBs only (the others stay empty).
    pub v2: Vec<(LoadBalancerV2, Tags)>,
    /// Every target group of the region with its tags.
    pub target_groups: Vec<(TargetGroup, Tags)>,
    /// The security groups of the cluster's VPC (of the region when it is unknown).
    pub groups: Vec<SecurityGroup>,
    /// The cluster's route tables.
    pub route_tables: Vec<RouteTable>,
    /// The cluster's instances (any state) and the instances routes point to, by ID.
    pub instances: BTreeMap<InstanceId, Instance>,
    /// The instances behind Nodes that are not in `instances`: for the report, and for `delete`'s check that the
    /// apiserver is the cluster's; never what makes a finding deletable.
    pub node_instances: BTreeMap<InstanceId, Instance>,
}

/// Reads the [`Inventory`].
pub(super) async fn aws<E, L, V>(ports: Ports<'_, E, L, V>, scope: &Scope) -> Result<Inventory, DoctorError>
where
    E: Ec2 + Sync,
    L: Elb + Sync,
    V: Elbv2 + Sync,
{
    let classic = classic(ports.elb).await?;
    let v2 = network(ports.elbv2).await?;
    let target_groups = target_groups(ports.elbv2).await?;
    let filters: Vec<Filter> = scope
        .vpc_id
        .iter()
        .map(|vpc| Filter::new("vpc-id", [vpc.as_str()]))
        .collect();
    let groups = ports
        .ec2
        .security_groups(&filters)
        .await
        .map_err(aws_error("listing security groups"))?;
    let route_tables = route_tables(ports.ec2, scope).await?;
    let instances = instances(ports.ec2, scope, &route_tables).await?;
    Ok(Inventory {
        classic,
        v2,
        target_groups,
        groups,
        route_tables,
        instances,
        node_instances: BTreeMap::new(),
    })
}

/// Every Classic ELB with its tags.
async fn classic<L: Elb + Sync>(elb: &L) -> Result<Vec<(ClassicLoadBalancer, Tags)>, DoctorError> {
    let all = elb
        .all_load_balancers()
        .await
        .map_err(aws_error("listing Classic load balancers"))?;
    let names: Vec<String> = all.iter().map(|lb| lb.name.clone()).collect();
    let mut tags = elb
        .tags_of(&names)
        .await
        .map_err(aws_error("reading Classic load balancer tags"))?;
    Ok(all
        .into_iter()
        .map(|lb| {
            let t = tags.remove(&lb.name).unwrap_or_default();
            (lb, t)
        })
        .collect())
}

/// Every ELBv2 load balancer, with the tags of the NLBs.
async fn network<V: Elbv2 + Sync>(elbv2: &V) -> Result<Vec<(LoadBalancerV2, Tags)>, DoctorError> {
    let all = elbv2
        .all_load_balancers()
        .await
        .map_err(aws_error("listing ELBv2 load balancers"))?;
    let arns: Vec<String> = all
        .iter()
        .filter(|lb| lb.lb_type == "network")
        .map(|lb| lb.arn.clone())
        .collect();
    let mut tags = tags_v2(elbv2, &arns).await?;
    Ok(all
        .into_iter()
        .map(|lb| {
            let t = tags.remove(&lb.arn).unwrap_or_default();
            (lb, t)
        })
        .collect())
}

/// Every target group with its tags.
async fn target_groups<V: Elbv2 + Sync>(elbv2: &V) -> Result<Vec<(TargetGroup, Tags)>, DoctorError> {
    let all = elbv2
        .all_target_groups()
        .await
        .map_err(aws_error("listing target groups"))?;
    let arns: Vec<String> = all.iter().map(|g| g.arn.clone()).collect();
    let mut tags = tags_v2(elbv2, &arns).await?;
    Ok(all
        .into_iter()
        .map(|g| {
            let t = tags.remove(&g.arn).unwrap_or_default();
            (g, t)
        })
        .collect())
}

/// The instance lookups of the uninitialized Nodes, by Node name, made as the CCM makes them: by the provider
/// ID's instance, else by the name (an instance ID, or a private DNS name).
pub(super) async fn uninitialized_nodes<E: Ec2 + Sync>(
    ec2: &E,
    scope: &Scope,
    snapshot: &Snapshot,
) -> Result<BTreeMap<String, NodeLookup>, DoctorError> {
    let mut out = BTreeMap::new();
    for node in snapshot.nodes.iter().filter(|n| scope.selects_node(n)) {
        let tainted = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT));
        let Some(name) = node.metadata.name.clone().filter(|_| tainted) else {
            continue;
        };
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        let lookup = match provider_id {
            Some(pid) => match ProviderId::ec2_instance_of(&pid) {
                Some(id) => by_id(ec2, format!("provider ID {pid}"), id).await?,
                None => NodeLookup {
                    by: format!("provider ID {pid}"),
                    key: pid,
                    found: Vec::new(),
                    unparsable: true,
                },
            },
            None => match InstanceRef::from_node_name(&name).and_then(Result::ok) {
                Some(InstanceRef::Ec2(id)) => by_id(ec2, "Node name (an instance ID)".to_owned(), id).await?,
                _ => {
                    let found = ec2
                        .instances(&[Filter::new("private-dns-name", [name.as_str()])])
                        .await
                        .map_err(aws_error("looking up the instances of uninitialized Nodes"))?;
                    NodeLookup {
                        by: "Node name (a private DNS name)".to_owned(),
                        key: name.clone(),
                        found,
                        unparsable: false,
                    }
                }
            },
        };
        out.insert(name, lookup);
    }
    Ok(out)
}

async fn by_id<E: Ec2 + Sync>(ec2: &E, by: String, id: InstanceId) -> Result<NodeLookup, DoctorError> {
    let found = ec2
        .instances_by_id(std::slice::from_ref(&id))
        .await
        .map_err(aws_error("looking up the instances of uninitialized Nodes"))?;
    Ok(NodeLookup {
        by,
        key: id.into_string(),
        found,
        unparsable: false,
    })
}

/// ELBv2 tags, 20 ARNs a call; a batch naming a resource deleted since the listing is asked ARN by ARN.
async fn tags_v2<V: Elbv2 + Sync>(elbv2: &V, arns: &[String]) -> Result<BTreeMap<String, Tags>, DoctorError> {
    let mut out = BTreeMap::new();
    for chunk in arns.chunks(ARNS_PER_TAG_CALL) {
        match elbv2.tags(chunk).await {
            Ok(found) => out.extend(found),
            Err(err) if err.is_not_found() => {
                for arn in chunk {
                    match elbv2.tags(std::slice::from_ref(arn)).await {
                        Ok(found) => out.extend(found),
                        Err(err) if err.is_not_found() => {}
                        Err(err) => return Err(aws_error("reading ELBv2 tags")(err)),
                    }
                }
            }
            Err(err) => return Err(aws_error("reading ELBv2 tags")(err)),
        }
    }
    Ok(out)
}

/// The cluster's route tables, found as the route controller finds them: the configured ones, else those tagged
/// for the cluster (owned or shared).
async fn route_tables<E: Ec2 + Sync>(ec2: &E, scope: &Scope) -> Result<Vec<RouteTable>, DoctorError> {
    let cluster = &scope.cluster;
    let filters = if scope.route_table_ids.is_empty() {
        let mut f = vec![Filter::new(
            "tag-key",
            [cluster.key(), LEGACY_CLUSTER_TAG.to_owned()],
        )];
        f.extend(scope.vpc_id.iter().map(|v| Filter::new("vpc-id", [v.as_str()])));
        f
    } else {
        vec![Filter::new(
            "route-table-id",
            scope.route_table_ids.iter().map(RouteTableId::as_str),
        )]
    };
    let mut tables = ec2
        .route_tables(&filters)
        .await
        .map_err(aws_error("listing route tables"))?;
    if scope.route_table_ids.is_empty() {
        tables.retain(|t| cluster.is_tagged(&t.tags));
    }
    tables.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(tables)
}

/// The cluster-tagged instances (any state), plus those routes point to.
async fn instances<E: Ec2 + Sync>(
    ec2: &E,
    scope: &Scope,
    tables: &[RouteTable],
) -> Result<BTreeMap<InstanceId, Instance>, DoctorError> {
    let filters = [Filter::new(
        "tag-key",
        [scope.cluster.key(), LEGACY_CLUSTER_TAG.to_owned()],
    )];
    let mut out: BTreeMap<InstanceId, Instance> = ec2
        .instances(&filters)
        .await
        .map_err(aws_error("listing the cluster's instances"))?
        .into_iter()
        .map(|i| (i.id.clone(), i))
        .collect();
    let targets: BTreeSet<InstanceId> = tables
        .iter()
        .flat_map(|t| &t.routes)
        .filter_map(|r| r.instance_id.clone())
        .filter(|id| !out.contains_key(id))
        .collect();
    if !targets.is_empty() {
        let ids: Vec<InstanceId> = targets.into_iter().collect();
        let found = ec2
            .instances_by_id(&ids)
            .await
            .map_err(aws_error("describing the instances routes point to"))?;
        out.extend(found.into_iter().map(|i| (i.id.clone(), i)));
    }
    Ok(out)
}

/// The instances Nodes name by provider ID that `known` lacks: those without the cluster tag, or gone.
pub(super) async fn node_instances<E: Ec2 + Sync>(
    ec2: &E,
    snapshot: &Snapshot,
    known: &BTreeMap<InstanceId, Instance>,
) -> Result<BTreeMap<InstanceId, Instance>, DoctorError> {
    let ids: BTreeSet<InstanceId> = snapshot
        .nodes
        .iter()
        .filter_map(node_instance_id)
        .filter(|id| !known.contains_key(id))
        .collect();
    if ids.is_empty() {
        return Ok(BTreeMap::new());
    }
    let ids: Vec<InstanceId> = ids.into_iter().collect();
    Ok(ec2
        .instances_by_id(&ids)
        .await
        .map_err(aws_error("describing the instances behind Nodes"))?
        .into_iter()
        .map(|i| (i.id.clone(), i))
        .collect())
}

fn aws_error(what: &'static str) -> impl Fn(AwsError) -> DoctorError {
    move |source| DoctorError::Aws {
        what,
        source: Box::new(source),
    }
}
