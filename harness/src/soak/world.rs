//! The soak's cluster in moto: a VPC with a public ELB subnet, an owned node security group (every node
//! instance's, so that NLBs add rules to it), a control-plane instance named by an IMDS
//! emulator, the fault proxies the CCM replicas talk to AWS through (one each, so that a replica's calls are
//! counted apart and can fail alone), and the cloud configs (each replica's through its proxy; the tools'
//! straight to moto). Also the foreign resources planted before the run and their snapshot.

use std::{collections::BTreeMap, path::PathBuf};

use ccm_aws_api::{
    Ec2, Elb, Elbv2, Filter, SubnetId, Tags, VpcId,
    ec2::NewSecurityGroup,
    elb::{ClassicListener, NewClassicLoadBalancer},
    elbv2::{NewTargetGroup, TargetGroupHealthCheck},
};
use ccm_aws_sdk::{Adapter, AdapterOptions};
use ccm_testing::{Chaos, ChaosKind, FaultProxy, ImdsEmulator, TestEnv, ec2, unique_name, world};

pub struct World {
    pub id: String,
    pub namespace: String,
    pub raw: ec2::Ec2,
    pub network: world::World,
    /// AWS straight to moto, for the harness's own reads (never faulted).
    pub aws: Adapter,
    /// Replica `k`'s fault proxy in front of moto.
    pub proxies: [FaultProxy; 2],
    /// The cluster's (owned) node security group, every node instance's only group.
    pub node_group: String,
    pub dir: PathBuf,
    /// Replica `k`'s cloud config (every AWS service through its proxy).
    pub ccm_configs: [PathBuf; 2],
    /// The tools' cloud config (straight to moto, no IMDS).
    pub tool_config: PathBuf,
    _imds: ImdsEmulator,
}

impl World {
    pub async fn create(env: &TestEnv) -> anyhow::Result<Self> {
        let raw = ec2::client(env).await;
        let id = unique_name("soak");
        let key = format!("kubernetes.io/cluster/{id}");
        let owned = [(key.as_str(), "owned")];
        let network = world::World::builder(ec2::octet_for(&id))
            .subnet("us-east-1a", &[owned[0], ("kubernetes.io/role/elb", "1")])
            .internet_gateway()
            .build(&raw)
            .await?;
        let control_plane = network.launch(1, &owned).await?;
        let imds = ImdsEmulator::start(&control_plane[0].id, "us-east-1a", &env.aws_region).await?;
        let proxies = [
            FaultProxy::start(&env.aws_endpoint).await?,
            FaultProxy::start(&env.aws_endpoint).await?,
        ];
        let node_group = raw
            .create_security_group()
            .group_name(format!("{id}-nodes"))
            .description("soak: the cluster's nodes")
            .vpc_id(&network.vpc)
            .send()
            .await?
            .group_id()
            .unwrap_or_default()
            .to_owned();
        let tags = [(key.clone(), "owned".to_owned())].into();
        let aws = Adapter::new(&env.aws_config().await, AdapterOptions::default());
        aws.ec2()
            .create_tags(std::slice::from_ref(&node_group), &tags)
            .await?;
        let dir = std::env::temp_dir().join(&id);
        std::fs::create_dir_all(&dir)?;
        let global = "NLBSecurityGroupMode = Managed";
        let ccm_configs = [dir.join("cloud-a.conf"), dir.join("cloud-b.conf")];
        for (path, proxy) in ccm_configs.iter().zip(&proxies) {
            let text = ec2::cloud_config(&env.aws_region, &proxy.url(), &imds.endpoint(), global);
            std::fs::write(path, text)?;
        }
        let external = format!(
            "Region = {}\nVPC = {}\nSubnetID = {}\nKubernetesClusterID = {id}",
            env.aws_region,
            network.vpc,
            network.subnet()
        );
        let tool_config = dir.join("external.conf");
        let text = ec2::cloud_config(&env.aws_region, &env.aws_endpoint, &imds.endpoint(), &external);
        std::fs::write(&tool_config, text)?;
        Ok(Self {
            namespace: id.clone(),
            aws,
            node_group,
            id,
            raw,
            network,
            proxies,
            dir,
            ccm_configs,
            tool_config,
            _imds: imds,
        })
    }

