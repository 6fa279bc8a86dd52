//! The parser of the gcfg dialect: sections, keys, quoting and comments, every problem collected.

use super::*;

#[derive(Default)]
pub(super) struct Parser {
    config: CloudConfig,
    errors: Vec<ConfigError>,
    /// Keys seen in the current section (lower-case), to warn about repeated single-valued keys.
    seen: Vec<String>,
    families_set: bool,
}

enum Section {
    Global,
    Override(usize),
    Unknown,
}

impl Parser {
    pub(super) fn run(mut self, text: &str) -> Result<CloudConfig, CloudConfigErrors> {
        let mut section: Option<Section> = None;
        let mut global_lines: Vec<(usize, String, Option<String>)> = Vec::new();
        let mut override_lines: Vec<Vec<(usize, String, Option<String>)>> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line_no = index + 1;
            let line = strip_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            if let Some(header) = line.strip_prefix('[') {
                let Some(header) = header.strip_suffix(']') else {
                    self.error(Some(line_no), "section header", "missing closing ']'", None);
                    section = Some(Section::Unknown);
                    continue;
                };
                section = Some(self.section(line_no, header.trim(), &mut override_lines));
                self.seen.clear();
                continue;
            }
            let (key, value) = match line.split_once('=') {
                Some((k, v)) => (k.trim().to_owned(), Some(v.trim().to_owned())),
                None => (line.to_owned(), None),
            };
            let value = match value.map(|v| unquote(&v)).transpose() {
                Ok(v) => v,
                Err(message) => {
                    let field = match &section {
                        Some(Section::Global) => format!("Global.{key}"),
                        Some(Section::Override(i)) => {
                            format!(
                                "ServiceOverride \"{}\".{key}",
                                self.config.service_overrides[*i].name
                            )
                        }
                        _ => key.clone(),
                    };
                    self.error(Some(line_no), &field, &message, Some(ESCAPES));
                    continue;
                }
            };
            match &section {
                None => self.error(
                    Some(line_no),
                    &key,
                    "key outside of any section",
                    Some("[Global], [ServiceOverride \"<name>\"]"),
                ),
                Some(Section::Global) => global_lines.push((line_no, key, value)),
                Some(Section::Override(i)) => override_lines[*i].push((line_no, key, value)),
                Some(Section::Unknown) => {}
            }
        }
        for (line, key, value) in global_lines {
            self.global(line, &key, value);
        }
        for (i, lines) in override_lines.into_iter().enumerate() {
            self.seen.clear();
            for (line, key, value) in lines {
                self.service_override(i, line, &key, value);
            }
        }
        self.validate();
        if self.errors.is_empty() {
            Ok(self.config)
        } else {
            Err(CloudConfigErrors(self.errors))
        }
    }

    fn section(
        &mut self,
        line: usize,
        header: &str,
        overrides: &mut Vec<Vec<(usize, String, Option<String>)>>,
    ) -> Section {
        let (name, sub) = match header.split_once(char::is_whitespace) {
            Some((name, rest)) => (name, Some(rest.trim())),
            None => (header, None),
        };
        if name.eq_ignore_ascii_case("global") && sub.is_none() {
            return Section::Global;
        }
        if name.eq_ignore_ascii_case("serviceoverride") {
            let Some(sub) = sub else {
                self.error(
                    Some(line),
                    "ServiceOverride",
                    "section needs a name",
                    Some("[ServiceOverride \"<name>\"]"),
                );
                return Section::Unknown;
            };
            let name = match unquote(sub) {
                Ok(n) => n,
                Err(message) => {
                    self.error(Some(line), "ServiceOverride", &message, None);
                    return Section::Unknown;
                }
            };
            self.config.service_overrides.push(ServiceOverride {
                name,
                ..ServiceOverride::default()
            });
            overrides.push(Vec::new());
            return Section::Override(overrides.len() - 1);
        }
        self.config
            .warnings
            .push(format!("line {line}: unknown section [{header}] ignored"));
        Section::Unknown
    }

    fn global(&mut self, line: usize, key: &str, value: Option<String>) {
        let Some(canonical) = GLOBAL_KEYS.iter().find(|k| k.eq_ignore_ascii_case(key)).copied() else {
            self.config.warnings.push(format!(
                "line {line}: unknown key Global.{key} ignored (known keys: {})",
                GLOBAL_KEYS.join(", ")
            ));
            return;
        };
        let field = format!("Global.{canonical}");
        if canonical != "NodeIPFamilies" {
            self.note_repeat(line, &field, canonical);
        }
        if matches!(
            canonical,
            "DisableSecurityGroupIngress" | "AdoptUntaggedLoadBalancers"
        ) {
            self.global_bool(line, canonical, &field, value);
            return;
        }
        let Some(value) = value else {
            self.error(Some(line), &field, "missing '= value'", None);
            return;
        };
        self.global_value(line, canonical, &field, value);
    }

    /// `DisableSecurityGroupIngress` and `AdoptUntaggedLoadBalancers`: booleans, Go's `strconv.ParseBool`.
    fn global_bool(&mut self, line: usize, canonical: &str, field: &str, value: Option<String>) {
        let g = &mut self.config.global;
        let target = if canonical == "DisableSecurityGroupIngress" {
            &mut g.disable_security_group_ingress
        } else {
            &mut g.adopt_untagged_load_balancers
        };
        match parse_bool(value.as_deref()) {
            Some(b) => *target = b,
            None => self.error(
                Some(line),
                field,
                &format!("{:?} is not a boolean", value.unwrap_or_default()),
                Some(BOOL_VALUES),
            ),
        }
    }

    /// The other `[Global]` keys, each with its value.
    fn global_value(&mut self, line: usize, canonical: &str, field: &str, value: String) {
        let g = &mut self.config.global;
        let opt = |v: String| Some(v).filter(|v| !v.is_empty());
        match canonical {
            "Zone" => g.zone = opt(value),
            "Region" => g.region = opt(value),
            "VPC" => g.vpc = opt(value),
            "SubnetID" => g.subnet_id = opt(value),
            "RouteTableID" => g.route_table_id = opt(value),
            "RoleARN" => g.role_arn = opt(value),
            "SourceARN" => g.source_arn = opt(value),
            "KubernetesClusterTag" => g.kubernetes_cluster_tag = opt(value),
            "KubernetesClusterID" => g.kubernetes_cluster_id = opt(value),
            "ElbSecurityGroup" => g.elb_security_group = opt(value),
            "NodeIPFamilies" => self.node_ip_family(line, field, &value),
            "ClusterServiceLoadBalancerHealthProbeMode"
            | "ClusterServiceSharedLoadBalancerHealthProbePort"
            | "ClusterServiceSharedLoadBalancerHealthProbePath" => {
                self.health_probe(line, canonical, field, value);
            }
            "SupportedTopologyInstanceTypePattern" => {
                if value.is_empty() {
                    g.supported_topology_instance_type_pattern = DEFAULT_TOPOLOGY_PATTERN.to_owned();
                } else if let Err(e) = Regex::new(&value) {
                    self.error(
                        Some(line),
                        field,
                        &format!("invalid regular expression: {e}"),
                        Some("a regular expression"),
                    );
                } else {
                    g.supported_topology_instance_type_pattern = value;
                }
            }
            "ExtraLoadBalancerAttributeKeys" => self.extra_attribute_keys(line, field, &value),
            "AllowedHealthCheckPorts" => self.allowed_health_check_ports(line, field, &value),
            "NodeZoneLabel" => match value.to_ascii_lowercase().as_str() {
                "" | "zonename" => g.node_zone_label = NodeZoneLabel::ZoneName,
                "zoneid" => g.node_zone_label = NodeZoneLabel::ZoneId,
                _ => self.error(
                    Some(line),
                    field,
                    &format!("unknown zone label form {value:?}"),
                    Some("ZoneName (or empty) for us-east-1a, ZoneID for use1-az1"),
                ),
            },
            "NLBSecurityGroupMode" => match value.as_str() {
                "" => g.nlb_security_group_mode = NlbSecurityGroupMode::Off,
                "Managed" => g.nlb_security_group_mode = NlbSecurityGroupMode::Managed,
                _ => self.error(
                    Some(line),
                    field,
                    &format!("invalid NLB security group mode {value:?}"),
                    Some("Managed, or empty for none"),
                ),
            },
            _ => {}
        }
    }

    /// `NodeIPFamilies`: one family per line; the first line replaces the default.
    fn node_ip_family(&mut self, line: usize, field: &str, value: &str) {
        if !self.families_set {
            self.families_set = true;
            self.config.global.node_ip_families.clear();
        }
        match value.to_ascii_lowercase().as_str() {
            "ipv4" => self.config.global.node_ip_families.push(IpFamily::Ipv4),
            "ipv6" => self.config.global.node_ip_families.push(IpFamily::Ipv6),
            _ => self.error(
                Some(line),
                field,
                &format!("unknown IP family {value:?} (one family per line)"),
                Some("ipv4, ipv6"),
            ),
        }
    }

    /// The shared health probe of the cluster's load balancers: its mode, port and path.
    fn health_probe(&mut self, line: usize, canonical: &str, field: &str, value: String) {
        let g = &mut self.config.global;
        match canonical {
            "ClusterServiceLoadBalancerHealthProbeMode" => match value.as_str() {
                "" | "ServiceNodePort" => g.health_probe_mode = HealthProbeMode::ServiceNodePort,
                "Shared" => g.health_probe_mode = HealthProbeMode::Shared,
                _ => self.error(
                    Some(line),
                    field,
                    &format!("unsupported health probe mode {value:?}"),
                    Some("ServiceNodePort (or empty), Shared"),
                ),
            },
            "ClusterServiceSharedLoadBalancerHealthProbePort" => match value.parse::<u16>() {
                Ok(0) => g.shared_health_probe_port = DEFAULT_SHARED_PROBE_PORT,
                Ok(port) => g.shared_health_probe_port = port,
                Err(_) => self.error(
                    Some(line),
                    field,
                    &format!("{value:?} is not a port number"),
                    Some("1 to 65535, or 0 for the default 10256"),
                ),
            },
            "ClusterServiceSharedLoadBalancerHealthProbePath" => {
                if value.is_empty() {
                    g.shared_health_probe_path = "/healthz".to_owned();
                } else if value.starts_with('/') {
                    g.shared_health_probe_path = value;
                } else {
                    self.error(
                        Some(line),
                        field,
                        &format!("{value:?} is not an absolute path"),
                        Some("a path starting with '/'"),
                    );
                }
            }
            _ => {}
        }
    }

    fn service_override(&mut self, index: usize, line: usize, key: &str, value: Option<String>) {
        let name = self.config.service_overrides[index].name.clone();
        let Some(canonical) = OVERRIDE_KEYS
            .iter()
            .find(|k| k.eq_ignore_ascii_case(key))
            .copied()
        else {
            self.config.warnings.push(format!(
                "line {line}: unknown key ServiceOverride \"{name}\".{key} ignored (known keys: {})",
                OVERRIDE_KEYS.join(", ")
            ));
            return;
        };
        let field = format!("ServiceOverride \"{name}\".{canonical}");
        self.note_repeat(line, &field, canonical);
        let Some(value) = value else {
            self.error(Some(line), &field, "missing '= value'", None);
            return;
        };
        let o = &mut self.config.service_overrides[index];
        match canonical {
            "Service" => o.service = value,
            "Region" => o.region = value,
            "URL" => o.url = value,
            "SigningRegion" => o.signing_region = value,
            "SigningMethod" => o.signing_method = value,
            "SigningName" => o.signing_name = value,
            _ => {}
        }
    }

    fn validate(&mut self) {
        let g = self.config.global.clone();
        if let Some(zone) = &g.zone
            && region_of_zone(zone).is_none()
        {
            self.error(
                None,
                "Global.Zone",
                &format!("invalid AZ {zone:?}: no region can be derived from it"),
                Some("an availability zone such as us-east-1a"),
            );
        }
        if let (Some(id), Some(tag)) = (&g.kubernetes_cluster_id, &g.kubernetes_cluster_tag)
            && id != tag
        {
            self.error(
                None,
                "Global.KubernetesClusterID",
                &format!("clusterID tags did not match: {id:?} vs KubernetesClusterTag {tag:?}"),
                Some("the same value in both, or only one of them"),
            );
        }
        for (field, value) in [
            ("Global.RoleARN", &g.role_arn),
            ("Global.SourceARN", &g.source_arn),
        ] {
            if let Some(arn) = value
                && (!arn.starts_with("arn:") || arn.split(':').count() < 6)
            {
                self.error(
                    None,
                    field,
                    &format!("{arn:?} is not an ARN"),
                    Some("arn:<partition>:<service>:<region>:<account>:<resource>"),
                );
            }
        }
        if g.source_arn.is_some() && g.role_arn.is_none() {
            self.error(
                None,
                "Global.SourceARN",
                "is only used when assuming a role",
                Some("set RoleARN too, or remove SourceARN"),
            );
        }
        self.validate_overrides();
    }

    /// Each `[ServiceOverride "<name>"]`: its required keys, a known service, an http(s) URL, and at most one
    /// override per service and region.
    fn validate_overrides(&mut self) {
        let mut seen: Vec<(Option<OverrideService>, String, String)> = Vec::new();
        for o in self.config.service_overrides.clone() {
            let field = |f: &str| format!("ServiceOverride \"{}\".{f}", o.name);
            let required = [
                ("Service", &o.service, "service name is missing"),
                ("Region", &o.region, "service region is missing"),
                ("URL", &o.url, "url is missing"),
                ("SigningRegion", &o.signing_region, "signingRegion is missing"),
            ];
            for (key, value, message) in required {
                if value.trim().is_empty() {
                    self.error(None, &field(key), message, None);
                }
            }
            if !o.service.trim().is_empty() && o.service_kind().is_none() {
                self.error(
                    None,
                    &field("Service"),
                    &format!("unknown service {:?}", o.service),
                    Some("EC2, Elastic Load Balancing, Elastic Load Balancing v2, STS, KMS, ec2imds (or ec2, elasticloadbalancing, elasticloadbalancingv2, sts, kms)"),
                );
            }
            let url = o.url.trim();
            if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
                self.error(
                    None,
                    &field("URL"),
                    &format!("{url:?} is not an http(s) URL"),
                    Some("http://... or https://..."),
                );
            }
            let key = (
                o.service_kind(),
                o.service.trim().to_owned(),
                o.region.trim().to_owned(),
            );
            if let Some(previous) = seen.iter().find(|(kind, service, region)| {
                region == &key.2 && (kind.is_some() && *kind == key.0 || kind.is_none() && service == &key.1)
            }) {
                self.error(
                    None,
                    &format!("ServiceOverride \"{}\"", o.name),
                    &format!(
                        "duplicate entry found for service override ({} in {})",
                        previous.1, previous.2
                    ),
                    Some("one override per service and region"),
                );
            } else {
                seen.push(key);
            }
        }
    }

    /// `ExtraLoadBalancerAttributeKeys`: comma-separated ELBv2 attribute keys, each in the form the annotations
    /// accept (lower case, digits, `_` and `.`, with a `.`), so that a typo here is reported here.
    fn extra_attribute_keys(&mut self, line: usize, field: &str, value: &str) {
        let keys: Vec<String> = value
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect();
        let well_formed = |k: &String| {
            k.contains('.')
                && k.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
        };
        if let Some(bad) = keys.iter().find(|k| !well_formed(k)) {
            self.error(
                Some(line),
                field,
                &format!("{bad:?} is not an attribute key"),
                Some("comma-separated ELBv2 attribute keys (lower case, digits, '_' and '.', e.g. tcp.idle_timeout.seconds)"),
            );
            return;
        }
        self.config.global.extra_load_balancer_attribute_keys = keys;
    }

    /// `AllowedHealthCheckPorts`: comma-separated ports (1 to 65535) and inclusive ranges (`9000-9100`).
    fn allowed_health_check_ports(&mut self, line: usize, field: &str, value: &str) {
        let mut ranges = Vec::new();
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (from, to) = item.split_once('-').unwrap_or((item, item));
            let port = |p: &str| p.trim().parse::<u16>().ok().filter(|p| *p > 0);
            match (port(from), port(to)) {
                (Some(from), Some(to)) if from <= to => ranges.push((from, to)),
                _ => {
                    self.error(
                        Some(line),
                        field,
                        &format!("{item:?} is not a port or a range of ports"),
                        Some("comma-separated ports from 1 to 65535 and ranges such as 9000-9100"),
                    );
                    return;
                }
            }
        }
        self.config.global.allowed_health_check_ports = ranges;
    }

    fn note_repeat(&mut self, line: usize, field: &str, canonical: &str) {
        let lower = canonical.to_ascii_lowercase();
        if self.seen.contains(&lower) {
            self.config.warnings.push(format!(
                "line {line}: {field} is set more than once; the last value wins"
            ));
        } else {
            self.seen.push(lower);
        }
    }

    fn error(&mut self, line: Option<usize>, field: &str, message: &str, accepted: Option<&str>) {
        self.errors.push(ConfigError {
            line,
            field: field.to_owned(),
            message: message.to_owned(),
            accepted: accepted.map(str::to_owned),
        });
    }
}

/// Strips a `;` or `#` comment that is not inside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ';' | '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// Removes quotes and resolves escapes (gcfg: quoted parts may be mixed with unquoted ones).
fn unquote(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => return Err(format!("unknown escape \\{other} (write \\\\ for a backslash)")),
                None => return Err("line ends with a backslash".to_owned()),
            },
            c => out.push(c),
        }
    }
    if quoted {
        return Err("unterminated quote".to_owned());
    }
    Ok(out)
}

/// gcfg booleans; a key alone means `true`.
fn parse_bool(value: Option<&str>) -> Option<bool> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None => Some(true),
        Some("true" | "yes" | "on" | "1") => Some(true),
        Some("false" | "no" | "off" | "0") => Some(false),
        Some(_) => None,
    }
}
