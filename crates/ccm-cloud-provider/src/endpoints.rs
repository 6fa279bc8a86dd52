//! What a load balancer sends traffic to: the stable node set and, for a load balancer that follows them, the
//! Service's endpoints (pod addresses, as its EndpointSlices publish them). Upstream's contract knows only
//! nodes; a provider that registers pods (an NLB's IP targets) or only the nodes that run a ready endpoint says
//! so with [`LoadBalancer::follows_endpoints`](crate::LoadBalancer::follows_endpoints), and the service
//! controller then watches EndpointSlices and hands it [`Backends`] with endpoints.

use std::net::IpAddr;

use crate::NodeView;

/// What a load balancer is given to send traffic to.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Backends<'a> {
    /// The stable node set (see [`LoadBalancer`](crate::LoadBalancer)).
    pub nodes: &'a [&'a NodeView],
    /// The Service's endpoints, when the provider follows them; `None` otherwise.
    pub endpoints: Option<&'a ServiceEndpoints>,
}

// === impl Backends ===

impl<'a> Backends<'a> {
    /// The nodes alone (a load balancer that does not follow endpoints).
    pub fn nodes(nodes: &'a [&'a NodeView]) -> Self {
        Self {
            nodes,
            endpoints: None,
        }
    }

    /// The nodes and, when given, the Service's endpoints.
    pub fn new(nodes: &'a [&'a NodeView], endpoints: Option<&'a ServiceEndpoints>) -> Self {
        Self { nodes, endpoints }
    }

    /// The nodes and the Service's endpoints.
    pub fn with_endpoints(nodes: &'a [&'a NodeView], endpoints: &'a ServiceEndpoints) -> Self {
        Self {
            nodes,
            endpoints: Some(endpoints),
        }
    }
}

/// The endpoints of one Service, gathered from all of its EndpointSlices, whatever API version served them
/// (`discovery.k8s.io/v1`, or `v1beta1` on clusters older than 1.21). One entry per address, sorted by address;
/// an address two slices list (a pod moving between slices) is one entry with the ports of both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ServiceEndpoints {
    /// The endpoints, sorted by address.
    pub endpoints: Vec<Endpoint>,
}

/// One endpoint: an address (a pod's, usually) with its conditions and ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct Endpoint {
    /// The address; a slice of address type `FQDN` contributes none.
    pub address: IpAddr,
    /// The node it runs on (the slice's `nodeName`, or its `kubernetes.io/hostname` topology in `v1beta1`).
    pub node_name: Option<String>,
    /// Its zone (`zone`, or the `topology.kubernetes.io/zone` topology in `v1beta1`).
    pub zone: Option<String>,
    /// Ready for traffic (`conditions.ready`; unset counts as ready, as the API says consumers should take it).
    pub ready: bool,
    /// Able to serve, terminating or not (`conditions.serving`; unset: as `ready`).
    pub serving: bool,
    /// Being stopped (`conditions.terminating`; unset: not).
    pub terminating: bool,
    /// The ports it serves, sorted.
    pub ports: Vec<EndpointPort>,
    /// Listed by a slice the endpoint-slice controller manages (label `endpointslice.kubernetes.io/managed-by:
    /// endpointslice-controller.k8s.io`): a pod the Service's selector chose. Slices of a Service without a
    /// selector are written by whoever may write them (or mirrored from its Endpoints), and may list any
    /// address; consumers that send traffic to addresses (IP targets) take only these.
    pub managed: bool,
}

/// A port of an endpoint (an EndpointSlice's `ports` entry).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct EndpointPort {
    /// The port's name: the Service port's name it serves (`""` for the unnamed port of a one-port Service).
    pub name: String,
    /// The port number on the endpoint (the Service's target port, resolved).
    pub port: u16,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
}

// === impl ServiceEndpoints ===

impl ServiceEndpoints {
    /// The endpoints of `endpoints`, merged by address and sorted.
    pub fn new(endpoints: impl IntoIterator<Item = Endpoint>) -> Self {
        let mut all: Vec<Endpoint> = endpoints.into_iter().collect();
        all.sort();
        let mut merged: Vec<Endpoint> = Vec::with_capacity(all.len());
        for endpoint in all {
            match merged.last_mut() {
                Some(last) if last.address == endpoint.address => last.merge(endpoint),
                _ => merged.push(endpoint),
            }
        }
        for endpoint in &mut merged {
            endpoint.ports.sort();
            endpoint.ports.dedup();
        }
        Self { endpoints: merged }
    }

