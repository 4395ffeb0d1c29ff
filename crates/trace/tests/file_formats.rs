//! The file reader on hand-built files: pcap in both byte orders and both
//! resolutions, pcapng with two interfaces of different link types and
//! timestamp resolutions, several sections, gzip; and corrupt or truncated
//! files, whose errors must name the byte offset.

mod common;

use std::io::Cursor;

use common::*;
use proptest::prelude::*;
use vantage_core::Nanos;
use vantage_trace::{decode, FormatProblem, LinkType, TraceError, TraceFormat, TraceReader};

fn reader(bytes: Vec<u8>) -> Result<TraceReader, TraceError> {
    TraceReader::from_reader("test.pcap", Cursor::new(bytes))
}

/// Timestamp, link type, interface, captured bytes, original length.
type ReadPacket = (Nanos, LinkType, u32, Vec<u8>, u32);

fn read_all(bytes: Vec<u8>) -> Result<Vec<ReadPacket>, TraceError> {
    let mut reader = reader(bytes)?;
    let mut packets = Vec::new();
    while let Some(packet) = reader.next_packet()? {
        packets.push((
            packet.timestamp,
            packet.link_type,
            packet.interface,
            packet.data.to_vec(),
            packet.original_len,
        ));
    }
    Ok(packets)
}

fn two_frames() -> Vec<Record> {
    let a = Tcp::new(("10.0.0.1", 1000), ("10.0.0.2", 80), 1, 0, SYN).ethernet();
    let b = Tcp::new(("10.0.0.2", 80), ("10.0.0.1", 1000), 9, 2, SYN | ACK).ethernet();
    vec![
        Record::new(1_700_000_000_123_456_789, a),
        Record::new(1_700_000_001_000_000_001, b),
    ]
}

#[test]
fn pcap_all_byte_orders_and_resolutions() {
    for big_endian in [false, true] {
        for nanosecond in [false, true] {
            let pcap = Pcap {
                big_endian,
                nanosecond,
                ..Pcap::ethernet()
            };
            let records = two_frames();
            let mut reader = reader(pcap.file(&records)).unwrap();
            assert_eq!(
                reader.format(),
                TraceFormat::Pcap {
                    big_endian,
                    nanosecond,
                    modified: false,
                    link_type: LinkType::ETHERNET,
                    snap_length: 65_535
                }
            );
            let first = reader.next_packet().unwrap().unwrap();
            let expected = if nanosecond {
                1_700_000_000_123_456_789
            } else {
                1_700_000_000_123_456_000
            };
            assert_eq!(
                first.timestamp,
                Nanos(expected),
                "{big_endian} {nanosecond}"
            );
            assert_eq!(first.data, &records[0].frame[..]);
            assert_eq!(first.offset, 24);
            let segment = decode(&first).unwrap();
            assert!(segment.flags.syn());
            let second = reader.next_packet().unwrap().unwrap();
            assert_eq!(second.offset, 24 + 16 + records[0].frame.len() as u64);
            assert!(reader.next_packet().unwrap().is_none());
            assert!(reader.next_packet().unwrap().is_none());
        }
    }
}

#[test]
fn pcap_snaplen_truncated_records_are_read() {
    // pcap-file 2.0.0 rejects these; here they are ordinary packets.
    let pcap = Pcap {
        snap_length: 68,
        ..Pcap::ethernet()
    };
    let frame = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 1, 1, ACK)
        .payload(1000)
        .ethernet();
    let records = vec![Record::new(5, frame.clone()).snapped(68)];
    let packets = read_all(pcap.file(&records)).unwrap();
    assert_eq!(packets[0].3.len(), 68);
    assert_eq!(packets[0].4, frame.len() as u32);
}

#[test]
fn modified_pcap_records_have_24_byte_headers() {
    let frame = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 1, 1, ACK).ethernet();
    let mut bytes = Pcap::ethernet().header();
    bytes[0..4].copy_from_slice(&0xA1B2_CD34u32.to_le_bytes());
    bytes.extend_from_slice(&7u32.to_le_bytes());
    bytes.extend_from_slice(&8u32.to_le_bytes());
    bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[0; 8]); // ifindex, protocol, packet type, padding
    bytes.extend_from_slice(&frame);
    let packets = read_all(bytes).unwrap();
    assert_eq!(packets.len(), 1);
    assert_eq!(packets[0].0, Nanos(7_000_008_000));
    assert_eq!(packets[0].3, frame);
}

