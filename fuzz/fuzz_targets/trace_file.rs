//! Arbitrary bytes through the trace file reader, the packet decoder and
//! the connection table (and through the decoder alone, as one frame of a
//! link type chosen by the first byte). The harness is
//! `vantage_trace::fuzzing::trace_file`, which a stable test also runs on
//! generated inputs (`crates/trace/tests/fuzz_harness.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vantage_trace::fuzzing::trace_file(data);
});
