//! The cargo-fuzz harness (`vantage_trace::fuzzing::trace_file`, also run
//! by `fuzz/fuzz_targets/trace_file.rs`) on 100,000 generated inputs, so CI
//! exercises it on stable Rust in a few seconds. Inputs are mutations of
//! hand-built pcap, pcapng and gzip files (and of the small real traces
//! when `../shared/traces` is present), from a fixed seed: a failure is
//! reproducible, and the failing input is printed in hex.

mod common;

use common::*;

/// SplitMix64: small, seedable, good enough to drive mutations.
struct Generator(u64);

impl Generator {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            0
        } else {
            (self.next() % bound as u64) as usize
        }
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let handshake = |big_endian: bool, nanosecond: bool, link_type: u32| {
        let pcap = Pcap {
            big_endian,
            nanosecond,
            link_type,
            snap_length: 96,
        };
        let frames = [
            Tcp::new(("10.0.0.1", 1000), ("10.0.0.2", 80), 1, 0, SYN)
                .options(syn_options(1460, 7, 1)),
            Tcp::new(("10.0.0.2", 80), ("10.0.0.1", 1000), 9, 2, SYN | ACK)
                .options(syn_options(1400, 2, 5)),
            Tcp::new(("10.0.0.1", 1000), ("10.0.0.2", 80), 2, 10, ACK | PSH).payload(300),
            Tcp::new(("10.0.0.2", 80), ("10.0.0.1", 1000), 10, 302, ACK)
                .options(sack_options(&[(5, 9)])),
            Tcp::new(("2001:db8::1", 1000), ("2001:db8::2", 80), 2, 10, ACK | FIN),
        ];
        let records: Vec<Record> = frames
            .iter()
            .enumerate()
            .map(|(i, tcp)| {
                let frame = match link_type {
                    1 => tcp.ethernet(),
                    _ => tcp.ip_bytes(),
                };
                Record::new(1_000_000 * i as u64, frame).snapped(96)
            })
            .collect();
        pcap.file(&records)
    };
    let mut seeds = vec![
        handshake(false, false, 1),
        handshake(true, true, 101),
        handshake(false, true, 1),
    ];
    let mut pcapng = PcapNg::new(false);
    pcapng.section();
    pcapng.interface(&InterfaceSpec {
        link_type: 1,
        snap_length: 0,
        tsresol: Some(9),
        tsoffset_seconds: Some(-5),
    });
    pcapng.interface(&InterfaceSpec {
        link_type: 276,
        snap_length: 64,
        tsresol: Some(0x80 | 20),
        tsoffset_seconds: None,
    });
    let tcp = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 1, 1, ACK).payload(20);
    pcapng.enhanced_packet(0, 12345, &tcp.ethernet(), 74);
    let mut sll2 = vec![
        0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 4, 6, 2, 0, 0, 0, 0, 1, 0, 0,
    ];
    sll2.extend_from_slice(&tcp.ip_bytes());
    pcapng.enhanced_packet(1, 999, &sll2, sll2.len() as u32);
    pcapng.simple_packet(&tcp.ethernet());
    seeds.push(pcapng.out);
    seeds.push(gzip(&seeds[0]));
    if let Some(root) = shared_traces() {
        for small in [
            "zeek/tcp_truncated-header.pcap",
            "zeek/tcp_retransmit-timeout.pcapng",
            "zeek/tcp_http-on-irc-port-missing-syn.pcapng",
            "tcptrace/badsyns.dmp.gz",
        ] {
            seeds.push(std::fs::read(root.join(small)).unwrap());
        }
    }
    seeds
}

const INTERESTING_U32: [u32; 9] = [
    0,
    1,
    12,
    0xFF,
    0xFFFF,
    0x1_0000,
    0x7FFF_FFFF,
    0xFFFF_FFFC,
    0xFFFF_FFFF,
];

fn mutate(generator: &mut Generator, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = seeds[generator.below(seeds.len())].clone();
    let rounds = 1 + generator.below(6);
    for _ in 0..rounds {
        if bytes.is_empty() {
            bytes.push(generator.next() as u8);
        }
        let position = generator.below(bytes.len());
        match generator.below(8) {
            0 => bytes[position] ^= 1 << generator.below(8),
            1 => bytes[position] = generator.next() as u8,
            2 => {
                // An interesting 32-bit value in either byte order.
                let value = INTERESTING_U32[generator.below(INTERESTING_U32.len())];
                let raw = if generator.below(2) == 0 {
                    value.to_le_bytes()
                } else {
                    value.to_be_bytes()
                };
                for (i, byte) in raw.iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(position + i) {
                        *slot = *byte;
                    }
                }
            }
            3 => bytes.truncate(position),
            4 => {
                let end = (position + generator.below(64)).min(bytes.len());
                bytes.drain(position..end);
            }
            5 => {
                let insert: Vec<u8> = (0..generator.below(64))
                    .map(|_| generator.next() as u8)
                    .collect();
                bytes.splice(position..position, insert);
            }
            6 => {
                // Splice the tail of another seed.
                let other = &seeds[generator.below(seeds.len())];
                let from = generator.below(other.len());
                bytes.truncate(position);
                bytes.extend_from_slice(&other[from..]);
            }
            _ => {
                // Duplicate a range (repeats records).
                let end = (position + generator.below(256)).min(bytes.len());
                let copy = bytes[position..end].to_vec();
                bytes.splice(position..position, copy);
            }
        }
    }
    bytes
}

#[test]
fn generated_inputs_never_panic() {
    // 100,000 by default (about 3 s); VANTAGE_FUZZ_CASES and
    // VANTAGE_FUZZ_SEED run longer or other campaigns.
    let cases: u64 = std::env::var("VANTAGE_FUZZ_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(100_000);
    let seed: u64 = std::env::var("VANTAGE_FUZZ_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0x05EE_D0F7_CE55);
    let seeds = seeds();
    let mut generator = Generator(seed);
    let started = std::time::Instant::now();
    for case in 0..cases {
        let input = if case % 10 == 9 {
            // Pure noise behind a valid magic.
            let magic: &[u8] = match generator.below(3) {
                0 => &[0xD4, 0xC3, 0xB2, 0xA1],
                1 => &[0x0A, 0x0D, 0x0D, 0x0A],
                _ => &[0x1F, 0x8B],
            };
            let mut bytes = magic.to_vec();
            bytes.extend((0..generator.below(512)).map(|_| generator.next() as u8));
            bytes
        } else {
            mutate(&mut generator, &seeds)
        };
        let outcome = std::panic::catch_unwind(|| vantage_trace::fuzzing::trace_file(&input));
        if outcome.is_err() {
            let hex: String = input.iter().map(|b| format!("{b:02x}")).collect();
            panic!("case {case} panicked on input {hex}");
        }
    }
    eprintln!(
        "{cases} fuzz inputs in {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn the_seeds_themselves_are_valid() {
    for seed in seeds() {
        let reader = vantage_trace::TraceReader::from_reader("seed", std::io::Cursor::new(seed));
        let summary = vantage_trace::summarize_reader(reader.unwrap(), Default::default()).unwrap();
        assert!(summary.tcp_segments > 0);
    }
}
