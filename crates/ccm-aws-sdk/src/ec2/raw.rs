//! The unbatched EC2 calls (`Raw`), which the batchers' executors share: paging, lookup splitting on
//! timeouts, and the tag calls.

use super::*;

impl Raw {
    /// Answers each lookup request of a batch from as few `DescribeInstances` calls as possible.
    pub(super) async fn lookup_batch(&self, requests: Vec<Vec<InstanceId>>) -> Vec<Result<Vec<Instance>>> {
        let wanted: BTreeSet<&InstanceId> = requests.iter().flatten().collect();
        let wanted: Vec<InstanceId> = wanted.into_iter().cloned().collect();
        let lookup = split_lookup(&self.lookup_size, &wanted, |chunk, splittable| async move {
            self.instances_by_id_unbatched(&chunk, splittable).await
        });
        let found: HashMap<InstanceId, Instance> = match lookup.await {
            Ok(instances) => instances.into_iter().map(|i| (i.id.clone(), i)).collect(),
            Err(err) => return requests.iter().map(|_| Err(duplicate(&err))).collect(),
        };
        requests
            .into_iter()
            .map(|ids| Ok(ids.iter().filter_map(|id| found.get(id).cloned()).collect()))
            .collect()
    }

    /// `DescribeInstances` by ID, where unknown IDs are dropped rather than failing the call.
    ///
    /// AWS fails the whole call with `InvalidInstanceID.NotFound` when any ID is unknown, naming the unknown ones
    /// in the message; those are removed and the rest asked again: two calls in all. Should the message not name
    /// them all (the second call fails the same way) or none at all, the remaining IDs are asked by
    /// `instance-id` filter instead, which ignores unknown IDs (200 values per call).
    ///
    /// A `splittable` lookup is not retried after a timeout or another transient fault: its caller asks again in
    /// halves ([`split_lookup`]).
    pub(super) async fn instances_by_id_unbatched(
        &self,
        ids: &[InstanceId],
        splittable: bool,
    ) -> Result<Vec<Instance>> {
        let transient_attempts = if splittable { 1 } else { u32::MAX };
        let mut remaining: Vec<InstanceId> = ids.to_vec();
        for attempt in 0..2 {
            if remaining.is_empty() {
                return Ok(Vec::new());
            }
            let request: Vec<String> = remaining.iter().map(|i| i.as_str().to_owned()).collect();
            let result = self
                .rt
                .call_with(DESCRIBE_INSTANCES, transient_attempts, || {
                    self.client
                        .describe_instances()
                        .set_instance_ids(Some(request.clone()))
                        .send()
                })
                .await;
            match result {
                Ok(out) => {
                    let mut instances: Vec<Instance> = out
                        .reservations()
                        .iter()
                        .flat_map(|r| r.instances())
                        .filter_map(instance)
                        .collect();
                    // AWS pages ID lookups only beyond 1,000 results; follow a token anyway rather than drop data.
                    if let Some(token) = next(out.next_token()) {
                        instances.extend(self.describe_pages(Some(request), None, Some(token)).await?);
                    }
                    return Ok(instances);
                }
                Err(err) if err.code() == Some("InvalidInstanceID.NotFound") && attempt == 0 => {
                    let unknown = ccm_aws_api::ec2::unknown_instance_ids(err.message().unwrap_or_default());
                    let before = remaining.len();
                    remaining.retain(|id| !unknown.contains(id.as_str()));
                    if remaining.len() == before {
                        tracing::debug!(error = %err, "unknown instance IDs not named; looking up by filter");
                        break;
                    }
                }
                Err(err)
                    if matches!(
                        err.code(),
                        Some("InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed")
                    ) =>
                {
                    break;
                }
                Err(err) => return Err(err),
            }
        }
        self.instances_by_id_filter(&remaining).await
    }