    /// Turns the random faults on (`Some`) or off on both proxies; replica `k`'s from the seed plus `k`.
    pub fn set_chaos(&self, chaos: Option<Chaos>) {
        for (k, proxy) in (0u64..).zip(&self.proxies) {
            proxy.set_chaos(chaos.map(|c| Chaos {
                seed: c.seed.wrapping_add(k),
                ..c
            }));
        }
    }

    /// The faults both proxies injected, per kind.
    pub fn chaos_faults(&self) -> BTreeMap<ChaosKind, u64> {
        let mut out = BTreeMap::new();
        for (kind, n) in self.proxies.iter().flat_map(FaultProxy::chaos_faults) {
            *out.entry(kind).or_default() += n;
        }
        out
    }

    /// The AWS calls both proxies saw, per action.
    pub fn requests_by_action(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (action, n) in self.proxies.iter().flat_map(FaultProxy::requests_by_action) {
            *out.entry(action).or_default() += n;
        }
        out
    }

    pub fn cluster_key(&self) -> String {
        format!("kubernetes.io/cluster/{}", self.id)
    }

    /// Launches an instance of the cluster in its node security group (so that NLBs add their rules to it, and
    /// must take them away again), at `ip` when given: the address of an instance terminated a moment ago.
    pub async fn launch_node(&self, ip: Option<&str>) -> anyhow::Result<ec2::Launched> {
        let key = self.cluster_key();
        let tags = [(key.as_str(), "owned")];
        let group = [self.node_group.as_str()];
        let mut launched = self.network.launch_node(&group, ip, &tags).await?;
        launched
            .pop()
            .ok_or_else(|| anyhow::anyhow!("RunInstances returned no instance"))
    }

    pub async fn terminate(&self, instance: &str) -> anyhow::Result<()> {
        self.raw
            .terminate_instances()
            .instance_ids(instance)
            .send()
            .await?;
        Ok(())
    }
}

/// What the CCM must never touch: another cluster's Classic ELB, security group and target group (tagged for
/// a Service name this run also uses), an untagged group, a group `shared` with this cluster, and an untagged
/// and a `shared` subnet (the latter an ELB subnet the load balancers may use, but never change).
pub struct Foreign {
    pub groups: Vec<String>,
    pub subnets: Vec<String>,
    pub load_balancer: String,
    pub target_group: String,
    /// The untagged group, also given to some NLBs as their own (`security-groups` annotation).
    pub byo_group: String,
}

impl Foreign {
    pub async fn plant(world: &World, first_service: &str) -> anyhow::Result<Self> {
        let other = format!("kubernetes.io/cluster/{}-other", world.id);
        let service_tag = ("kubernetes.io/service-name".to_owned(), first_service.to_owned());
        let tags = |key: &str, value: &str| -> Tags {
            [(key.to_owned(), value.to_owned()), service_tag.clone()].into()
        };
        let vpc = VpcId::new(&world.network.vpc);
        let ec2 = world.aws.ec2();
        let mut lb = format!("a{:0>31}", world.network.vpc.trim_start_matches("vpc-"));
        lb.truncate(32);
        let group = |name: String, tags: Tags| NewSecurityGroup {
            name,
            description: "soak: foreign".into(),
            vpc_id: vpc.clone(),
            tags,
        };
        let foreign_sg = ec2
            .create_security_group(&group(format!("k8s-elb-{lb}"), tags(&other, "owned")))
            .await?;
        let untagged = ec2
            .create_security_group(&group(format!("{}-untagged", world.id), Tags::new()))
            .await?;
        let shared = ec2
            .create_security_group(&group(
                format!("{}-shared", world.id),
                tags(&world.cluster_key(), "shared"),
            ))
            .await?;
        let classic = NewClassicLoadBalancer {
            name: lb.clone(),
            internal: false,
            subnets: vec![SubnetId::new(world.network.subnet())],
            security_groups: vec![foreign_sg.clone()],
            listeners: vec![ClassicListener::new("TCP", 80, "TCP", 30080)],
            tags: tags(&other, "owned"),
        };
        world.aws.elb().create_load_balancer(&classic).await?;
        let target_group = format!("k8s-{}", &lb[1..21]);
        let tg = NewTargetGroup {
            name: target_group.clone(),
            protocol: "TCP".into(),
            port: 30080,
            vpc_id: vpc,
            target_type: ccm_aws_api::elbv2::TargetType::Instance,
            ip_address_type: ccm_aws_api::elbv2::TargetIpFamily::Ipv4,
            health_check: TargetGroupHealthCheck::default(),
            tags: tags(&other, "owned"),
        };
        world.aws.elbv2().create_target_group(&tg).await?;
        let subnets = Self::plant_subnets(world).await?;
        Ok(Self {
            groups: vec![foreign_sg.to_string(), untagged.to_string(), shared.to_string()],
            subnets,
            load_balancer: lb,
            target_group,
            byo_group: untagged.to_string(),
        })
    }

