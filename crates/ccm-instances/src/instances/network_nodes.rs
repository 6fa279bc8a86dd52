//! The network-node labels of new Nodes (`DescribeInstanceTopology`): one call for a batch, none for what is
//! known to have no topology (a type, an instance, or the whole region), and no wait beyond
//! [`BEST_EFFORT_TOPOLOGY`] for instances whose labels are best effort.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, PoisonError},
};

use ccm_aws_api::{Ec2, InstanceId, ec2::InstanceTopology};
use tokio::time::Instant;

use super::{AwsInstances, BEST_EFFORT_TOPOLOGY};
use crate::{InstancesError, topology::region_unsupported};

impl<E: Ec2 + Send + Sync + 'static> AwsInstances<E> {
    /// The network nodes of `candidates` (instance, type), one call for all; absent means no labels.
    pub(super) async fn topology(
        &self,
        candidates: Vec<(InstanceId, String)>,
    ) -> HashMap<InstanceId, Result<Vec<String>, InstancesError>> {
        let mut out = HashMap::new();
        let now = Instant::now();
        let candidates = self.topology_candidates(candidates, now);
        if candidates.is_empty() {
            return out;
        }
        let ids: Vec<InstanceId> = candidates.iter().map(|(id, _)| id.clone()).collect();
        let pattern = &self.config.topology_instance_types;
        // Only types matching the pattern need an answer (their errors fail initialization); for the others the
        // labels are best effort, so a slow or retried call must not hold their initialization up.
        let required = candidates.iter().any(|(_, ty)| pattern.is_match(ty));
        let call = self.ec2.instance_topology(&ids);
        let answer = if required {
            call.await
        } else {
            match tokio::time::timeout(BEST_EFFORT_TOPOLOGY, call).await {
                Ok(answer) => answer,
                Err(_) => {
                    tracing::warn!(
                        instances = ids.len(),
                        after = ?BEST_EFFORT_TOPOLOGY,
                        "instance topology did not answer in time; initializing without network-node labels"
                    );
                    return out;
                }
            }
        };
        match answer {
            Ok(list) => self.topology_answered(list, &candidates, now, &mut out),
            Err(e) if region_unsupported(&e) => {
                tracing::info!(error = %e, "instance topology is not available; not asking again for a day");
                self.unsupported_topology
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .mark_region(now);
            }
            Err(e) => {
                let e = Arc::new(e);
                for (id, ty) in candidates {
                    if pattern.is_match(&ty) {
                        let what = format!("failed to get the topology of instance {id} ({ty})");
                        out.insert(id, Err(InstancesError::aws(what, e.clone())));
                    } else {
                        tracing::warn!(instance = %id, error = %e, "could not get instance topology");
                    }
                }
            }
        }
        out
    }

    /// The instances of `candidates` worth asking about: each once, none whose type, region or ID is known to
    /// have no topology (the store forgets what it learnt after a while).
    fn topology_candidates(
        &self,
        candidates: Vec<(InstanceId, String)>,
        now: Instant,
    ) -> Vec<(InstanceId, String)> {
        let mut store = self
            .unsupported_topology
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        store.prune(now);
        let mut seen = BTreeSet::new();
        candidates
            .into_iter()
            .filter(|(id, ty)| !store.skip(now, id, ty) && seen.insert(id.clone()))
            .collect()
    }

    /// Takes the network nodes of `list` into `out`, and remembers the candidates without any: by ID for a type
    /// the pattern requires, by type when no instance of that type had any.
    fn topology_answered(
        &self,
        list: Vec<InstanceTopology>,
        candidates: &[(InstanceId, String)],
        now: Instant,
        out: &mut HashMap<InstanceId, Result<Vec<String>, InstancesError>>,
    ) {
        let pattern = &self.config.topology_instance_types;
        let mut nodes: HashMap<InstanceId, Vec<String>> = list
            .into_iter()
            .filter(|t| !t.network_nodes.is_empty())
            .map(|t| (t.instance_id, t.network_nodes))
            .collect();
        let supported_types: BTreeSet<&str> = candidates
            .iter()
            .filter(|(id, _)| nodes.contains_key(id))
            .map(|(_, ty)| ty.as_str())
            .collect();
        let mut store = self
            .unsupported_topology
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (id, ty) in candidates {
            match nodes.remove(id) {
                Some(n) => {
                    out.insert(id.clone(), Ok(n));
                }
                None if pattern.is_match(ty) => store.mark_id(now, id.clone()),
                None if !supported_types.contains(ty.as_str()) => store.mark_type(now, ty.clone()),
                None => {}
            }
        }
    }
}
