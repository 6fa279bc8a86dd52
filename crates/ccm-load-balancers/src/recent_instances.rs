//! Instances the load balancers read, reused for a short time across Services.
//!
//! Every full ensure reads its target instances (which exist, which of their security groups takes the load
//! balancer's rules). When many Services are ensured one after the other (a cluster's first sync, a fleet of
//! Services created together), each ensure read the same instances again: five Services on 480 Nodes read 2,400
//! instances, a second each on moto, where the Go controller answers from a snapshot of every instance that it
//! keeps with no age limit ("security groups should not change"). Here an instance read within [`REUSE_FOR`]
//! answers again and only the others are asked. A change to an instance's groups within that time is seen by the
//! next ensure after it, as a change made just after the read would be anyway; drift detection and host updates
//! are unaffected beyond that window. Only what was found is kept (an ID EC2 did not show is asked again), and
//! entries older than the window are dropped at every lookup, so the memory held is the last half minute's reads.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    future::Future,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use ccm_aws_api::{
    Ec2, Filter, InstanceId, Result, RouteTableId, SecurityGroupId, Tags,
    ec2::{
        AvailabilityZone, Instance, InstanceTopology, IpPermission, NetworkInterface, NewSecurityGroup,
        RouteTable, SecurityGroup, Subnet,
    },
};
use tokio::time::Instant;

/// How long an instance read by one load balancer's ensure answers the next ones.
pub(crate) const REUSE_FOR: Duration = Duration::from_secs(30);

/// The EC2 port of the load balancers, remembering the instances it read for [`REUSE_FOR`].
#[derive(Debug)]
pub(crate) struct RecentInstances<E> {
    inner: E,
    recent: Mutex<HashMap<InstanceId, (Instance, Instant)>>,
}

impl<E> RecentInstances<E> {
    pub(crate) fn new(inner: E) -> Self {
        Self {
            inner,
            recent: Mutex::new(HashMap::new()),
        }
    }

    /// The instances among `ids` read within [`REUSE_FOR`], and the IDs to ask (each once).
    fn split(&self, ids: &[InstanceId]) -> (Vec<Instance>, Vec<InstanceId>) {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.retain(|_, (_, at)| now.duration_since(*at) < REUSE_FOR);
        let mut known = Vec::new();
        let mut asked = Vec::new();
        for id in ids.iter().collect::<BTreeSet<_>>() {
            match recent.get(id) {
                Some((instance, _)) => known.push(instance.clone()),
                None => asked.push(id.clone()),
            }
        }
        (known, asked)
    }

    fn remember(&self, found: &[Instance]) {
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        for instance in found {
            recent.insert(instance.id.clone(), (instance.clone(), now));
        }
    }
}

impl<E: Ec2 + Sync> Ec2 for RecentInstances<E> {
    fn instances_by_id(&self, ids: &[InstanceId]) -> impl Future<Output = Result<Vec<Instance>>> + Send {
        let (mut known, asked) = self.split(ids);
        async move {
            if !asked.is_empty() {
                let found = self.inner.instances_by_id(&asked).await?;
                self.remember(&found);
                known.extend(found);
            }
            Ok(known)
        }
    }

