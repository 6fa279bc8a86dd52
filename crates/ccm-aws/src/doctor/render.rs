//! The text form of a [`Report`] and a [`DeleteOutcome`], for people (`--json` serializes the same types).

use std::fmt;

use super::{DeleteOutcome, Finding, Outcome, Report};

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cluster = &self.cluster_id;
        if self.findings.is_empty() {
            writeln!(
                f,
                "cluster {cluster}: nothing leaked, no Node stuck, no load balancer failing"
            )?;
        } else {
            let leaked = self.findings.iter().filter(|x| x.kind.is_aws()).count();
            let removable = self.deletable().count();
            let others = self.findings.len() - leaked;
            writeln!(
                f,
                "cluster {cluster}: {leaked} leaked AWS resource(s) ({removable} removable with --delete), \
                 {others} Node(s)/Service(s) to look at"
            )?;
        }
        // Right under the summary: they say whether the findings can be trusted at all.
        for warning in &self.warnings {
            writeln!(f, "warning: {warning}")?;
        }
        for finding in &self.findings {
            writeln!(f)?;
            write!(f, "{finding}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.as_str(), self.id)?;
        if let Some(name) = &self.name {
            write!(f, " ({name})")?;
        }
        writeln!(f)?;
        if let Some(service) = &self.service {
            writeln!(f, "  service:  {service}")?;
        }
        if let (Some(age), Some(created)) = (self.age_seconds, &self.created) {
            writeln!(f, "  age:      {} (created {created})", age_text(age))?;
        }
        writeln!(f, "  reason:   {}", self.reason)?;
        for detail in &self.details {
            writeln!(f, "  - {detail}")?;
        }
        if self.deletable {
            writeln!(f, "  removable with --delete")?;
        }
        Ok(())
    }
}

impl fmt::Display for DeleteOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.removals.is_empty() {
            return writeln!(f, "--delete: nothing to remove");
        }
        for r in &self.removals {
            let what = match r.outcome {
                Outcome::Deleted => "deleted",
                Outcome::InUse => "still in use, run again later:",
                Outcome::Skipped => "skipped",
                Outcome::Failed => "FAILED",
            };
            write!(f, "{what} {} {}", r.kind.as_str(), r.id)?;
            match &r.message {
                Some(message) => writeln!(f, " ({message})")?,
                None => writeln!(f)?,
            }
        }
        Ok(())
    }
}

/// `3d4h`, `5h12m`, `7m`, `42s`.
fn age_text(seconds: u64) -> String {
    let (d, h, m) = (seconds / 86_400, seconds / 3_600 % 24, seconds / 60 % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{seconds}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, m) => format!("{h}h{m}m"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::age_text;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(age_text(42), "42s");
        assert_eq!(age_text(7 * 60 + 3), "7m");
        assert_eq!(age_text(5 * 3600 + 12 * 60), "5h12m");
        assert_eq!(age_text(3 * 86_400 + 4 * 3600 + 59), "3d4h");
    }
}
