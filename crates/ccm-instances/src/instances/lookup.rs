//! Finding the instances (or Fargate interfaces) of many nodes in as few EC2 calls as the limits allow.
//!
//! Nodes named by private DNS name (kubelets without a provider ID) are the costly case: beyond 200 names the
//! only single request is a listing of the whole cluster (its tag). A burst of new Nodes arrives in several
//! batches, and each batch would list the whole cluster again; so the last listing answers later batches for
//! [`LISTING_REUSE`](crate::LISTING_REUSE), and names it does not hold are asked by name when that is fewer
//! calls than a new listing.
//! Until a listing has shown the cluster's size, only the first batch is asked by name: a burst's first batches
//! are small (the Nodes registered before the controller looked), and asking each by name would cost a call
//! apiece on top of the listing the burst needs anyway.
//!
//! AWS reuses private addresses, and so names: an instance launched into a terminated one's address answers to
//! its name. A listing taken before a Node was created may show the dead instance under the Node's name, and a
//! provider ID written from it could never be corrected (it is immutable). So a listing answers a Node only if
//! it was taken after the Node was created; an older listing's answer is confirmed by ID first (one
//! `DescribeInstances` per 1,000 such Nodes: the instance must still run under that name), else the name is
//! asked afresh. The listing is asked page by page, only as far as a lookup needs it (`listing`).

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    net::IpAddr,
    sync::Arc,
    time::SystemTime,
};

use ccm_aws_api::{
    CatalogInstance, CatalogLookup, Ec2, Filter, Freshness, InstanceId,
    ec2::{InstanceState, NetworkInterface},
};

use super::{AwsInstances, Found, LIVE_STATES, Lookup, Target, listing::wall_clock};
use crate::{IDS_PER_LOOKUP, InstancesError, RECENT_READ, VALUES_PER_FILTER};

/// Whether a lookup may be answered from the last cluster-wide listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reuse<'a> {
    /// Initialization: a running instance seen within [`LISTING_REUSE`](crate::LISTING_REUSE) is good enough,
    /// if the listing was taken after the Node was created (creation times by Node name; a Node without one
    /// counts as old), else once confirmed by ID.
    Recent(&'a HashMap<String, SystemTime>),
    /// Existence and shutdown checks: only a fresh answer will do (they decide whether a Node is deleted).
    Never,
}

impl Reuse<'_> {
    /// How recent a read of an instance by ID answers.
    fn freshness(self) -> Freshness {
        match self {
            Self::Recent(_) => Freshness::within(RECENT_READ),
            Self::Never => Freshness::within(std::time::Duration::ZERO),
        }
    }
}