    pub(super) async fn instances_by_id_filter(&self, ids: &[InstanceId]) -> Result<Vec<Instance>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(MAX_FILTER_VALUES) {
            let filter = sdk_filters(&[Filter::new("instance-id", chunk.iter().map(InstanceId::as_str))]);
            out.extend(self.instances_filtered(filter).await?);
        }
        Ok(out)
    }

    /// A listing by filter, page by page; a page that times out is asked again smaller ([`shrinking_pages`]).
    pub(super) async fn instances_filtered(
        &self,
        filters: Option<Vec<sdk::Filter>>,
    ) -> Result<Vec<Instance>> {
        shrinking_pages(&self.page_size, |token, page, splittable| {
            self.listing_page(filters.clone(), token, page, splittable)
        })
        .await
    }

    /// One page of [`instances_filtered`](Self::instances_filtered), from `token`.
    pub(super) async fn instances_page(
        &self,
        filters: Option<Vec<sdk::Filter>>,
        token: Option<String>,
    ) -> Result<(Vec<Instance>, Option<String>)> {
        shrinking_page(&self.page_size, token, |token, page, splittable| {
            self.listing_page(filters.clone(), token, page, splittable)
        })
        .await
    }

    /// One `DescribeInstances` of a listing: at most `page` instances; retried on transient failures unless the
    /// caller will ask again smaller (`splittable`).
    async fn listing_page(
        &self,
        filters: Option<Vec<sdk::Filter>>,
        token: Option<String>,
        page: usize,
        splittable: bool,
    ) -> Result<(Vec<Instance>, Option<String>)> {
        let transient_attempts = if splittable { 1 } else { u32::MAX };
        let max_results = i32::try_from(page).unwrap_or(1000).clamp(5, 1000);
        let out = self
            .rt
            .call_with(DESCRIBE_INSTANCES, transient_attempts, || {
                self.client
                    .describe_instances()
                    .set_filters(filters.clone())
                    .set_next_token(token.clone())
                    .max_results(max_results)
                    .send()
            })
            .await?;
        let instances: Vec<Instance> = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(instance)
            .collect();
        Ok((instances, next(out.next_token())))
    }

    pub(super) async fn describe_pages(
        &self,
        ids: Option<Vec<String>>,
        filters: Option<Vec<sdk::Filter>>,
        mut token: Option<String>,
    ) -> Result<Vec<Instance>> {
        let mut out = Vec::new();
        let mut pages = crate::runtime::Pages::default();
        loop {
            let page = self
                .rt
                .call(DESCRIBE_INSTANCES, || {
                    let request = self
                        .client
                        .describe_instances()
                        .set_instance_ids(ids.clone())
                        .set_filters(filters.clone())
                        .set_next_token(token.clone());
                    // MaxResults cannot be combined with instance IDs.
                    if ids.is_none() {
                        request.max_results(1000)
                    } else {
                        request
                    }
                    .send()
                })
                .await?;
            out.extend(
                page.reservations()
                    .iter()
                    .flat_map(|r| r.instances())
                    .filter_map(instance),
            );
            token = pages.next(DESCRIBE_INSTANCES, next(page.next_token()))?;
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Runs one tagging call for the union of a batch's resources; should AWS refuse it for one bad resource
    /// (unknown or malformed ID), each request is retried alone so that the others still succeed.
    pub(super) async fn tag_batch<F, Fut>(&self, requests: Vec<Vec<String>>, call: F) -> Vec<Result<()>>
    where
        F: Fn(Raw, Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<()>>,
    {
        let union: BTreeSet<&String> = requests.iter().flatten().collect();
        let union: Vec<String> = union.into_iter().cloned().collect();
        let mut failure = None;
        for chunk in union.chunks(MAX_IDS_PER_CALL) {
            if let Err(err) = call(self.clone(), chunk.to_vec()).await {
                failure = Some(err);
                break;
            }
        }
        match failure {
            None => requests.iter().map(|_| Ok(())).collect(),
            Some(err)
                if requests.len() > 1 && matches!(err.kind(), ErrorKind::NotFound | ErrorKind::Invalid) =>
            {
                let mut out = Vec::with_capacity(requests.len());
                for resources in requests {
                    out.push(call(self.clone(), resources).await);
                }
                out
            }
            Some(err) => requests.iter().map(|_| Err(duplicate(&err))).collect(),
        }
    }

    pub(super) async fn create_tags(&self, resources: &[String], tags: &Tags) -> Result<()> {
        self.rt
            .call(CREATE_TAGS, || {
                self.client
                    .create_tags()
                    .set_resources(Some(resources.to_vec()))
                    .set_tags(Some(sdk_tags(tags)))
                    .send()
            })
            .await?;
        Ok(())
    }

    pub(super) async fn delete_tags(
        &self,
        resources: &[String],
        tags: &BTreeMap<String, Option<String>>,
    ) -> Result<()> {
        let tags: Vec<sdk::Tag> = tags
            .iter()
            .map(|(k, v)| sdk::Tag::builder().key(k).set_value(v.clone()).build())
            .collect();
        self.rt
            .call(DELETE_TAGS, || {
                self.client
                    .delete_tags()
                    .set_resources(Some(resources.to_vec()))
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }
}
