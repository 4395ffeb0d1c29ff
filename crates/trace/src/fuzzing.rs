//! The fuzz harness, shared by the cargo-fuzz target
//! (`fuzz/fuzz_targets/trace_file.rs`) and the stable test that runs it on
//! a bounded number of generated inputs (`tests/fuzz_harness.rs`), so CI
//! exercises exactly what the fuzzer does even without a nightly compiler.
//!
//! Not part of the public API.

use std::io::Cursor;

use vantage_core::Nanos;

use crate::connection::{ConnectionTable, TableConfig};
use crate::decode::{decode, decode_frame, LinkType};
use crate::file::{self, TraceReader};

/// Every link type the decoder knows, plus one it does not.
pub const LINK_TYPES: [LinkType; 13] = [
    LinkType::NULL,
    LinkType::ETHERNET,
    LinkType::FDDI,
    LinkType::RAW_12,
    LinkType::RAW_14,
    LinkType::RAW,
    LinkType::LOOP,
    LinkType::LINUX_SLL,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::LINUX_SLL2,
    LinkType(147),
    LinkType::ETHERNET,
];

/// Feeds `data` to the file reader, the decoder and the connection table
/// (as a whole capture file), and to the decoder alone (as one frame of a
/// link type chosen by its first byte). Panics only if an invariant of the
/// crate is broken; malformed input must give errors or skip reasons.
pub fn trace_file(data: &[u8]) {
    read_as_file(data);
    if let Some((&selector, frame)) = data.split_first() {
        let link_type = LINK_TYPES[usize::from(selector) % LINK_TYPES.len()];
        // A wire length larger than the frame exercises the offload path.
        let original_len = frame.len() as u32 + u32::from(selector);
        if let Ok(segment) = decode_frame(link_type, Nanos(1), frame, original_len) {
            assert!(segment.payload.len() as u64 <= u64::from(segment.payload_len));
            assert!(segment.options.sack_blocks().len() <= 4);
        }
    }
}

fn read_as_file(data: &[u8]) {
    let Ok(mut reader) = TraceReader::from_reader("fuzz-input", Cursor::new(data.to_vec())) else {
        return;
    };
    let config = TableConfig {
        close_linger: Nanos::from_millis(1),
        idle_timeout: Nanos::from_secs(1),
        time_wait: Nanos::from_secs(2),
        max_tombstones: 4,
        ..TableConfig::default()
    };
    let mut table = ConnectionTable::new(config);
    let mut recorded = 0u64;
    let mut check = |table: &mut ConnectionTable| {
        while let Some(connection) = table.pop_finished() {
            let segments = connection.from_initiator.segments + connection.from_responder.segments;
            assert_eq!(segments, connection.segments.len() as u64);
            assert!(connection.first_timestamp <= connection.last_timestamp);
            for pair in connection.segments.windows(2) {
                assert!(
                    pair[0].timestamp <= pair[1].timestamp,
                    "monotonic per connection"
                );
            }
            for record in &connection.segments {
                assert!(connection.sack_blocks_of(record).len() == usize::from(record.sack_count));
            }
            recorded += segments;
        }
    };
    loop {
        match reader.next_packet() {
            Ok(Some(packet)) => {
                assert!(packet.data.len() <= file::MAX_PCAPNG_BLOCK as usize);
                if let Ok(segment) = decode(&packet) {
                    assert!(segment.payload.len() as u64 <= u64::from(segment.payload_len));
                    table.observe(&segment);
                }
                check(&mut table);
            }
            Ok(None) => break,
            Err(error) => {
                assert!(
                    error.offset().is_some(),
                    "errors name a byte offset: {error}"
                );
                let location = error.location().expect("reading had begun");
                if location.compressed_read.is_none() {
                    assert!(location.offset <= data.len() as u64);
                }
                assert!(
                    matches!(reader.next_packet(), Ok(None)),
                    "a failed reader stops"
                );
                break;
            }
        }
    }
    table.finish_all();
    check(&mut table);
    let stats = *table.stats();
    assert_eq!(stats.connections_opened, stats.connections_finished);
    assert_eq!(
        recorded + stats.duplicates + stats.late_segments,
        stats.segments
    );
}