    fn instances(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<Instance>>> + Send {
        self.inner.instances(filters)
    }

    fn instances_page(
        &self,
        filters: &[Filter],
        token: Option<String>,
    ) -> impl Future<Output = Result<(Vec<Instance>, Option<String>)>> + Send {
        self.inner.instances_page(filters, token)
    }

    fn network_interfaces(
        &self,
        filters: &[Filter],
    ) -> impl Future<Output = Result<Vec<NetworkInterface>>> + Send {
        self.inner.network_interfaces(filters)
    }

    fn availability_zones(&self) -> impl Future<Output = Result<Vec<AvailabilityZone>>> + Send {
        self.inner.availability_zones()
    }

    fn instance_topology(
        &self,
        ids: &[InstanceId],
    ) -> impl Future<Output = Result<Vec<InstanceTopology>>> + Send {
        self.inner.instance_topology(ids)
    }

    fn set_source_dest_check(
        &self,
        instance: &InstanceId,
        enabled: bool,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.set_source_dest_check(instance, enabled)
    }

    fn security_groups(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<SecurityGroup>>> + Send {
        self.inner.security_groups(filters)
    }

    fn create_security_group(
        &self,
        group: &NewSecurityGroup,
    ) -> impl Future<Output = Result<SecurityGroupId>> + Send {
        self.inner.create_security_group(group)
    }

    fn delete_security_group(&self, group: &SecurityGroupId) -> impl Future<Output = Result<()>> + Send {
        self.inner.delete_security_group(group)
    }

    fn authorize_ingress(
        &self,
        group: &SecurityGroupId,
        permissions: &[IpPermission],
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.authorize_ingress(group, permissions)
    }

    fn revoke_ingress(
        &self,
        group: &SecurityGroupId,
        permissions: &[IpPermission],
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.revoke_ingress(group, permissions)
    }

    fn subnets(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<Subnet>>> + Send {
        self.inner.subnets(filters)
    }

    fn route_tables(&self, filters: &[Filter]) -> impl Future<Output = Result<Vec<RouteTable>>> + Send {
        self.inner.route_tables(filters)
    }

    fn create_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.create_route(table, destination_cidr, instance)
    }

    fn replace_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
        instance: &InstanceId,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.replace_route(table, destination_cidr, instance)
    }

    fn delete_route(
        &self,
        table: &RouteTableId,
        destination_cidr: &str,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.delete_route(table, destination_cidr)
    }

    fn create_tags(&self, resources: &[String], tags: &Tags) -> impl Future<Output = Result<()>> + Send {
        self.inner.create_tags(resources, tags)
    }

    fn delete_tags(
        &self,
        resources: &[String],
        tags: &BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.inner.delete_tags(resources, tags)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex};

    use ccm_aws_api::ec2::{InstanceState, MockEc2};

    use super::*;

    fn instance(id: &str) -> Instance {
        let mut i = Instance::new(InstanceId::new(id), InstanceState::Running);
        i.security_groups = vec![SecurityGroupId::new("sg-1")];
        i
    }

    /// EC2 knowing i-1 to i-3; records the IDs of every call.
    fn ec2(asked: &Arc<Mutex<Vec<Vec<String>>>>) -> RecentInstances<MockEc2> {
        let mut ec2 = MockEc2::new();
        let asked = asked.clone();
        ec2.expect_instances_by_id().returning(move |ids| {
            asked
                .lock()
                .unwrap()
                .push(ids.iter().map(ToString::to_string).collect());
            let found: Vec<Instance> = ids
                .iter()
                .filter(|id| ["i-1", "i-2", "i-3"].contains(&id.as_str()))
                .map(|id| instance(id.as_str()))
                .collect();
            Box::pin(std::future::ready(Ok(found)))
        });
        RecentInstances::new(ec2)
    }

    fn ids(list: &[&str]) -> Vec<InstanceId> {
        list.iter().map(|i| InstanceId::new(*i)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn instances_read_by_one_ensure_answer_the_next_for_half_a_minute() {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let ec2 = ec2(&asked);
        let mut found = ec2.instances_by_id(&ids(&["i-1", "i-2"])).await.unwrap();
        found.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(found, [instance("i-1"), instance("i-2")]);
        // The next ensure: i-1 and i-2 answer again, only i-3 and the unknown i-9 are asked; i-9 is not kept.
        tokio::time::advance(REUSE_FOR - Duration::from_secs(1)).await;
        let found = ec2
            .instances_by_id(&ids(&["i-2", "i-1", "i-3", "i-9", "i-3"]))
            .await
            .unwrap();
        assert_eq!(found.len(), 3);
        ec2.instances_by_id(&ids(&["i-9"])).await.unwrap();
        // Past the window, i-1 and i-2 are read again; i-3, read later, still answers.
        tokio::time::advance(Duration::from_secs(1)).await;
        ec2.instances_by_id(&ids(&["i-1", "i-2", "i-3"])).await.unwrap();
        assert_eq!(
            *asked.lock().unwrap(),
            [
                vec!["i-1".to_owned(), "i-2".to_owned()],
                vec!["i-3".to_owned(), "i-9".to_owned()],
                vec!["i-9".to_owned()],
                vec!["i-1".to_owned(), "i-2".to_owned()],
            ]
        );
        assert_eq!(
            ec2.recent.lock().unwrap().len(),
            3,
            "only what was found, and only the window's"
        );
    }

    #[tokio::test]
    async fn a_failed_read_keeps_nothing() {
        let mut mock = MockEc2::new();
        let mut calls = 0;
        mock.expect_instances_by_id().returning(move |ids| {
            calls += 1;
            let answer = if calls == 1 {
                Err(ccm_aws_api::AwsError::new(
                    ccm_aws_api::ErrorKind::Transient,
                    "ec2",
                    "DescribeInstances",
                ))
            } else {
                Ok(ids.iter().map(|id| instance(id.as_str())).collect())
            };
            Box::pin(std::future::ready(answer))
        });
        let ec2 = RecentInstances::new(mock);
        assert!(ec2.instances_by_id(&ids(&["i-1"])).await.is_err());
        assert_eq!(ec2.instances_by_id(&ids(&["i-1"])).await.unwrap().len(), 1);
    }
}
