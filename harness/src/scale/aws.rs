//! The scale harness's AWS side in moto: a VPC with a /17 subnet (room for 5,000 instances and more) tagged as
//! the cluster's public ELB subnet, the instances tagged for the cluster, each pool of Nodes in a security group
//! of its own, the CCM's cloud config (a control plane outside the VPC, so no IMDS is needed), and the
//! membership of load balancers as AWS reports it.
//!
//! One group per pool: every load balancer adds rules to the group of its target nodes, and a group holds at
//! most 60 rules (AWS's default quota, which moto enforces): 500 load balancers targeting nodes of one group
//! cannot all be allowed in, whatever the controller. Pools of 100 Nodes in 50 groups hold 10 (500 Services)
//! or 20 (1,000) load balancers' rules each, as clusters of this size split their nodes.

use std::{path::PathBuf, sync::Arc};

use anyhow::Context;

use crate::scale::ccm::Calls;
use ccm_testing::{
    Fault, FaultProxy, GoCloudConfig, TestEnv, Throttling,
    ec2::{self, Launched},
    load_balancers::LoadBalancers,
    unique_name,
    world::World,
};

pub struct Fleet {
    /// The cluster ID (`KubernetesClusterID`), also the value of the Nodes' `scale` label.
    pub id: String,
    /// The instances of the burst's Nodes, in order.
    pub instances: Vec<Launched>,
    network: World,
    /// The cluster tag's key, for an instance launched later.
    key: String,
    /// The security group of each pool, in pool order.
    groups: Vec<String>,
    /// The cloud config of the CCM.
    pub config: PathBuf,
    /// Where the CCM logs.
    pub dir: PathBuf,
    lbs: LoadBalancers,
    /// Between the CCM and moto: throttles the calls as AWS does (unless the run is unthrottled), answers
    /// DescribeInstanceTopology, which moto lacks, and counts the Go controller's calls (it has no per-operation
    /// metric of its own). One proxy per column: the buckets of one AWS account.
    proxy: Arc<FaultProxy>,
}

/// What AWS answers for instance types without topology: no instance (moto answers HTTP 500 instead, and the
/// CCM's best-effort call would wait 3 s on every lookup, which real AWS never makes it do).
const NO_TOPOLOGY: &str = "<DescribeInstanceTopologyResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
    <requestId>scale</requestId><instanceSet/></DescribeInstanceTopologyResponse>";

impl Fleet {
    /// The VPC and `count` instances tagged `kubernetes.io/cluster/<id>=owned`, `pool` at a time, each pool in a
    /// security group of its own (tagged for the cluster); the CCM's calls `throttled` as AWS does, or not.
    /// The harness's own calls (these, and the membership reads) go to moto directly, never through the proxy:
    /// they cost the CCM under measurement no tokens.
    pub async fn create(env: &TestEnv, count: usize, pool: usize, throttled: bool) -> anyhow::Result<Self> {
        let raw = ec2::client(env).await;
        let id = unique_name("scale");
        let key = format!("kubernetes.io/cluster/{id}");
        let octet = ec2::octet_for(&id);
        let owned = [(key.as_str(), "owned")];
        let network = World::builder(octet)
            .subnet_size(17)
            .subnet("us-east-1a", &[owned[0], ("kubernetes.io/role/elb", "1")])
            .internet_gateway()
            .build(&raw)
            .await
            .context("the VPC")?;
        let mut instances = Vec::with_capacity(count);
        let mut groups = Vec::new();
        while instances.len() < count {
            let group = network
                .security_group(&owned)
                .await
                .context("a pool's security group")?;
            let batch = i32::try_from((count - instances.len()).min(pool.max(1)))?;
            instances.extend(network.launch_in(batch, &group, &owned).await?);
            groups.push(group);
        }
        let dir = std::env::temp_dir().join(&id);
        std::fs::create_dir_all(&dir)?;
        let global = format!(
            "Region = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {id}",
            env.aws_region,
            network.vpc,
            network.subnet()
        );
        let proxy = FaultProxy::start(&env.aws_endpoint).await?;
        let answer = Fault::Respond {
            status: 200,
            content_type: "text/xml".to_owned(),
            body: NO_TOPOLOGY.to_owned(),
        };
        proxy.inject("DescribeInstanceTopology", answer, 100_000);
        if throttled {
            proxy.set_throttling(Some(Throttling::aws_documented()));
        }
        // The control plane is outside the VPC: no IMDS is read, so its endpoint is never reached.
        let text = ec2::cloud_config(&env.aws_region, &proxy.url(), "http://127.0.0.1:9", &global);
        let config = dir.join("cloud.conf");
        std::fs::write(&config, text)?;
        Ok(Self {
            id,
            instances,
            network,
            key,
            groups,
            config,
            dir,
            lbs: LoadBalancers::connect(env).await,
            proxy: Arc::new(proxy),
        })
    }

    /// The proxy every call of the CCM under measurement goes through.
    pub fn proxy(&self) -> Arc<FaultProxy> {
        self.proxy.clone()
    }

    /// The calls the proxy answered with a throttling error so far, by action.
    #[allow(clippy::cast_precision_loss)]
    pub fn throttled(&self) -> Calls {
        let counts = self.proxy.throttled_by_action().into_iter();
        counts.map(|(action, n)| (action, n as f64)).collect()
    }

    /// The seconds moto took so far to answer the calls that reached it, by action.
    pub fn moto_secs(&self) -> Calls {
        self.proxy.upstream_secs_by_action().into_iter().collect()
    }

    /// The Go controller's cloud config for this cluster, through the proxy.
    pub fn go_config(&self, env: &TestEnv) -> GoCloudConfig {
        GoCloudConfig::new(
            env,
            &self.id,
            &self.network.vpc,
            self.network.subnet(),
            "us-east-1a",
        )
        .via(&self.proxy.url())
    }

    /// Launches one more instance of the cluster, for a Node joining after the burst: as an autoscaler does, when
    /// it joins, so that the burst's listing holds the burst's instances only (with one more, 5,000 Nodes' listing
    /// is six pages, not five).
    /// It joins pool 0, in that pool's group.
    pub async fn launch_one(&self) -> anyhow::Result<Launched> {
        let owned = [(self.key.as_str(), "owned")];
        let group = self.groups.first().context("no pool")?;
        let mut launched = self.network.launch_in(1, group, &owned).await?;
        launched.pop().context("RunInstances launched nothing")
    }

    /// The instances registered with the load balancer `name` (an NLB's targets when `nlb`), sorted.
    pub async fn members(&self, name: &str, nlb: bool) -> Vec<String> {
        let seen = if nlb {
            self.lbs.network(name).await
        } else {
            self.lbs.classic(name).await
        };
        seen.map(|s| s.members).unwrap_or_default()
    }
}
