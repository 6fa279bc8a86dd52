//! `custom-provider`: a vendor's own distribution of the cloud controller manager. It embeds the contract
//! (`ccm-cloud-provider`), the generic controllers and the runtime (`ccm-controller-manager`: upstream flags,
//! leader election, `/healthz`, `/metrics`), and brings its own provider: an in-memory cloud whose machines come
//! from the `--cloud-config` file, one `<node> <zone> <instance-type> <internal-ip>` per line. The provider is
//! picked at run time by `--cloud-provider` through a `ProviderRegistry`, as upstream's `RegisterCloudProvider`
//! lets a distribution link several. See docs/using-the-crates.md.

use std::{collections::BTreeMap, process::ExitCode, sync::Arc};

use ccm_cloud_provider::{
    BoxError, CloudProvider, InstanceMetadata, InstancesV2, NodeAddress, NodeAddressType, NodeView,
    ProviderRegistry, Result, Unsupported,
};
use ccm_controller_manager::{Options, Runtime};
use ccm_examples::cli::CustomProviderCli as Cli;
use clap::Parser;

/// The name of this provider (`--cloud-provider=in-memory`), the scheme of its provider IDs.
const NAME: &str = "in-memory";

/// One machine of the in-memory cloud.
struct Machine {
    zone: String,
    instance_type: String,
    internal_ip: String,
}

/// The vendor's provider: it knows its machines by node name and supports `InstancesV2` only.
struct InMemoryCloud {
    machines: BTreeMap<String, Machine>,
}

impl InMemoryCloud {
    /// Reads the machines from the cloud config's content; a bad line names its number and the expected form.
    fn from_config(config: Option<String>) -> Result<Self, BoxError> {
        let mut machines = BTreeMap::new();
        for (n, line) in config.unwrap_or_default().lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let [node, zone, instance_type, internal_ip] = line.split_whitespace().collect::<Vec<_>>()[..]
            else {
                let line_no = n + 1;
                return Err(format!(
                    "cloud config line {line_no}: expected `<node> <zone> <instance-type> <internal-ip>`, got {line:?}"
                )
                .into());
            };
            let machine = Machine {
                zone: zone.into(),
                instance_type: instance_type.into(),
                internal_ip: internal_ip.into(),
            };
            machines.insert(node.to_owned(), machine);
        }
        Ok(Self { machines })
    }

    fn machine(&self, node: &NodeView) -> Option<(&String, &Machine)> {
        self.machines.get_key_value(node.name.as_str())
    }
}

impl CloudProvider for InMemoryCloud {
    type InstancesV2 = Self;
    type Instances = Unsupported;
    type Zones = Unsupported;
    type LoadBalancer = Unsupported;
    type Routes = Unsupported;

    fn provider_name(&self) -> &str {
        NAME
    }

    fn instances_v2(&self) -> Option<&Self> {
        Some(self)
    }
}

impl InstancesV2 for InMemoryCloud {
    async fn instance_exists(&self, node: &NodeView) -> Result<bool> {
        Ok(self.machine(node).is_some())
    }

    async fn instance_shutdown(&self, _node: &NodeView) -> Result<bool> {
        Ok(false)
    }

    /// `None` for a Node of no known machine: it stays uninitialized, as a Node of another cloud should.
    async fn instance_metadata(&self, node: &NodeView) -> Result<Option<InstanceMetadata>> {
        Ok(self.machine(node).map(|(name, m)| InstanceMetadata {
            provider_id: format!("{NAME}://{name}"),
            instance_type: m.instance_type.clone(),
            node_addresses: vec![NodeAddress::new(NodeAddressType::InternalIp, &m.internal_ip)],
            zone: m.zone.clone(),
            region: "memory".to_owned(),
            additional_labels: BTreeMap::new(),
            not_in_cluster: None,
        }))
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = ccm_controller_manager::init_logging(&cli.manager) {
        eprintln!("custom-provider: {e}");
        return ExitCode::FAILURE;
    }
    match run(cli.manager).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("custom-provider: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(options: Options) -> Result<(), BoxError> {
    // Every provider of the distribution is registered; `--cloud-provider` picks one at run time.
    let mut registry = ProviderRegistry::new();
    registry.register(NAME, |config| async move { InMemoryCloud::from_config(config) })?;

    let config = match options.cloud_config.as_str() {
        "" => None,
        path => Some(std::fs::read_to_string(path).map_err(|e| format!("--cloud-config={path}: {e}"))?),
    };
    let provider = registry.init(&options.cloud_provider, config).await?;
    Runtime::new(options).run(Arc::new(provider)).await?;
    Ok(())
}
