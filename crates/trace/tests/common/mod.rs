//! Hand-built packets and capture files for the tests: `vantage_trace::synth`
//! lays out every byte from the RFCs and the pcap/pcapng specifications, so
//! the decoder and reader are checked against an independent construction.

#![allow(dead_code, unused_imports)]

pub use vantage_trace::synth::*;