    /// The endpoints ready for traffic, not terminating.
    pub fn ready(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.iter().filter(|e| e.ready && !e.terminating)
    }

    /// The nodes that run at least one ready endpoint, sorted, each once.
    pub fn nodes_with_ready_endpoints(&self) -> Vec<&str> {
        let mut nodes: Vec<&str> = self.ready().filter_map(|e| e.node_name.as_deref()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

// === impl Endpoint ===

impl Endpoint {
    /// A ready, serving endpoint at `address` on `node_name` with `ports`, listed by a managed slice (tests and
    /// providers' fakes).
    pub fn ready(address: IpAddr, node_name: Option<&str>, ports: Vec<EndpointPort>) -> Self {
        Self {
            address,
            node_name: node_name.map(str::to_owned),
            zone: None,
            ready: true,
            serving: true,
            terminating: false,
            ports,
            managed: true,
        }
    }

    /// This endpoint as listed by a slice the endpoint-slice controller manages (`true`), or by one anybody
    /// else wrote (`false`).
    pub fn managed(mut self, managed: bool) -> Self {
        self.managed = managed;
        self
    }

    /// This endpoint with its conditions set.
    pub fn with_conditions(mut self, ready: bool, serving: bool, terminating: bool) -> Self {
        self.ready = ready;
        self.serving = serving;
        self.terminating = terminating;
        self
    }

    /// This endpoint in `zone`.
    pub fn in_zone(mut self, zone: Option<&str>) -> Self {
        self.zone = zone.map(str::to_owned);
        self
    }

    /// The port named `name` (`""`: the unnamed one), if this endpoint serves it.
    pub fn port(&self, name: &str) -> Option<&EndpointPort> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// Another slice's view of the same address: ready if either says so (the newer slice is not known), its
    /// ports added.
    fn merge(&mut self, other: Endpoint) {
        self.ready |= other.ready;
        self.serving |= other.serving;
        self.terminating &= other.terminating;
        // The address of a selected pod stays one, whoever else lists it.
        self.managed |= other.managed;
        self.node_name = self.node_name.take().or(other.node_name);
        self.zone = self.zone.take().or(other.zone);
        self.ports.extend(other.ports);
    }
}

// === impl EndpointPort ===

impl EndpointPort {
    /// A port.
    pub fn new(name: impl Into<String>, port: u16, protocol: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            port,
            protocol: protocol.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn http(port: u16) -> Vec<EndpointPort> {
        vec![EndpointPort::new("http", port, "TCP")]
    }

    #[test]
    fn an_address_in_two_slices_is_one_endpoint_with_both_ports() {
        let endpoints = ServiceEndpoints::new([
            Endpoint::ready(ip(2), Some("b"), http(8080)),
            Endpoint::ready(ip(1), Some("a"), http(8080)).with_conditions(false, false, true),
            Endpoint::ready(ip(1), Some("a"), vec![EndpointPort::new("metrics", 9090, "TCP")]),
        ]);
        assert_eq!(endpoints.endpoints.len(), 2);
        let first = &endpoints.endpoints[0];
        assert_eq!(first.address, ip(1));
        assert!(first.ready && !first.terminating, "{first:?}");
        let names: Vec<&str> = first.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["http", "metrics"]);
        assert_eq!(first.port("metrics").map(|p| p.port), Some(9090));
    }

    #[test]
    fn only_nodes_with_a_ready_endpoint_not_terminating_are_listed() {
        let endpoints = ServiceEndpoints::new([
            Endpoint::ready(ip(1), Some("b"), http(80)),
            Endpoint::ready(ip(2), Some("b"), http(80)),
            Endpoint::ready(ip(3), Some("a"), http(80)).with_conditions(false, false, false),
            Endpoint::ready(ip(4), Some("c"), http(80)).with_conditions(true, true, true),
            Endpoint::ready(ip(5), None, http(80)),
        ]);
        assert_eq!(endpoints.nodes_with_ready_endpoints(), ["b"]);
        assert_eq!(endpoints.ready().count(), 3);
    }
}
