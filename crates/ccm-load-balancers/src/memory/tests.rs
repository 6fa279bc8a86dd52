#![allow(clippy::unwrap_used)]

use super::*;
use tokio::time::Instant;

#[test]
fn an_operation_that_overlaps_another_leaves_no_memory() {
    let memory = HostMemory::default();
    let entry = |n: u64| Entry {
        fingerprint: n,
        read_at: Instant::now(),
        state: Remembered::Classic(ClassicMemory::empty_for_tests()),
    };
    let alone = memory.begin("lb");
    memory.finish(alone, Some(entry(1)));
    assert!(memory.holds("lb"));
    // Two operations at once: neither result is kept.
    let first = memory.begin("lb");
    assert_eq!(first.entry.as_ref().map(|e| e.fingerprint), Some(1));
    assert!(!memory.holds("lb"), "taken out while in progress");
    let second = memory.begin("lb");
    assert!(second.entry.is_none());
    memory.finish(first, Some(entry(2)));
    memory.finish(second, Some(entry(3)));
    assert!(!memory.holds("lb"));
    // Forgotten while in progress (deleted): not put back.
    let third = memory.begin("lb");
    memory.forget("lb");
    memory.finish(third, Some(entry(4)));
    assert!(!memory.holds("lb"));
}