fn two_interface_pcapng(big_endian: bool) -> Vec<u8> {
    let mut file = PcapNg::new(big_endian);
    file.section();
    // Interface 0: Ethernet, default microseconds.
    file.interface(&InterfaceSpec {
        link_type: 1,
        snap_length: 0,
        tsresol: None,
        tsoffset_seconds: None,
    });
    // Interface 1: raw IP, nanoseconds, offset +10 s.
    file.interface(&InterfaceSpec {
        link_type: 101,
        snap_length: 262_144,
        tsresol: Some(9),
        tsoffset_seconds: Some(10),
    });
    // A name resolution block, to be skipped.
    file.block(4, &[0, 0, 0, 0]);
    let tcp = Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), 1, 1, ACK).payload(3);
    let ethernet = tcp.ethernet();
    let ip = tcp.ip_bytes();
    file.enhanced_packet(0, 1_500_000_000_000_001, &ethernet, ethernet.len() as u32);
    file.enhanced_packet(1, 1_500_000_000_000_000_007, &ip, ip.len() as u32);
    // A simple packet block: interface 0, no timestamp.
    file.simple_packet(&ethernet);
    // A second section, other byte order, binary resolution 2^-10 s.
    let mut second = PcapNg::new(!big_endian);
    second.section();
    second.interface(&InterfaceSpec {
        link_type: 113,
        snap_length: 0,
        tsresol: Some(0x80 | 10),
        tsoffset_seconds: None,
    });
    let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
    sll.extend_from_slice(&ip);
    second.enhanced_packet(0, 3 * 1024 + 512, &sll, sll.len() as u32);
    [file.out, second.out].concat()
}

#[test]
fn pcapng_interfaces_resolutions_and_sections() {
    for big_endian in [false, true] {
        let packets = read_all(two_interface_pcapng(big_endian)).unwrap();
        assert_eq!(packets.len(), 4);
        assert_eq!(
            (packets[0].0, packets[0].1, packets[0].2),
            (Nanos(1_500_000_000_000_001_000), LinkType::ETHERNET, 0)
        );
        assert_eq!(
            (packets[1].0, packets[1].1, packets[1].2),
            (Nanos(1_500_000_010_000_000_007), LinkType::RAW, 1)
        );
        assert_eq!(
            (packets[2].0, packets[2].1),
            (Nanos::ZERO, LinkType::ETHERNET)
        );
        assert_eq!(
            (packets[3].0, packets[3].1),
            (Nanos(3_500_000_000), LinkType::LINUX_SLL)
        );
        // All four decode to the same segment.
        let mut reader = reader(two_interface_pcapng(big_endian)).unwrap();
        assert_eq!(reader.format(), TraceFormat::PcapNg { big_endian });
        while let Some(packet) = reader.next_packet().unwrap() {
            let segment = decode(&packet).unwrap();
            assert_eq!((segment.seq, segment.payload_len), (1, 3));
        }
    }
}

#[test]
fn gzip_is_detected_by_content() {
    let plain = Pcap::ethernet().file(&two_frames());
    let compressed = gzip(&plain);
    let mut reader = reader(compressed.clone()).unwrap();
    assert!(reader.compressed());
    assert_eq!(
        read_all(compressed).unwrap(),
        read_all(plain.clone()).unwrap()
    );
    assert!(reader.next_packet().unwrap().is_some());
    // pcapng inside gzip, from a file with a misleading name.
    let file = TempFile::new("not-compressed.pcap", &gzip(&two_interface_pcapng(false)));
    let summary = vantage_trace::summarize(&file.path).unwrap();
    assert!(summary.compressed);
    assert_eq!(summary.packets, 4);
    // Concatenated gzip members are one stream.
    let half = plain.len() / 2;
    let members = [gzip(&plain[..half]), gzip(&plain[half..])].concat();
    assert_eq!(read_all(members).unwrap().len(), 2);
}

#[test]
fn other_compressions_and_garbage_are_named() {
    let error = reader(vec![0x28, 0xB5, 0x2F, 0xFD, 0, 0]).err().unwrap();
    assert!(error.to_string().contains("zstd"), "{error}");
    let error = reader(b"GET / HTTP/1.1\r\n".to_vec()).err().unwrap();
    assert_eq!(
        error.to_string(),
        "test.pcap: byte 0: not a pcap or pcapng file (first bytes [47, 45, 54, 20])"
    );
    let error = reader(Vec::new()).err().unwrap();
    assert!(error.to_string().contains("empty file"));
    let error = TraceReader::open("/nonexistent/trace.pcap").err().unwrap();
    assert!(error
        .to_string()
        .starts_with("/nonexistent/trace.pcap: cannot open"));
    assert_eq!(error.offset(), None);
}

