//! `vantage cpa` on inputs it must not answer silently: a capture cut off
//! mid-record (analysed up to the cut, warned, exit status 3) and a link
//! type the decoder does not know (an error naming it).

use std::process::Command;

use vantage_trace::synth::{Pcap, Record, Tcp, TempFile, ACK, PSH, SYN};

fn capture(link_type: u32) -> Vec<u8> {
    let client = ("10.0.0.1", 40_000);
    let server = ("10.0.0.2", 80);
    let mut get = Tcp::new(client, server, 1, 101, ACK | PSH).payload(100);
    get.prefix = b"GET / HTTP/1.0\r\n".to_vec();
    let mut response = Tcp::new(server, client, 101, 101, ACK | PSH).payload(500);
    response.prefix = b"HTTP/1.0 200 OK\r\n".to_vec();
    let packets = [
        (0u64, Tcp::new(client, server, 0, 0, SYN).ip_id(1)),
        (
            10_000,
            Tcp::new(server, client, 100, 1, SYN | ACK).ip_id(50),
        ),
        (20_000, get.ip_id(2)),
        (30_000, response.ip_id(51)),
        (40_000, Tcp::new(client, server, 101, 601, ACK).ip_id(3)),
    ];
    let records: Vec<Record> = packets
        .iter()
        .map(|(micros, tcp)| {
            Record::new(1_700_000_000_000_000_000 + micros * 1_000, tcp.ethernet())
        })
        .collect();
    Pcap {
        link_type,
        ..Pcap::ethernet()
    }
    .file(&records)
}

fn cpa(file: &TempFile) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["cpa", "--server"])
        .arg(&file.path)
        .output()
        .expect("run vantage")
}

#[test]
fn a_capture_cut_off_mid_record_is_analysed_then_warned_with_status_3() {
    let whole = capture(1);
    let file = TempFile::new("cpa-cut.pcap", &whole[..whole.len() - 20]);
    let output = cpa(&file);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("truncated packet record"), "{stderr}");
    assert!(stderr.contains("cpa-cut.pcap: byte "), "{stderr}");
    assert!(
        stderr.contains("the 4 complete packets before it were analysed"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("10.0.0.1:40000"), "{stdout}");
}

#[test]
fn an_unsupported_link_type_is_an_error_naming_it() {
    let file = TempFile::new("cpa-user0.pcap", &capture(147));
    let output = cpa(&file);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("link type 147 is not supported"),
        "{stderr}"
    );
}
