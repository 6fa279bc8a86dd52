//! Service lifecycles, one slot at a time: create with a random spec (sometimes deleted at once, while its load
//! balancer is being made), wait until it converged, change it up to three times (waiting each time; a flavour
//! flip deletes and re-creates the Service, as the type cannot change after creation), delete it and wait until
//! both the Service and its load balancer are gone. Convergence is read from moto directly: status hostname,
//! scheme, listener ports, members (the labelled Nodes' instances for a Service with node labels), security
//! groups and their TCP ingress (ports x source ranges), a Classic ELB's health-check interval, and the rules
//! that let a Classic ELB reach its targets (`reach.rs`).

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use ccm_aws_api::{Ec2, Elb, Elbv2, Filter};
use ccm_load_balancers::classic::node_rules::load_balancer_ports;
use ccm_testing::{load_balancers::name_for_uid, services};
use kube::api::PostParams;
use rand::{RngExt, SeedableRng, rngs::StdRng};
use tokio::time::Instant;

use crate::soak::{
    Soak, members,
    spec::{Change, Spec},
};

/// A Service left standing at the end of its slot, for the final checks.
pub struct Kept {
    pub name: String,
    pub spec: Spec,
}

const SLOTS: u64 = 4;

/// Runs `lifecycles` lifecycles in four slots; the Services kept by the slots that finished. Past `limit`, the
/// slots are stopped and a stall is recorded.
pub async fn run(soak: &Arc<Soak>, lifecycles: u32, limit: Option<Duration>) -> anyhow::Result<Vec<Kept>> {
    let started = Instant::now();
    let mut slots = tokio::task::JoinSet::new();
    for s in 0..SLOTS {
        let count = u64::from(lifecycles) / SLOTS + u64::from(s < u64::from(lifecycles) % SLOTS);
        slots.spawn(slot(soak.clone(), s, usize::try_from(count)?));
    }
    let mut kept = Vec::new();
    loop {
        let next = match limit {
            Some(limit) => tokio::time::timeout_at(started + limit, slots.join_next()).await,
            None => Ok(slots.join_next().await),
        };
        match next {
            Ok(Some(done)) => kept.extend(done??),
            Ok(None) => return Ok(kept),
            Err(_) => {
                slots.abort_all();
                let done = soak.stats().lifecycles;
                soak.stats().stuck.push(format!(
                    "time limit of {} s reached after {done} of {lifecycles} lifecycles",
                    limit.unwrap_or_default().as_secs()
                ));
                return Ok(kept);
            }
        }
    }
}

/// Runs `count` lifecycles in slot `slot`; the last one's Service is kept (not deleted).
pub async fn slot(soak: Arc<Soak>, slot: u64, count: usize) -> anyhow::Result<Option<Kept>> {
    let mut rng = StdRng::seed_from_u64(soak.seed ^ (slot + 1).wrapping_mul(0x9e37_79b9));
    for n in 0..count {
        let last = n + 1 == count;
        let name = if slot == 0 && n == 0 {
            soak.first_service.clone()
        } else {
            format!("s{slot}-{n}")
        };
        let mut spec = Spec::random(&mut rng);
        create(&soak, &name, &spec).await?;
        let started = Instant::now();
        if !last && rng.random_bool(0.12) {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..800))).await;
            soak.stats().deleted_while_creating += 1;
            delete(&soak, &name).await?;
            continue;
        }
        soak.converge(&name, &spec, started).await?;
        if !changes(&soak, &name, &mut spec, &mut rng).await? {
            continue;
        }
        if last {
            return Ok(Some(Kept { name, spec }));
        }
        delete(&soak, &name).await?;
    }
    Ok(None)
}

/// Zero to three random changes, each waited for; `false` when the Service is gone (a flip's deletion stalled).
async fn changes(soak: &Soak, name: &str, spec: &mut Spec, rng: &mut StdRng) -> anyhow::Result<bool> {
    for _ in 0..rng.random_range(0..=3) {
        let change = spec.mutate(rng);
        *soak.stats().changes.entry(format!("{change:?}")).or_default() += 1;
        if change == Change::Flavour {
            // The type cannot change after creation (docs/annotations.md): the CCM refuses it, and the operator
            // deletes and re-creates the Service with the other type.
            if !delete(soak, name).await? {
                return Ok(false);
            }
            create(soak, name, spec).await?;
        } else {
            update(soak, name, spec).await?;
        }
        soak.converge(name, spec, Instant::now()).await?;
    }
    Ok(true)
}