#[test]
fn truncated_pcap_names_the_record_offset() {
    let file = Pcap::ethernet().file(&two_frames());
    let second_record = 24 + 16 + two_frames()[0].frame.len();
    // Cut inside the second record's data.
    let mut reader = reader(file[..second_record + 20].to_vec()).unwrap();
    assert!(reader.next_packet().unwrap().is_some());
    let error = reader.next_packet().unwrap_err();
    assert_eq!(error.offset(), Some(second_record as u64));
    assert_eq!(
        error.to_string(),
        format!(
            "test.pcap: byte {second_record}: truncated packet record: needs {} bytes, the file ends after 20",
            16 + two_frames()[1].frame.len()
        )
    );
    // A failed reader stops.
    assert!(reader.next_packet().unwrap().is_none());
    // Cut inside a record header.
    let error = read_all(file[..second_record + 3].to_vec()).unwrap_err();
    assert!(
        error.to_string().contains("truncated packet record header"),
        "{error}"
    );
    assert_eq!(error.offset(), Some(second_record as u64));
    // Cut inside the file header.
    let error = read_all(file[..10].to_vec()).unwrap_err();
    assert!(
        error.to_string().contains("truncated pcap file header"),
        "{error}"
    );
}

#[test]
fn oversized_record_length_is_an_error_not_an_allocation() {
    let mut file = Pcap::ethernet().file(&two_frames());
    // Second record's captured length field: 70,000 bytes, snap 65,535.
    let second_record = 24 + 16 + two_frames()[0].frame.len();
    file[second_record + 8..second_record + 12].copy_from_slice(&70_000u32.to_le_bytes());
    let error = read_all(file.clone()).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("test.pcap: byte {second_record}: packet record length 70000 exceeds the limit 65535 (snap length 65535)")
    );
    // 4 GB length: refused the same way, nothing allocated.
    file[second_record + 8..second_record + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        read_all(file).unwrap_err(),
        TraceError::Malformed {
            problem: FormatProblem::RecordTooLong { .. },
            ..
        }
    ));
}

#[test]
fn corrupt_pcapng_blocks_name_their_offset() {
    let file = two_interface_pcapng(false);
    // Block lengths: SHB 28, IDB 0, IDB 1, NRB, EPB...
    let shb = 28;
    // Trailing length of the SHB changed.
    let mut corrupt = file.clone();
    corrupt[shb - 4] = 0xFF;
    let error = read_all(corrupt).unwrap_err();
    assert_eq!(error.offset(), Some(shb as u64 - 4));
    assert!(error.to_string().contains("trailing length"), "{error}");
    // First IDB's length not a multiple of 4.
    let mut corrupt = file.clone();
    corrupt[shb + 4] = corrupt[shb + 4].wrapping_add(1);
    let error = read_all(corrupt).unwrap_err();
    assert_eq!(error.offset(), Some(shb as u64 + 4));
    assert!(error.to_string().contains("pcapng block length"), "{error}");
    // A huge block length: refused before any allocation.
    let mut corrupt = file.clone();
    corrupt[shb + 4..shb + 8].copy_from_slice(&0x7FFF_FFFCu32.to_le_bytes());
    let error = read_all(corrupt).unwrap_err();
    assert!(matches!(
        error,
        TraceError::Malformed {
            problem: FormatProblem::BadBlockLength { .. },
            ..
        }
    ));
    // Cut in the middle: the last block is named.
    let error = read_all(file[..file.len() - 10].to_vec()).unwrap_err();
    assert!(
        error.to_string().contains("truncated pcapng block"),
        "{error}"
    );
    // A packet naming an interface the section did not describe.
    let mut orphan = PcapNg::new(false);
    orphan.section();
    orphan.enhanced_packet(3, 0, &[0; 20], 20);
    let error = read_all(orphan.out).unwrap_err();
    assert_eq!(error.offset(), Some(28 + 8));
    assert!(error.to_string().contains("interface 3"), "{error}");
}

