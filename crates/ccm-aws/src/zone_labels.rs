//! The start-up check of `NodeZoneLabel` (kubernetes/cloud-provider-aws#1185): Nodes get their zone label once,
//! when they are initialized, and nothing rewrites it. A controller configured for zone IDs (`use1-az1`) in a
//! cluster whose Nodes carry zone names (`us-east-1a`), or the reverse, would label new Nodes in the other form
//! for good, and every scheduling constraint, topology spread and zonal volume affinity keyed on the zone would
//! split one physical zone in two. So the controller refuses to start its controllers instead, naming the Node,
//! the value and the key to change.

use ccm_instances::ZoneForm;
use k8s_openapi::api::core::v1::Node;
use kube::{
    Api, Client,
    api::{ListParams, PartialObjectMeta},
};
use tracing::info;

use crate::cloud_config::{GlobalConfig, NodeZoneLabel};

/// The zone labels compared: the GA one the cloud-node controller writes, and its beta twin.
pub const ZONE_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
];

/// Nodes per page when listing them (metadata only).
const PAGE: u32 = 500;

/// The check: every Node's zone labels against the configured form.
#[derive(Debug, Clone)]
pub struct ZoneLabelCheck {
    form: ZoneForm,
    node_selector: Option<String>,
}

/// Why the check refused, or could not tell.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZoneLabelError {
    /// A Node already carries the zone in the other form.
    #[error(
        "Node {node:?} carries {label}={value:?}, a {found}, but the cloud config's [Global] NodeZoneLabel is \
         {configured} ({configured_form}s){others}: zone labels are written once, when a Node is initialized, so \
         new Nodes would get the other form and the cluster would mix both; set NodeZoneLabel = {keep} to keep \
         the {found}s, or relabel (or replace) every Node before changing it"
    )]
    OtherForm {
        /// The Node.
        node: String,
        /// The label key.
        label: &'static str,
        /// Its value.
        value: String,
        /// The form of that value.
        found: ZoneForm,
        /// `NodeZoneLabel` as configured (`ZoneName` or `ZoneID`).
        configured: &'static str,
        /// The configured form.
        configured_form: ZoneForm,
        /// `NodeZoneLabel` for the form found.
        keep: &'static str,
        /// ", and N other Nodes", or empty.
        others: String,
    },
    /// The Nodes could not be listed: nothing is started without knowing.
    #[error("listing Nodes to check their zone labels against the cloud config's NodeZoneLabel")]
    List(#[source] kube::Error),
}

/// The form the cloud config's `NodeZoneLabel` asks for.
pub fn zone_form(global: &GlobalConfig) -> ZoneForm {
    match global.node_zone_label {
        NodeZoneLabel::ZoneId => ZoneForm::Id,
        _ => ZoneForm::Name,
    }
}

// === impl ZoneLabelCheck ===

impl ZoneLabelCheck {
    /// The check for Nodes labelled in `form`.
    pub fn new(form: ZoneForm) -> Self {
        Self {
            form,
            node_selector: None,
        }
    }

    /// Checks only the Nodes matching a label selector (default: every Node), as the node controllers of a
    /// runtime with a node selector see them (tests sharing one cluster).
    #[must_use]
    pub fn with_node_selector(mut self, selector: impl Into<String>) -> Self {
        self.node_selector = Some(selector.into());
        self
    }

    /// Lists the Nodes (metadata only, a page of 500 at a time) and refuses the first one whose zone label is in
    /// the other form. Values of neither form (written by hand) are not the controller's and are left alone.
    pub async fn run(&self, client: Client) -> Result<(), ZoneLabelError> {
        let api: Api<Node> = Api::all(client);
        let mut params = ListParams::default().limit(PAGE);
        if let Some(selector) = &self.node_selector {
            params = params.labels(selector);
        }
        let (mut checked, mut first, mut others) = (0_usize, None, 0_usize);
        loop {
            let page = api.list_metadata(&params).await.map_err(ZoneLabelError::List)?;
            for node in &page.items {
                checked += 1;
                match (self.other_form(node), &first) {
                    (Some(found), None) => first = Some(found),
                    (Some(_), Some(_)) => others += 1,
                    (None, _) => {}
                }
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        match first {
            None => {
                info!(nodes = checked, form = %self.form, "Node zone labels agree with NodeZoneLabel");
                Ok(())
            }
            Some(mut err) => {
                if let ZoneLabelError::OtherForm { others: text, .. } = &mut err
                    && others > 0
                {
                    *text = format!(", and so do {others} other Node(s)");
                }
                Err(err)
            }
        }
    }

    /// The refusal for `node`, when one of its zone labels holds the other form.
    fn other_form(&self, node: &PartialObjectMeta<Node>) -> Option<ZoneLabelError> {
        let labels = node.metadata.labels.as_ref()?;
        ZONE_LABELS.iter().find_map(|label| {
            let value = labels.get(*label)?;
            let found = ZoneForm::of(value).filter(|f| *f != self.form)?;
            Some(ZoneLabelError::OtherForm {
                node: node.metadata.name.clone().unwrap_or_default(),
                label,
                value: value.clone(),
                found,
                configured: self.form.config_value(),
                configured_form: self.form,
                keep: found.config_value(),
                others: String::new(),
            })
        })
    }
}
