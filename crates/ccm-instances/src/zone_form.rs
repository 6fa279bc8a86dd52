//! [`ZoneForm`]: whether a Node's zone label holds the zone name (`us-east-1a`) or the zone ID (`use1-az1`).
//!
//! A zone name maps to a physical zone differently in each AWS account; a zone ID is the same physical zone in
//! every account (kubernetes/cloud-provider-aws#1185). The two are told apart by their shape: a name starts with
//! the Region's name (letters, then its number), an ID with a short Region code that ends in digits.

use std::fmt;

/// What the cloud-node controller writes into `topology.kubernetes.io/zone` (and its beta twin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ZoneForm {
    /// The zone name (`us-east-1a`, `us-east-1-bos-1a`), as upstream.
    #[default]
    Name,
    /// The zone ID (`use1-az1`, `use1-bos1-az1`), from `DescribeAvailabilityZones`.
    Id,
}

impl ZoneForm {
    /// The form of a zone label's `value`, or `None` for a value that is neither (a label someone wrote by hand,
    /// a region alone).
    ///
    /// ```
    /// use ccm_instances::ZoneForm;
    ///
    /// assert_eq!(ZoneForm::of("us-east-1a"), Some(ZoneForm::Name));
    /// assert_eq!(ZoneForm::of("us-east-1-bos-1a"), Some(ZoneForm::Name));
    /// assert_eq!(ZoneForm::of("use1-az1"), Some(ZoneForm::Id));
    /// assert_eq!(ZoneForm::of("zone-a"), None);
    /// ```
    pub fn of(value: &str) -> Option<Self> {
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if !value.chars().all(allowed) {
            return None;
        }
        let mut parts = value.split('-');
        let first = parts.next()?;
        let rest: Vec<&str> = parts.collect();
        if rest.is_empty() || rest.iter().any(|p| p.is_empty()) {
            return None;
        }
        let letters = first.trim_end_matches(|c: char| c.is_ascii_digit());
        if letters.is_empty() || !letters.chars().all(|c| c.is_ascii_lowercase()) {
            return None;
        }
        if letters.len() < first.len() {
            // `use1`, `apne1`, `usgw1`: a Region code with its number.
            return Some(Self::Id);
        }
        // `us-east-1` and more: the Region's number, then the zone's letter or further segments.
        let number = rest
            .iter()
            .position(|p| p.starts_with(|c: char| c.is_ascii_digit()))?;
        let zoned = !rest[number].chars().all(|c| c.is_ascii_digit()) || number + 1 < rest.len();
        zoned.then_some(Self::Name)
    }

    /// `ZoneName` or `ZoneID`, the values of the cloud config's `NodeZoneLabel`.
    pub fn config_value(self) -> &'static str {
        match self {
            Self::Name => "ZoneName",
            Self::Id => "ZoneID",
        }
    }
}

impl fmt::Display for ZoneForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Name => "zone name",
            Self::Id => "zone ID",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_of_every_kind_of_zone_are_told_apart() {
        let table = [
            ("us-east-1a", Some(ZoneForm::Name)),
            ("us-gov-west-1b", Some(ZoneForm::Name)),
            ("cn-north-1a", Some(ZoneForm::Name)),
            ("ap-southeast-4c", Some(ZoneForm::Name)),
            ("us-east-1-bos-1a", Some(ZoneForm::Name)),
            ("us-east-1-wl1-bos-wlz-1", Some(ZoneForm::Name)),
            ("use1-az1", Some(ZoneForm::Id)),
            ("apne1-az4", Some(ZoneForm::Id)),
            ("usgw1-az2", Some(ZoneForm::Id)),
            ("use1-bos1-az1", Some(ZoneForm::Id)),
            ("use1-wl1-bos-wlz1", Some(ZoneForm::Id)),
            // Neither: left alone by the start-up check.
            ("us-east-1", None),
            ("zone-a", None),
            ("region-1", None),
            ("", None),
            ("use1", None),
            ("US-EAST-1A", None),
            ("us--east-1a", None),
            ("1a-b", None),
        ];
        for (value, form) in table {
            assert_eq!(ZoneForm::of(value), form, "{value:?}");
        }
    }

    #[test]
    fn the_config_values_and_the_display() {
        assert_eq!(ZoneForm::default(), ZoneForm::Name);
        assert_eq!(ZoneForm::Id.config_value(), "ZoneID");
        assert_eq!(ZoneForm::Name.config_value(), "ZoneName");
        assert_eq!(ZoneForm::Id.to_string(), "zone ID");
    }
}
