//! Hand-built packets and capture files for the tests (the packet and pcap
//! builders are `vantage_trace::synth`), and `Exchange`:
//! one connection scripted in true time and written as the client's and
//! the server's captures, with known one-way delays, clock offset and
//! losses.

#![allow(dead_code, unused_imports)]

pub use vantage_trace::synth::*;

use std::net::IpAddr;
use std::path::PathBuf;

/// How a scripted packet reaches the captures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Captured at the sender and, one delay later, at the receiver.
    Arrives,
    /// Captured at the sender only (lost in the network).
    Lost,
    /// Captured at the receiver only (the sender's capture dropped it).
    UnseenBySender,
    /// One super-segment at the sender (segmentation offload), `n` pieces
    /// at the receiver, arriving together.
    Pieces(usize),
}

/// One connection scripted in true time (milliseconds), captured at both
/// ends: a packet leaves its sender at the given time and, unless lost,
/// arrives one one-way delay later. The server's capture is stamped with
/// its own clock (`server_clock_offset_ns` ahead of the client's).
pub struct Exchange {
    pub client: (&'static str, u16),
    pub server: (&'static str, u16),
    pub client_to_server_ns: u64,
    pub server_to_client_ns: u64,
    pub server_clock_offset_ns: i64,
    pub client_isn: u32,
    pub server_isn: u32,
    pub epoch_ns: u64,
    ip_id: [u16; 2],
    next_prefix: Vec<u8>,
    next_window: Option<u16>,
    client_capture: Vec<(u64, usize, Vec<u8>)>,
    server_capture: Vec<(u64, usize, Vec<u8>)>,
    written: usize,
}

pub fn ms(value: f64) -> u64 {
    (value * 1e6).round() as u64
}

impl Exchange {
    pub fn new(client_to_server_ms: f64, server_to_client_ms: f64) -> Exchange {
        Exchange {
            client: ("10.0.0.1", 40_000),
            server: ("10.0.0.2", 80),
            client_to_server_ns: ms(client_to_server_ms),
            server_to_client_ns: ms(server_to_client_ms),
            server_clock_offset_ns: 0,
            client_isn: 1_000_000,
            server_isn: 4_000_000_000,
            epoch_ns: 1_700_000_000_000_000_000,
            ip_id: [100, 5000],
            next_prefix: Vec::new(),
            next_window: None,
            client_capture: Vec::new(),
            server_capture: Vec::new(),
            written: 0,
        }
    }

    fn frame(
        &mut self,
        from_client: bool,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
        ip_id: u16,
    ) -> Vec<u8> {
        let (source, destination, isn, peer_isn) = if from_client {
            (self.client, self.server, self.client_isn, self.server_isn)
        } else {
            (self.server, self.client, self.server_isn, self.client_isn)
        };
        let ack_value = if flags & ACK != 0 {
            peer_isn.wrapping_add(ack)
        } else {
            0
        };
        let mut tcp = Tcp::new(source, destination, isn.wrapping_add(seq), ack_value, flags)
            .payload(len)
            .ip_id(ip_id);
        tcp.prefix = self.next_prefix.clone();
        if let Some(window) = self.next_window {
            tcp.window = window;
        }
        tcp.ethernet()
    }

    fn send(
        &mut self,
        from_client: bool,
        at_ms: f64,
        segment: (u32, u32, u16, usize),
        delivery: Delivery,
    ) -> &mut Exchange {
        let (seq, ack, flags, len) = segment;
        let id_slot = usize::from(!from_client);
        let first_id = self.ip_id[id_slot].wrapping_add(1);
        let pieces = match delivery {
            Delivery::Pieces(n) => n.max(1),
            _ => 1,
        };
        self.ip_id[id_slot] = self.ip_id[id_slot].wrapping_add(pieces as u16);
        let frame = self.frame(from_client, seq, ack, flags, len, first_id);
        let received: Vec<Vec<u8>> = if pieces == 1 {
            vec![frame.clone()]
        } else {
            let size = len / pieces;
            (0..pieces)
                .map(|k| {
                    let last = k + 1 == pieces;
                    let piece_len = if last { len - size * k } else { size };
                    let piece_flags = if last { flags } else { flags & !(FIN | PSH) };
                    self.frame(
                        from_client,
                        seq + (size * k) as u32,
                        ack,
                        piece_flags,
                        piece_len,
                        first_id.wrapping_add(k as u16),
                    )
                })
                .collect()
        };
        self.next_prefix.clear();
        self.next_window = None;
        let sent = ms(at_ms);
        let delay = if from_client {
            self.client_to_server_ns
        } else {
            self.server_to_client_ns
        };
        let order = self.written;
        self.written += 1;
        let (sender_capture, receiver_capture) = if from_client {
            (&mut self.client_capture, &mut self.server_capture)
        } else {
            (&mut self.server_capture, &mut self.client_capture)
        };
        if delivery != Delivery::UnseenBySender {
            sender_capture.push((sent, order, frame));
        }
        if delivery != Delivery::Lost {
            for piece in received {
                receiver_capture.push((sent + delay, order, piece));
            }
        }
        self
    }

    /// The client sends `len` bytes at relative sequence `seq` (the SYN is
    /// 0), acknowledging the server's relative `ack`; it arrives.
    pub fn client(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(true, at_ms, (seq, ack, flags, len), Delivery::Arrives)
    }

    pub fn client_lost(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(true, at_ms, (seq, ack, flags, len), Delivery::Lost)
    }

    pub fn server(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(false, at_ms, (seq, ack, flags, len), Delivery::Arrives)
    }

    pub fn server_lost(
        &mut self,
        at_ms: f64,
        seq: u32,
        ack: u32,
        flags: u16,
        len: usize,
    ) -> &mut Exchange {
        self.send(false, at_ms, (seq, ack, flags, len), Delivery::Lost)
    }

    /// The server sends a packet in some other way (see [`Delivery`]).
    pub fn server_delivered(
        &mut self,
        at_ms: f64,
        segment: (u32, u32, u16, usize),
        delivery: Delivery,
    ) -> &mut Exchange {
        self.send(false, at_ms, segment, delivery)
    }

    /// The client sends a packet in some other way (see [`Delivery`]).
    pub fn client_delivered(
        &mut self,
        at_ms: f64,
        segment: (u32, u32, u16, usize),
        delivery: Delivery,
    ) -> &mut Exchange {
        self.send(true, at_ms, segment, delivery)
    }

    /// The next packet advertises this receive window (default 65535).
    pub fn window(&mut self, window: u16) -> &mut Exchange {
        self.next_window = Some(window);
        self
    }

    /// The next packet's payload begins with `bytes` (an HTTP request line).
    pub fn starting(&mut self, bytes: &[u8]) -> &mut Exchange {
        self.next_prefix = bytes.to_vec();
        self
    }

    fn capture(&self, records: &[(u64, usize, Vec<u8>)], offset: i64) -> Vec<u8> {
        let mut sorted: Vec<&(u64, usize, Vec<u8>)> = records.iter().collect();
        sorted.sort_by_key(|(time, order, _)| (*time, *order));
        let pcap = Pcap {
            big_endian: false,
            nanosecond: true,
            link_type: 1,
            snap_length: 65_535,
        };
        let records: Vec<Record> = sorted
            .into_iter()
            .map(|(time, _, frame)| {
                let stamped = (self.epoch_ns + time) as i64 + offset;
                Record::new(stamped as u64, frame.clone())
            })
            .collect();
        pcap.file(&records)
    }

    /// The client's and the server's capture files.
    pub fn write(&self, name: &str) -> (TempFile, TempFile) {
        (
            TempFile::new(
                &format!("{name}-client.pcap"),
                &self.capture(&self.client_capture, 0),
            ),
            TempFile::new(
                &format!("{name}-server.pcap"),
                &self.capture(&self.server_capture, self.server_clock_offset_ns),
            ),
        )
    }

    /// The true time of a scripted instant, as the client's capture stamps it.
    pub fn at(&self, time_ms: f64) -> u64 {
        self.epoch_ns + ms(time_ms)
    }
}