    /// Two subnets of the run's VPC the CCM may read but never change: one `shared` with this cluster and
    /// tagged for ELBs, one untagged.
    async fn plant_subnets(world: &World) -> anyhow::Result<Vec<String>> {
        let octet = ec2::octet_for(&world.id);
        let mut subnets = Vec::new();
        for (k, (zone, tag)) in [("us-east-1b", Some("shared")), ("us-east-1c", None)]
            .into_iter()
            .enumerate()
        {
            let made = world
                .raw
                .create_subnet()
                .vpc_id(&world.network.vpc)
                .cidr_block(format!("10.{octet}.{}.0/20", 32 + 16 * k))
                .availability_zone(zone)
                .send()
                .await?;
            let subnet = made
                .subnet()
                .and_then(|s| s.subnet_id())
                .unwrap_or_default()
                .to_owned();
            if let Some(value) = tag {
                let tags: Tags = [
                    (world.cluster_key(), value.to_owned()),
                    ("kubernetes.io/role/elb".to_owned(), "1".to_owned()),
                ]
                .into();
                world
                    .aws
                    .ec2()
                    .create_tags(std::slice::from_ref(&subnet), &tags)
                    .await?;
            }
            subnets.push(subnet);
        }
        Ok(subnets)
    }

    /// Every foreign resource as text, by ID; anything that changes it changes its text.
    pub async fn snapshot(&self, world: &World) -> anyhow::Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let ec2 = world.aws.ec2();
        let groups = ec2
            .security_groups(&[Filter::new("group-id", self.groups.iter().map(String::as_str))])
            .await?;
        for g in groups {
            let mut g = g;
            g.ingress.sort_by_key(|p| format!("{p:?}"));
            out.insert(g.id.to_string(), format!("{g:?}"));
        }
        let subnets = ec2
            .subnets(&[Filter::new("subnet-id", self.subnets.iter().map(String::as_str))])
            .await?;
        for s in subnets {
            out.insert(
                s.id.to_string(),
                format!("{:?} {:?} {:?}", s.cidr_block, s.availability_zone, s.tags),
            );
        }
        let elb = world.aws.elb();
        let lb = elb.load_balancer(&self.load_balancer).await?;
        let tags = elb.tags(&self.load_balancer).await?;
        out.insert(self.load_balancer.clone(), format!("{lb:?} {tags:?}"));
        let tg = world.aws.elbv2().target_group(&self.target_group).await?;
        let tags = match &tg {
            Some(tg) => world.aws.elbv2().tags(std::slice::from_ref(&tg.arn)).await?,
            None => BTreeMap::new(),
        };
        out.insert(self.target_group.clone(), format!("{tg:?} {tags:?}"));
        Ok(out)
    }
}
