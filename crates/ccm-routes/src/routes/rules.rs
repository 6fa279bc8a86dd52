//! Reading route tables: destinations as CIDRs, what a route points at, and whether it may be created,
//! replaced or deleted.

use super::*;

impl Cidr {
    pub(super) fn parse(s: &str) -> Option<Self> {
        let (ip, prefix) = s.trim().split_once('/')?;
        let ip: IpAddr = ip.parse().ok()?;
        let prefix: u8 = prefix.parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(Self { ip, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ip, self.prefix)
    }
}

pub(super) fn parse_cidr(s: &str) -> Result<(Cidr, &str), RoutesError> {
    let trimmed = s.trim();
    Cidr::parse(trimmed)
        .map(|c| (c, trimmed))
        .ok_or_else(|| RoutesError::InvalidCidr { cidr: s.to_owned() })
}

/// The destination of a route (IPv4 or IPv6) and its spelling.
pub(super) fn destination(r: &Ec2Route) -> Option<(Cidr, &str)> {
    let spelled = r
        .destination_cidr
        .as_deref()
        .or(r.destination_ipv6_cidr.as_deref())?;
    Cidr::parse(spelled).map(|c| (c, spelled))
}

pub(super) fn routes_by_cidr(table: &RouteTable) -> HashMap<Cidr, &Ec2Route> {
    let mut out = HashMap::new();
    for route in &table.routes {
        if let Some((cidr, _)) = destination(route) {
            out.entry(cidr).or_insert(route);
        }
    }
    out
}

pub(super) fn find(table: &RouteTable, cidr: Cidr) -> Option<&Ec2Route> {
    table
        .routes
        .iter()
        .find(|r| destination(r).is_some_and(|(c, _)| c == cidr))
}

pub(super) fn classify(route: Option<&Ec2Route>) -> Existing<'_> {
    match route {
        None => Existing::Absent,
        Some(r) if r.state == RouteState::Blackhole => Existing::Blackhole(r),
        Some(r) => match &r.instance_id {
            Some(id) => Existing::Instance(id),
            None => Existing::Other(r),
        },
    }
}

/// The instance every table routes the CIDR to, when all agree and all are active.
pub(super) fn same_instance<'a>(existing: &[Existing<'a>]) -> Option<&'a InstanceId> {
    let mut target = None;
    for e in existing {
        match e {
            Existing::Instance(id) if target.is_none_or(|t| t == *id) => target = Some(*id),
            _ => return None,
        }
    }
    target
}

pub(super) fn create_action(route: Option<&Ec2Route>, instance: &InstanceId) -> CreateAction {
    match classify(route) {
        Existing::Absent => CreateAction::Create,
        Existing::Blackhole(_) => CreateAction::Replace,
        Existing::Instance(id) if id == instance => CreateAction::Nothing,
        Existing::Instance(id) => CreateAction::Conflict(format!("instance {id}")),
        Existing::Other(r) => CreateAction::Conflict(target_of(r)),
    }
}

pub(super) fn target_of(r: &Ec2Route) -> String {
    if let Some(g) = &r.gateway_id {
        format!("gateway {g}")
    } else if let Some(eni) = &r.network_interface_id {
        format!("network interface {eni}")
    } else {
        "another target".to_owned()
    }
}

/// Whether a delete removes this table's route: a blackholed route to an instance or interface; and unless a
/// blackhole was asked for, an active route to the listed instance (to any instance when nothing was listed).
pub(super) fn deletable(route: Option<&Ec2Route>, blackhole: bool, expected: Option<&InstanceId>) -> bool {
    match classify(route) {
        Existing::Absent | Existing::Other(_) => false,
        Existing::Blackhole(r) => r.instance_id.is_some() || r.network_interface_id.is_some(),
        Existing::Instance(id) => !blackhole && expected.is_none_or(|e| e == id),
    }
}
