//! The tagging controller in a dry run: it reports, and writes nothing.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use ccm_aws_api::ec2::MockEc2;
use ccm_controllers::{Clock, ControllerMetrics};
use kube::runtime::watcher;

use super::{AllBut, FakeLabels, aws_node, now, run_one, tags};
use crate::tagging::{TaggingConfig, TaggingMetrics, core::Core};

/// What a dry run was told, by object.
#[derive(Debug, Default)]
struct Reported(Mutex<BTreeMap<String, Vec<String>>>);

impl ccm_controllers::DryRunSink for Reported {
    fn load_balancer(&self, _: &str, _: Option<ccm_cloud_provider::LoadBalancerPlan>) {}
    fn routes(&self, _: BTreeMap<String, Vec<String>>) {}
    fn changes(&self, controller: &str, object: &str, changes: Vec<String>) {
        assert_eq!(controller, "tagging");
        let mut reported = self.0.lock().unwrap();
        if changes.is_empty() {
            reported.remove(object);
        } else {
            reported.insert(object.to_owned(), changes);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_reports_the_tags_and_label_and_writes_neither() {
    let mut ec2 = MockEc2::new();
    ec2.expect_create_tags().never();
    ec2.expect_delete_tags().never();
    let labels = FakeLabels::default();
    let config = TaggingConfig::new(tags(&[("team", "a")]));
    let mut core = Core::new(
        Arc::new(ec2),
        Arc::new(AllBut(Vec::new())),
        labels.clone(),
        &config,
        TaggingMetrics::default(),
        ControllerMetrics::default(),
        Clock::fixed(now()),
    );
    let sink = Arc::new(Reported::default());
    core.dry_run = Some(sink.clone());
    let core = Arc::new(core);
    super::observe(&core, watcher::Event::Apply(aws_node(1)));
    run_one(&core, |m| m.count("tag", "skipped") == 1).await;
    let reported = sink.0.lock().unwrap().clone();
    let changes = &reported["/api/v1/nodes/node-1"];
    assert!(
        changes[0].starts_with("tag instance i-0001 with team"),
        "{changes:?}"
    );
    assert!(changes[1].contains("k8s.io/cloud-provider-aws="), "{changes:?}");
    assert!(labels.0.lock().unwrap().is_empty(), "no label written");
}