#[test]
fn truncated_gzip_reports_decompressed_offset() {
    let records: Vec<Record> = (0..2_000)
        .map(|i| {
            Record::new(
                i * 1_000,
                Tcp::new(("10.0.0.1", 1), ("10.0.0.2", 2), i as u32, 0, ACK)
                    .payload(200)
                    .ethernet(),
            )
        })
        .collect();
    let compressed = gzip(&Pcap::ethernet().file(&records));
    let cut = compressed[..compressed.len() / 2].to_vec();
    let mut reader = reader(cut).unwrap();
    let mut packets = 0;
    let error = loop {
        match reader.next_packet() {
            Ok(Some(_)) => packets += 1,
            Ok(None) => panic!("a cut gzip stream must be an error"),
            Err(error) => break error,
        }
    };
    assert!(packets > 100);
    let message = error.to_string();
    assert!(
        message.starts_with("test.pcap: decompressed byte "),
        "{message}"
    );
    assert!(message.contains("compressed bytes read"), "{message}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Random mutations of a real trace (or, without the shared traces, of
    /// a hand-built one) never panic: every outcome is packets, skip
    /// reasons or an error naming an offset.
    #[test]
    fn mutated_real_trace_never_panics(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
        cut_it in any::<bool>(),
    ) {
        let mut bytes = real_or_synthetic_trace();
        for (position, value) in flips {
            let index = position % bytes.len();
            bytes[index] = value;
        }
        if cut_it {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        vantage_trace::fuzzing::trace_file(&bytes);
    }
}

fn real_or_synthetic_trace() -> Vec<u8> {
    if let Some(root) = shared_traces() {
        std::fs::read(root.join("zeek/tcp_truncated-header.pcap")).unwrap()
    } else {
        Pcap::ethernet().file(&two_frames())
    }
}

/// Every packet, then the error that ended the reading (as its message),
/// from an opened reader.
fn outcome(opened: Result<TraceReader, TraceError>) -> (Vec<ReadPacket>, Option<String>) {
    let mut packets = Vec::new();
    let mut reader = match opened {
        Ok(reader) => reader,
        Err(error) => return (packets, Some(error.to_string())),
    };
    loop {
        match reader.next_packet() {
            Ok(Some(packet)) => packets.push((
                packet.timestamp,
                packet.link_type,
                packet.interface,
                packet.data.to_vec(),
                packet.original_len,
            )),
            Ok(None) => return (packets, None),
            Err(error) => return (packets, Some(error.to_string())),
        }
    }
}

/// A file opened by path is read through a memory map unless it is
/// compressed; it must give the packets and errors (same offsets) a stream
/// of the same bytes gives, whole, cut anywhere, or corrupt.
#[test]
fn mapped_files_read_like_streams() {
    let pcap = Pcap::ethernet().file(&two_frames());
    let mut inputs = vec![
        pcap.clone(),
        two_interface_pcapng(false),
        two_interface_pcapng(true),
        gzip(&pcap),
        vec![0x28, 0xB5, 0x2F, 0xFD, 0, 0, 0, 0],
        b"not a capture at all".to_vec(),
    ];
    inputs.extend((0..pcap.len()).map(|cut| pcap[..cut].to_vec()));
    let pcapng = two_interface_pcapng(false);
    inputs.extend(
        (0..pcapng.len())
            .step_by(3)
            .map(|cut| pcapng[..cut].to_vec()),
    );
    let mut oversized = pcap.clone();
    oversized[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    inputs.push(oversized);
    for bytes in inputs {
        let file = TempFile::new("mapped.pcap", &bytes);
        let name = file.path.display().to_string();
        let streamed = outcome(TraceReader::from_reader(name, Cursor::new(bytes.clone())));
        let mapped = outcome(TraceReader::open(&file.path));
        assert_eq!(mapped, streamed, "{} bytes", bytes.len());
    }
}

/// A mapped file larger than the window of pages kept resident (whose
/// pages are let go as it is read) reads like a stream, to the last
/// packet, whole and cut in its last record.
#[test]
fn large_mapped_files_read_like_streams() {
    let records: Vec<Record> = (0..16_000u32)
        .map(|i| {
            let frame = Tcp::new(("10.0.0.1", 1000), ("10.0.0.2", 80), i * 1400, 1, ACK)
                .payload(1400)
                .ip_id(i as u16)
                .ethernet();
            Record::new(1_700_000_000_000_000_000 + u64::from(i) * 1000, frame)
        })
        .collect();
    let whole = Pcap::ethernet().file(&records);
    assert!(whole.len() > 20 << 20);
    for bytes in [whole.clone(), whole[..whole.len() - 100].to_vec()] {
        let file = TempFile::new("large-mapped.pcap", &bytes);
        let name = file.path.display().to_string();
        let streamed = outcome(TraceReader::from_reader(name, Cursor::new(bytes.clone())));
        let mapped = outcome(TraceReader::open(&file.path));
        assert_eq!(
            mapped.0.len(),
            16_000 - usize::from(bytes.len() < whole.len())
        );
        assert!(mapped == streamed, "{} bytes", bytes.len());
    }
}
