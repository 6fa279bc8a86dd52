//! One annotation value through its parser (`parse_value`, chosen by the first byte), the whole table
//! (`Annotations::parse`), boolean and CIDR parsing (source ranges). Must never panic; every rejection names the
//! annotation.
#![no_main]

use std::collections::BTreeMap;

use ccm_load_balancers::annotations::{Annotations, Key, is_cidr, parse_bool, parse_value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let key = Key::ALL[usize::from(selector) % Key::ALL.len()];
    let _ = parse_value(key, raw);
    let _ = parse_bool(raw);
    let _ = is_cidr(raw);
    let table = Annotations::parse(&BTreeMap::from([(key.name().to_owned(), raw.to_owned())]));
    for problem in &table.problems {
        assert_eq!(problem.field, key.name(), "a problem must name the annotation");
    }
});
