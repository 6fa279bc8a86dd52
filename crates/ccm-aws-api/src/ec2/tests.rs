//! The wire helpers of the EC2 port.

use super::*;

#[test]
fn unknown_ids_are_read_from_aws_messages() {
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-1, i-2' do not exist"),
        BTreeSet::from(["i-1", "i-2"])
    );
    assert_eq!(
        unknown_instance_ids("The instance ID 'i-0abc' does not exist"),
        BTreeSet::from(["i-0abc"])
    );
    // Moto's wording for many IDs (the list joined with ", ").
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-0123456789abcdef0, i-0fedcba9876543210' do not exist"),
        BTreeSet::from(["i-0123456789abcdef0", "i-0fedcba9876543210"])
    );
}

#[test]
fn messages_without_a_quoted_list_name_no_ids() {
    assert!(unknown_instance_ids("something else").is_empty());
    assert!(unknown_instance_ids("").is_empty());
    assert!(unknown_instance_ids("'").is_empty());
    assert!(unknown_instance_ids("''").is_empty());
    assert!(unknown_instance_ids("The instance ID 'i-1 does not exist").is_empty());
    assert!(unknown_instance_ids("'é'").is_empty());
}

#[test]
fn only_the_first_quoted_span_names_ids() {
    // A later quoted span (a request ID, a parameter) must not merge with the list: the span between the
    // first and the last quote would end in `i-2' (request 'abc`, which is no ID, and leave i-2 unknown.
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-1, i-2' do not exist (request 'abc')"),
        BTreeSet::from(["i-1", "i-2"])
    );
    assert_eq!(
        unknown_instance_ids("The instance ID 'i-1' does not exist; see 'i-2'"),
        BTreeSet::from(["i-1"])
    );
}

#[test]
fn list_items_that_are_not_instance_ids_are_dropped() {
    assert_eq!(
        unknown_instance_ids("The instance IDs 'i-1,,  i-2 , vol-1, i-, i-x y, i-é' do not exist"),
        BTreeSet::from(["i-1", "i-2"])
    );
}
