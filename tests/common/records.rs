//! A host's stored gateway records, for the snapshot tests: applied as a
//! gateway hands them over, restored, and read from hex fixtures.

use std::collections::BTreeMap;

use paceline::gateway::{GatewayConfig, GatewayCore};

/// The format version this build writes.
pub const CURRENT_FORMAT: u8 = 6;

/// A host's storage: records applied as `take_changed_records` hands them.
pub fn apply(store: &mut BTreeMap<String, Vec<u8>>, g: &mut GatewayCore) -> usize {
    let changed = g.take_changed_records();
    for (key, value) in &changed {
        match value {
            Some(bytes) => store.insert(key.clone(), bytes.clone()),
            None => store.remove(key),
        };
    }
    changed.len()
}

/// `g` as it is, and two gateways that continue it after a restart: one
/// restored from its whole snapshot, one from the records a host stored as
/// `g` handed them over (`store`, brought up to date first).
pub fn kept_and_restored(
    mut g: GatewayCore,
    store: &mut BTreeMap<String, Vec<u8>>,
) -> [(&'static str, GatewayCore); 3] {
    apply(store, &mut g);
    let from_snapshot = GatewayCore::restore(&g.snapshot(), GatewayConfig::default()).unwrap();
    let from_records = restored(store);
    [
        ("not restarted", g),
        ("restored from its snapshot", from_snapshot),
        ("restored from its stored records", from_records),
    ]
}

pub fn restored(store: &BTreeMap<String, Vec<u8>>) -> GatewayCore {
    GatewayCore::restore_records(
        store.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
        GatewayConfig::default(),
    )
    .unwrap()
}

/// Records stored as a JSON object of key → hex.
pub fn records_from_hex(json: &str) -> BTreeMap<String, Vec<u8>> {
    let hex: BTreeMap<String, String> = serde_json::from_str(json).unwrap();
    hex.into_iter()
        .map(|(key, text)| {
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
                .collect();
            (key, bytes)
        })
        .collect()
}
