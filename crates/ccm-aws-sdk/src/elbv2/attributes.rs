//! The attribute calls of the ELBv2 port: load balancers', listeners' and target groups' attributes, each read
//! into a map and set from one.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2::types as sdk;
use ccm_aws_api::Result;

use super::{
    AwsElbv2, DESCRIBE_LB_ATTRIBUTES, DESCRIBE_LISTENER_ATTRIBUTES, DESCRIBE_TG_ATTRIBUTES,
    MODIFY_LB_ATTRIBUTES, MODIFY_LISTENER_ATTRIBUTES, MODIFY_TG_ATTRIBUTES,
};

impl AwsElbv2 {
    pub(super) async fn describe_lb_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        let out = self
            .rt
            .call(DESCRIBE_LB_ATTRIBUTES, || {
                self.client
                    .describe_load_balancer_attributes()
                    .load_balancer_arn(arn)
                    .send()
            })
            .await?;
        Ok(attribute_map(
            out.attributes().iter().map(|a| (a.key(), a.value())),
        ))
    }

    pub(super) async fn set_lb_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        let attributes: Vec<sdk::LoadBalancerAttribute> = attributes
            .iter()
            .map(|(k, v)| sdk::LoadBalancerAttribute::builder().key(k).value(v).build())
            .collect();
        self.rt
            .call(MODIFY_LB_ATTRIBUTES, || {
                self.client
                    .modify_load_balancer_attributes()
                    .load_balancer_arn(arn)
                    .set_attributes(Some(attributes.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    pub(super) async fn describe_listener_attrs(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        let out = self
            .rt
            .call(DESCRIBE_LISTENER_ATTRIBUTES, || {
                self.client
                    .describe_listener_attributes()
                    .listener_arn(arn)
                    .send()
            })
            .await?;
        Ok(attribute_map(
            out.attributes().iter().map(|a| (a.key(), a.value())),
        ))
    }

    pub(super) async fn set_listener_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        let attributes: Vec<sdk::ListenerAttribute> = attributes
            .iter()
            .map(|(k, v)| sdk::ListenerAttribute::builder().key(k).value(v).build())
            .collect();
        self.rt
            .call(MODIFY_LISTENER_ATTRIBUTES, || {
                self.client
                    .modify_listener_attributes()
                    .listener_arn(arn)
                    .set_attributes(Some(attributes.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    pub(super) async fn describe_tg_attributes(&self, arn: &str) -> Result<BTreeMap<String, String>> {
        let out = self
            .rt
            .call(DESCRIBE_TG_ATTRIBUTES, || {
                self.client
                    .describe_target_group_attributes()
                    .target_group_arn(arn)
                    .send()
            })
            .await?;
        Ok(attribute_map(
            out.attributes().iter().map(|a| (a.key(), a.value())),
        ))
    }

    pub(super) async fn set_tg_attributes(
        &self,
        arn: &str,
        attributes: &BTreeMap<String, String>,
    ) -> Result<()> {
        let attributes: Vec<sdk::TargetGroupAttribute> = attributes
            .iter()
            .map(|(k, v)| sdk::TargetGroupAttribute::builder().key(k).value(v).build())
            .collect();
        self.rt
            .call(MODIFY_TG_ATTRIBUTES, || {
                self.client
                    .modify_target_group_attributes()
                    .target_group_arn(arn)
                    .set_attributes(Some(attributes.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }
}

/// Attributes as ELBv2 reports them, (key, value), as a map (an entry without a key is dropped; a value missing
/// is empty).
fn attribute_map<'a>(
    pairs: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>,
) -> BTreeMap<String, String> {
    pairs
        .filter_map(|(k, v)| Some((k?.to_owned(), v.unwrap_or_default().to_owned())))
        .collect()
}