impl<E: Ec2 + Send + Sync + 'static> AwsInstances<E> {
    /// Looks every target up, in as few calls as the limits allow.
    pub(super) async fn find(
        &self,
        targets: &[Result<Target, InstancesError>],
        fargate: bool,
        reuse: Reuse<'_>,
    ) -> Vec<Lookup> {
        let mut ids = BTreeSet::new();
        let mut names = BTreeSet::new();
        let mut ips = BTreeSet::new();
        for t in targets.iter().flatten() {
            match t {
                Target::Ec2(id) => {
                    ids.insert(id.clone());
                }
                Target::DnsName(name) => {
                    names.insert(name.clone());
                }
                Target::Fargate { ip, .. } if fargate => {
                    ips.insert(*ip);
                }
                Target::Fargate { .. } => {}
            }
        }
        tracing::debug!(
            ids = ids.len(),
            names = names.len(),
            fargate_ips = ips.len(),
            "looking up instances"
        );
        // A listing made for the names holds the cluster's instances: the IDs it shows need no call of their own
        // (a burst of Nodes named both ways would otherwise pay a by-ID call beside the listing).
        let by_name_then_id = async {
            let (by_name, listed) = self.by_names(names, reuse).await;
            let mut by_id = HashMap::new();
            for i in listed {
                if ids.remove(&i.id) {
                    by_id.insert(i.id.clone(), Ok(Found::Instance(i)));
                }
            }
            by_id.extend(self.by_ids(ids, reuse.freshness()).await);
            (by_id, by_name)
        };
        let ((by_id, by_name), by_ip) = tokio::join!(by_name_then_id, self.by_ips(ips));
        targets
            .iter()
            .map(|t| match t {
                Err(e) => Err(e.clone()),
                Ok(Target::Ec2(id)) => by_id.get(id).cloned().unwrap_or(Ok(Found::Missing)),
                Ok(Target::DnsName(name)) => by_name.get(name).cloned().unwrap_or(Ok(Found::Missing)),
                Ok(Target::Fargate { ip, .. }) => by_ip.get(ip).cloned().unwrap_or(Ok(Found::Missing)),
            })
            .collect()
    }

    /// Instances by ID, from the catalog when read within `fresh`, else in one read per 1,000.
    async fn by_ids(&self, ids: BTreeSet<InstanceId>, fresh: Freshness) -> HashMap<InstanceId, Lookup> {
        let ids: Vec<InstanceId> = ids.into_iter().collect();
        let mut out = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IDS_PER_LOOKUP) {
            match self.ec2.lookup(chunk, fresh).await {
                Ok(lookup) => {
                    for i in lookup.found {
                        out.insert(i.id.clone(), Ok(Found::Instance(i)));
                    }
                }
                Err(e) => {
                    let e = Arc::new(e);
                    for id in chunk {
                        let what = format!("failed to get instance by ID {id}");
                        out.insert(id.clone(), Err(InstancesError::aws(what, e.clone())));
                    }
                }
            }
        }
        out
    }

    /// Looks names up: from the recent listing when `reuse` allows, then by name or with a new listing,
    /// whichever costs fewer calls. Only the cluster's instances match when its tag is known (as upstream).
    /// Also returns the instances of listing pages asked here that no name matched (they answer lookups by ID).
    async fn by_names(
        &self,
        names: BTreeSet<String>,
        reuse: Reuse<'_>,
    ) -> (HashMap<String, Lookup>, Vec<Arc<CatalogInstance>>) {
        let mut out = HashMap::with_capacity(names.len());
        let listable =
            self.config.cluster_listing && self.config.cluster.as_ref().is_some_and(|c| !c.legacy());
        let mut names: Vec<String> = names.into_iter().collect();
        let mut listed = Vec::new();
        let asked = wall_clock();
        if let Reuse::Recent(created) = reuse
            && listable
            && !names.is_empty()
        {
            // Boxed: the listing's SDK call is a large future, held here twice otherwise.
            Box::pin(self.answer_from_listing(&mut names, created, asked, false, &mut out, &mut listed))
                .await;
        }
        if names.is_empty() {
            let rest = unmatched(listed, &out);
            return (out, rest);
        }
        let by_name = !listable || self.lock_listing().asks_by_name(names.len());
        if by_name {
            for chunk in names.chunks(VALUES_PER_FILTER) {
                let filters = [
                    Filter::new("private-dns-name", chunk.iter().cloned()),
                    Filter::new("instance-state-name", LIVE_STATES),
                ];
                // The catalog's own entries, made by the port's hook: what a lookup keeps is not a copy.
                let asked = tokio::time::Instant::now();
                let answer =
                    (self.ec2.instances(&filters).await).map(|i| self.ec2.catalog().held_since(&i, asked));
                self.match_names(answer, chunk, &mut out);
            }
        } else if let Reuse::Recent(created) = reuse {
            Box::pin(self.answer_from_listing(&mut names, created, asked, true, &mut out, &mut listed)).await;
            // What the listing could not say (it expired while asked): missing for now, asked again later.
            for name in names {
                out.insert(name, Ok(Found::Missing));
            }
        } else {
            let answer = self.list_cluster().await;
            listed = self.match_names(answer, &names, &mut out);
        }
        let rest = unmatched(listed, &out);
        (out, rest)
    }

    /// Confirms by ID answers of a listing older than their Node: an instance still running under the Node's
    /// name is the answer; the names of the others (and of any that could not be read) are returned to be asked
    /// afresh.
    pub(super) async fn confirm(
        &self,
        answers: Vec<(String, Arc<CatalogInstance>)>,
        out: &mut HashMap<String, Lookup>,
    ) -> Vec<String> {
        let mut again = Vec::new();
        let now = Freshness::within(std::time::Duration::ZERO);
        for chunk in answers.chunks(IDS_PER_LOOKUP) {
            let ids: Vec<InstanceId> = chunk.iter().map(|(_, i)| i.id.clone()).collect();
            let fresh: HashMap<InstanceId, Arc<CatalogInstance>> = match self.ec2.lookup(&ids, now).await {
                Ok(lookup) => lookup.found.into_iter().map(|i| (i.id.clone(), i)).collect(),
                Err(e) => {
                    tracing::debug!(error = %e, "could not confirm listed instances by ID; asking by name");
                    HashMap::new()
                }
            };
            for (name, listed) in chunk {
                match fresh.get(&listed.id) {
                    Some(i)
                        if i.state == InstanceState::Running && i.private_dns_name.as_ref() == Some(name) =>
                    {
                        out.insert(name.clone(), Ok(Found::Instance(i.clone())));
                    }
                    _ => again.push(name.clone()),
                }
            }
        }
        again
    }

    /// Answers `names` from one call's `answer`: the instance of each name, missing, or an error. Returns the
    /// cluster's instances of the answer that no name matched.
    fn match_names(
        &self,
        answer: ccm_aws_api::Result<Vec<Arc<CatalogInstance>>>,
        names: &[String],
        out: &mut HashMap<String, Lookup>,
    ) -> Vec<Arc<CatalogInstance>> {
        let instances = match answer {
            Ok(instances) => instances,
            Err(e) => {
                let e = Arc::new(e);
                for name in names {
                    let what = format!("failed to get instance by private DNS name {name}");
                    out.insert(name.clone(), Err(InstancesError::aws(what, e.clone())));
                }
                return Vec::new();
            }
        };
        let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
        let mut matches: HashMap<&str, Vec<Arc<CatalogInstance>>> = HashMap::new();
        let mut rest = Vec::new();
        for i in instances {
            if let Some(c) = &self.config.cluster
                && !c.is_tagged(&i.cluster_tags())
            {
                continue;
            }
            match i.private_dns_name.as_deref().and_then(|d| wanted.get(d)) {
                Some(name) => matches.entry(name).or_default().push(i),
                None => rest.push(i),
            }
        }
        for name in names {
            let found = match matches.remove(name.as_str()) {
                None => Ok(Found::Missing),
                Some(mut list) if list.len() == 1 => Ok(Found::Instance(list.remove(0))),
                Some(list) => Err(InstancesError::MultipleInstances {
                    name: name.clone(),
                    ids: list.into_iter().map(|i| i.id.clone()).collect(),
                }),
            };
            out.insert(name.clone(), found);
        }
        rest
    }

    async fn by_ips(&self, ips: BTreeSet<IpAddr>) -> HashMap<IpAddr, Lookup> {
        let mut out = HashMap::with_capacity(ips.len());
        let (v6, v4): (Vec<IpAddr>, Vec<IpAddr>) = ips.into_iter().partition(IpAddr::is_ipv6);
        for (filter_name, list) in [("private-ip-address", v4), ("ipv6-addresses.ipv6-address", v6)] {
            for chunk in list.chunks(VALUES_PER_FILTER) {
                let mut filters = vec![
                    Filter::new("attachment.status", ["attached"]),
                    Filter::new(filter_name, chunk.iter().map(ToString::to_string)),
                ];
                if let Some(vpc) = &self.config.vpc_id {
                    filters.push(Filter::new("vpc-id", [vpc.as_str()]));
                }
                match self.ec2.network_interfaces(&filters).await {
                    Ok(enis) => {
                        for ip in chunk {
                            let has =
                                |list: &[String]| list.iter().any(|a| a.parse::<IpAddr>().ok() == Some(*ip));
                            let mut matching: Vec<&NetworkInterface> = enis
                                .iter()
                                .filter(|e| has(&e.private_ips) || has(&e.ipv6_addresses))
                                .collect();
                            let found = match matching.len() {
                                0 => Ok(Found::Missing),
                                1 => Ok(Found::Interface(Box::new(matching.remove(0).clone()))),
                                _ => Err(InstancesError::MultipleInterfaces {
                                    ip: ip.to_string(),
                                    ids: matching.iter().map(|e| e.id.to_string()).collect(),
                                }),
                            };
                            out.insert(*ip, found);
                        }
                    }
                    Err(e) => {
                        let e = Arc::new(e);
                        for ip in chunk {
                            let what = format!("failed to get Fargate network interface of {ip}");
                            out.insert(*ip, Err(InstancesError::aws(what, e.clone())));
                        }
                    }
                }
            }
        }
        out
    }
}

/// The instances of `listed` whose name answered none of `out`'s names.
fn unmatched(listed: Vec<Arc<CatalogInstance>>, out: &HashMap<String, Lookup>) -> Vec<Arc<CatalogInstance>> {
    listed
        .into_iter()
        .filter(|i| i.private_dns_name.as_ref().is_none_or(|n| !out.contains_key(n)))
        .collect()
}

#[cfg(test)]
mod tests;
