//! The instance catalog's size in `/metrics`, read at each scrape: how many instances it holds, how many IDs it
//! remembers as absent, and the bytes its entries hold (an estimate that leaves the allocator's overhead out).

use std::sync::Arc;

use ccm_aws_api::InstanceCatalog;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
    registry::Registry,
};

/// The gauges of one [`InstanceCatalog`]: `cloudprovider_aws_instance_catalog_entries{kind="instance"|"absent"}`
/// and `cloudprovider_aws_instance_catalog_bytes`.
#[derive(Debug, Clone)]
pub struct CatalogMetrics(Arc<InstanceCatalog>);

impl CatalogMetrics {
    /// The gauges of `catalog` (see [`AwsCloud::instance_catalog`](crate::AwsCloud::instance_catalog)).
    pub fn new(catalog: Arc<InstanceCatalog>) -> Self {
        Self(catalog)
    }

    /// Registers the gauges in `registry`.
    pub fn register(self, registry: &mut Registry) {
        registry.register_collector(Box::new(self));
    }
}

fn gauge(n: usize) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX))
}

impl Collector for CatalogMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stats = self.0.stats();
        let mut entries = encoder.encode_descriptor(
            "cloudprovider_aws_instance_catalog_entries",
            "Entries of the instance catalog, by kind (instance: an instance read; absent: an ID EC2 did not show)",
            None,
            MetricType::Gauge,
        )?;
        for (kind, n) in [("instance", stats.instances), ("absent", stats.absent)] {
            gauge(n).encode(entries.encode_family(&[("kind", kind)])?)?;
        }
        let bytes = encoder.encode_descriptor(
            "cloudprovider_aws_instance_catalog_bytes",
            "Bytes held by the instance catalog's entries (an estimate without the allocator's overhead)",
            None,
            MetricType::Gauge,
        )?;
        gauge(stats.bytes).encode(bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ccm_aws_api::{
        InstanceId,
        ec2::{Instance, InstanceState},
    };

    use super::*;

    #[test]
    fn the_gauges_follow_the_catalog_at_each_scrape() {
        let catalog = Arc::new(InstanceCatalog::new());
        let mut registry = Registry::default();
        CatalogMetrics::new(catalog.clone()).register(&mut registry);
        let scrape = |registry: &Registry| {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
            out
        };
        assert!(
            scrape(&registry).contains("cloudprovider_aws_instance_catalog_entries{kind=\"instance\"} 0")
        );

        catalog.remember(&[Instance::new(InstanceId::new("i-1"), InstanceState::Running)]);
        let text = scrape(&registry);
        assert!(
            text.contains("cloudprovider_aws_instance_catalog_entries{kind=\"instance\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cloudprovider_aws_instance_catalog_entries{kind=\"absent\"} 0"),
            "{text}"
        );
        let bytes = catalog.stats().bytes;
        assert!(bytes > 0);
        assert!(
            text.contains(&format!("cloudprovider_aws_instance_catalog_bytes {bytes}")),
            "{text}"
        );
    }
}
