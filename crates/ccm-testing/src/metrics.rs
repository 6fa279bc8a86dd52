//! The CCM's `/metrics`, scraped the way Prometheus does: over HTTPS from `--secure-port` (self-signed
//! certificate, `/metrics` in `--authorization-always-allow-paths`).

use std::{collections::BTreeMap, time::Duration};

/// Why `/metrics` could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot scrape https://127.0.0.1:{port}/metrics: {source}")]
pub struct ScrapeError {
    port: u16,
    source: reqwest::Error,
}

/// The text exposition of the CCM serving `--secure-port=<port>` on 127.0.0.1.
pub async fn scrape(port: u16) -> Result<String, ScrapeError> {
    let err = |source| ScrapeError { port, source };
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(err)?;
    let response = client
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(err)?;
    response.text().await.map_err(err)
}

/// `aws_api_requests_total` summed per operation (every service, outcome and retry) from a scrape's text.
pub fn requests_by_operation(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("aws_api_requests_total{") else {
            continue;
        };
        let op = rest
            .split("operation=\"")
            .nth(1)
            .and_then(|r| r.split('"').next());
        let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
        if let (Some(op), Some(value)) = (op, value) {
            *out.entry(op.to_owned()).or_insert(0.0) += value;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_outcome_of_an_operation() {
        let text = "# HELP aws_api_requests_total x\n\
            aws_api_requests_total{operation=\"CreateRoute\",outcome=\"success\",service=\"ec2\"} 3\n\
            aws_api_requests_total{operation=\"CreateRoute\",outcome=\"throttled\",service=\"ec2\"} 1\n\
            aws_api_requests_total{operation=\"DescribeInstances\",outcome=\"success\",service=\"ec2\"} 7\n\
            aws_api_request_duration_seconds_count{operation=\"CreateRoute\"} 4\n";
        let got = requests_by_operation(text);
        assert_eq!(got.get("CreateRoute"), Some(&4.0));
        assert_eq!(got.get("DescribeInstances"), Some(&7.0));
        assert_eq!(got.len(), 2);
    }
}
