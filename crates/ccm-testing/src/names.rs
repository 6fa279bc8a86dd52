use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique across test processes sharing one environment: `prefix`, the process ID and a per-process
/// counter, lower-case and at most 63 characters, so it is valid as a Kubernetes object name, an AWS tag value
/// and (for short prefixes) a load balancer name.
///
/// Process ID plus counter is unique for the lifetime of one environment, which is all that sharing needs;
/// time or randomness would make failures harder to reproduce.
pub fn unique_name(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!("-{}-{n}", std::process::id());
    let mut prefix: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    prefix.truncate(63 - suffix.len());
    format!("{prefix}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_valid_and_bounded() {
        let a = unique_name("Node_A");
        let b = unique_name("Node_A");
        assert_ne!(a, b);
        assert!(a.starts_with("node-a-"), "{a}");
        let long = unique_name(&"x".repeat(100));
        assert_eq!(long.len(), 63);
        assert!(
            long.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }
}