async fn create(soak: &Soak, name: &str, spec: &Spec) -> anyhow::Result<()> {
    let mut svc = services::load_balancer(name, &soak.world.namespace, &[], &[]);
    spec.write(&mut svc, &soak.byo_group);
    soak.services.create(&PostParams::default(), &svc).await?;
    soak.live_specs().insert(name.to_owned(), spec.clone());
    Ok(())
}

/// Writes `spec` into the Service, again on a conflict (the CCM writes its status and finalizer meanwhile).
async fn update(soak: &Soak, name: &str, spec: &Spec) -> anyhow::Result<()> {
    soak.live_specs().insert(name.to_owned(), spec.clone());
    for _ in 0..20 {
        let mut svc = soak.services.get(name).await?;
        spec.write(&mut svc, &soak.byo_group);
        match soak.services.replace(name, &PostParams::default(), &svc).await {
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            other => return Ok(other.map(drop)?),
        }
    }
    anyhow::bail!("{name}: 20 conflicts in a row")
}

/// Deletes the Service and waits until it and its load balancers are gone; `false` (and a stall recorded) when
/// they are not within the timeout.
pub async fn delete(soak: &Soak, name: &str) -> anyhow::Result<bool> {
    let uid = soak.services.get_opt(name).await?.and_then(|s| s.metadata.uid);
    soak.live_specs().remove(name);
    soak.services.delete(name, &Default::default()).await?;
    soak.count_lifecycle();
    let lb = uid.as_deref().map(name_for_uid).unwrap_or_default();
    let started = Instant::now();
    while started.elapsed() < soak.timeout {
        let svc_gone = soak.services.get_opt(name).await?.is_none();
        if svc_gone && !soak.lb_exists(&lb).await.unwrap_or(true) {
            soak.stats().deletions.push(started.elapsed());
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    soak.stats().stuck.push(format!(
        "{name}: not gone {} s after its deletion",
        soak.timeout.as_secs()
    ));
    Ok(false)
}

impl Soak {
    /// Counts a lifecycle (a Service deleted); prints the progress every 25.
    pub fn count_lifecycle(&self) {
        let mut stats = self.stats();
        stats.lifecycles += 1;
        if stats.lifecycles.is_multiple_of(25) {
            println!("{} lifecycles", stats.lifecycles);
        }
    }

    /// Waits until the Service matches `spec` in AWS; records the time since `since`, or the failure.
    pub async fn converge(&self, name: &str, spec: &Spec, since: Instant) -> anyhow::Result<bool> {
        let mut last = String::new();
        while since.elapsed() < self.timeout {
            // A read racing the CCM (a target group replaced meanwhile) is a "not yet", never the end of the run.
            match self.mismatch(name, spec).await {
                Ok(None) => {
                    self.note_sharing(name, spec);
                    self.stats().convergence.push(since.elapsed());
                    return Ok(true);
                }
                Ok(Some(why)) => last = why,
                Err(e) => last = format!("reading AWS: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.stats()
            .unconverged
            .push(format!("{name} ({spec:?}): {last}"));
        Ok(false)
    }

    async fn lb_exists(&self, name: &str) -> anyhow::Result<bool> {
        if name.is_empty() {
            return Ok(false);
        }
        let aws = &self.world.aws;
        Ok(
            aws.elb().load_balancer(name).await?.is_some()
                || aws.elbv2().load_balancer(name).await?.is_some(),
        )
    }

    /// What still differs between the Service's spec, its status and its load balancer in moto; `None` when
    /// nothing does.
    pub async fn mismatch(&self, name: &str, spec: &Spec) -> anyhow::Result<Option<String>> {
        let Some(svc) = self.services.get_opt(name).await? else {
            return Ok(Some("the Service is gone".into()));
        };
        let lb = name_for_uid(svc.metadata.uid.as_deref().unwrap_or_default());
        let hostname = services::ingress_hostname(&svc);
        let expected = self.expected_members(spec.node_labels).await?;
        let aws = &self.world.aws;
        let (classic, network) = (
            aws.elb().load_balancer(&lb).await?,
            aws.elbv2().load_balancer(&lb).await?,
        );
        // A Classic ELB's source group (its first) and the ports it sends to on the nodes.
        let mut reach = None;
        let (dns, internal, ports, members, groups) = match (spec.nlb, classic, network) {
            (false, Some(c), None) => {
                let source = c.security_groups.first().map(ToString::to_string);
                reach = source.map(|s| (s, load_balancer_ports(&c)));
                let interval = c.health_check.as_ref().map(|h| h.interval);
                if interval != Some(spec.interval.map_or(10, |i| i as i32)) {
                    return Ok(Some(format!("health-check interval {interval:?}")));
                }
                let ports = c.listeners.iter().map(|l| l.load_balancer_port).collect();
                let members = c.instances.iter().map(|i| i.to_string()).collect();
                (c.dns_name, c.internal, ports, members, c.security_groups)
            }
            (true, None, Some(n)) => {
                let listeners = aws.elbv2().listeners(&n.arn).await?;
                let ports = listeners.iter().map(|l| l.port).collect();
                let members = members::nlb_members(aws.elbv2(), &listeners).await?;
                (n.dns_name, n.internal, ports, members, n.security_groups)
            }
            (_, c, n) => return Ok(Some(format!("classic {}, network {}", c.is_some(), n.is_some()))),
        };
        let mut ports: Vec<i32> = ports;
        ports.sort_unstable();
        let groups: Vec<String> = groups.iter().map(ToString::to_string).collect();
        let wrong = [
            (
                hostname.as_deref() != Some(dns.as_str()),
                format!("status {hostname:?}, DNS name {dns}"),
            ),
            (internal != spec.internal, format!("internal {internal}")),
            (ports != spec.ports, format!("listener ports {ports:?}")),
            (
                members != expected,
                format!("members {members:?}, Nodes {expected:?}"),
            ),
        ];
        if let Some((_, why)) = wrong.into_iter().find(|(bad, _)| *bad) {
            return Ok(Some(why));
        }
        match (self.groups_mismatch(&groups, spec).await?, reach) {
            (Some(why), _) => Ok(Some(why)),
            (None, Some((source, ports))) => self.node_rules_mismatch(&source, &expected, &ports).await,
            (None, None) => Ok(None),
        }
    }

    /// The load balancer's groups: the given one (an NLB's `security-groups`), or one managed group whose TCP
    /// ingress is exactly every listener port from every source range (`0.0.0.0/0` when none).
    async fn groups_mismatch(&self, groups: &[String], spec: &Spec) -> anyhow::Result<Option<String>> {
        if spec.byo_group {
            let ok = groups == [self.byo_group.clone()];
            return Ok((!ok).then(|| format!("security groups {groups:?}, given {}", self.byo_group)));
        }
        let [group] = groups else {
            return Ok(Some(format!(
                "security groups {groups:?}, want one managed group"
            )));
        };
        if *group == self.byo_group {
            return Ok(Some(format!("security groups {groups:?}: still the given group")));
        }
        let filter = Filter::new("group-id", [group.as_str()]);
        let read = self.world.aws.ec2().security_groups(&[filter]).await?;
        let rules: BTreeSet<(i32, String)> = read
            .iter()
            .flat_map(|g| &g.ingress)
            .filter(|p| p.protocol == "tcp" || p.protocol == "6")
            .flat_map(|p| {
                p.ip_ranges
                    .iter()
                    .map(|r| (p.from_port.unwrap_or(-1), r.cidr.clone()))
            })
            .collect();
        let default = ["0.0.0.0/0".to_owned()];
        let ranges: &[String] = if spec.ranges.is_empty() {
            &default
        } else {
            &spec.ranges
        };
        let want: BTreeSet<(i32, String)> = spec
            .ports
            .iter()
            .flat_map(|p| ranges.iter().map(|r| (*p, r.clone())))
            .collect();
        Ok((rules != want).then(|| format!("group {group} TCP ingress {rules:?}")))
    }
}
