//! The event loop of a web-server run: clients, network and server of the
//! sibling modules, driven in integer-nanosecond virtual time by one seeded
//! generator (same seed, same run, bit for bit).
//!
//! A connection's life (Certes paper, Section 4, Figures 13–14):
//! 1. the client sends a SYN (lost in the network with the path's loss) and
//!    arms its retry timer (profile, Eq. 1 spread) or, after the last retry
//!    it will send, its give-up timer (FTO);
//! 2. the SYN reaches the server: dropped if the accept queue is full
//!    (DROPPED), else a request socket is made (ACCEPTED, SYN-to-END starts)
//!    and a SYN-ACK sent, re-sent on the server's timer (1 s doubling) and on
//!    each duplicate SYN while no ACK has come;
//! 3. the SYN-ACK reaches the client: connected, it sends its ACK with its
//!    first request (re-sent on its RTO until through); the RTT sample is
//!    that SYN-ACK's and that ACK's one-way delays (a kernel pairs them by
//!    TCP timestamps; lost-and-resent copies add their waits to SYN-to-END
//!    instead, Figure 3);
//! 4. the ACK reaches the server: into the accept queue, or dropped as a
//!    listen overflow when it is full; the handshake is tried again by the
//!    client's retransmissions of its request (its RTO, doubling) and by
//!    the ACKs that answer the server's re-sent SYN-ACKs (its SYN-ACK
//!    timer, 1 s doubling), whichever comes first with room in the queue;
//!    when an ACK alone completes it, the request is still to come and the
//!    worker that takes the connection waits for its retransmission;
//! 5. a worker takes it (after its close-and-accept turn on the CPU), the
//!    request uses the processor-sharing CPU, the
//!    response goes out in slow-start rounds (END is the first sending of
//!    its last segment for the connection's last response), the client gets
//!    it and, on a persistent connection, sends its next request;
//! 6. after the last response the client is done and starts its next
//!    transaction; a client still without a SYN-ACK at its FTO gives up and
//!    starts a new one.
//!
//! The server keeps one connection record per client: a client has at most
//! one transaction under way, and events carry the transaction number so
//! that those of an abandoned transaction are ignored.

use super::clients::Draw;
use super::record::WebRun;
use super::server::{EndOfConnection, ProcessorSharing};
use super::transfer::{send_response, Window};
use super::{ConfigError, WebServerConfig};
use crate::engine::EventQueue;
use crate::webserver::network::ClientPath;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use vantage_core::certes::learn::AttemptOutcome;
use vantage_core::certes::LatencyHistogram;
use vantage_core::Nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Connecting,
    Connected,
}

/// The server's record of a client's current connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerState {
    Closed,
    SynReceived,
    /// The handshake's ACK came while the accept queue was full.
    Overflowed,
    Queued,
    /// A worker took the connection before its first request arrived (the
    /// handshake was completed by an ACK alone, answering a re-sent
    /// SYN-ACK): it waits in `read()` for the client's retransmission.
    AwaitingFirstRequest,
    Serving,
    AwaitingRequest,
}

struct Client {
    /// Arrival times at the server of this attempt's SYNs (none once one
    /// is accepted and reported).
    syns_seen: Vec<Nanos>,
    profile: u16,
    frustration_timeout: Nanos,
    give_up_after: Nanos,
    path: ClientPath,
    txn: u32,
    txn_start: Nanos,
    attempt: u16,
    phase: Phase,
    requests_left: u32,
    state: ServerState,
    /// When the client sent its latest SYN.
    syn_sent: Nanos,
    /// The attempt of the SYN the server accepted, and CONN-FAIL up to it.
    accepted_attempt: u16,
    conn_fail: Nanos,
    syn_arrival: Nanos,
    rtt_sample: Nanos,
    /// Last transmission of the client's first request (with its ACK).
    request_sent: Nanos,
    /// Whether the server has the first request (it came with the ACK that
    /// completed the handshake, or later on the established connection).
    request_in: bool,
    request_backoff: u32,
    app_start: Nanos,
    app_time: Nanos,
    response_segments: u32,
    window: Window,
}

#[derive(Clone, Copy, Debug)]
enum Event {
    /// A client begins its next transaction.
    Start {
        client: u32,
    },
    /// A SYN reaches the server (`attempt` 0 is the first).
    Syn {
        client: u32,
        txn: u32,
        attempt: u16,
    },
    /// A client's SYN retry or give-up timer.
    ClientTimer {
        client: u32,
        txn: u32,
        attempt: u16,
    },
    /// A SYN-ACK reaches the client after `delay`.
    SynAck {
        client: u32,
        txn: u32,
        delay: Nanos,
    },
    SynAckTimer {
        client: u32,
        txn: u32,
        retries: u32,
    },
    /// The handshake's ACK reaches the server: with the first request
    /// (`with_request`, re-sent on the client's RTO while unanswered), or
    /// alone, answering a re-sent SYN-ACK.
    Ack {
        client: u32,
        txn: u32,
        with_request: bool,
    },
    /// A later request of a persistent connection reaches the server.
    Request {
        client: u32,
        txn: u32,
    },
    Cpu {
        generation: u64,
    },
    /// The client has the whole response.
    Received {
        client: u32,
        txn: u32,
    },
    /// The client's FIN reaches a worker that waits for it (persistent
    /// connection, lingering close): the worker is free.
    Release,
}

/// The CPU job of a worker between connections (not a client's request).
const WORKER_OVERHEAD_JOB: u32 = u32::MAX;

struct Sim<'a> {
    config: &'a WebServerConfig,
    rng: ChaCha8Rng,
    queue: EventQueue<Event>,
    clients: Vec<Client>,
    accept_queue: VecDeque<u32>,
    /// Request sockets: handshakes under way (SYN received or ACK dropped
    /// by a listen overflow), the SYN queue.
    request_sockets: u32,
    free_workers: u32,
    cpu: ProcessorSharing,
    cpu_generation: u64,
    run: WebRun,
    done: Vec<u32>,
}

/// Runs the configuration for its horizon with generator seed `seed`.
pub fn simulate(config: &WebServerConfig, seed: u64) -> Result<WebRun, ConfigError> {
    config.validate()?;
    let mut sim = Sim {
        config,
        rng: ChaCha8Rng::seed_from_u64(seed),
        queue: EventQueue::new(),
        clients: Vec::with_capacity(config.clients.count as usize),
        accept_queue: VecDeque::new(),
        request_sockets: 0,
        free_workers: config.server.workers,
        cpu: ProcessorSharing::new(config.server.cores),
        cpu_generation: 0,
        run: WebRun::new(config.interval, config.horizon),
        done: Vec::new(),
    };
    sim.populate();
    sim.run_until(config.horizon);
    Ok(sim.run)
}

impl Sim<'_> {
    fn populate(&mut self) {
        let c = self.config;
        for id in 0..c.clients.count {
            let profile_index = c.population.choose(self.rng.gen());
            let profile = c.population.profile(profile_index);
            let frustration_timeout = c.clients.choose_frustration_timeout(self.rng.gen());
            let path = c.path.client_path(self.rng.gen());
            self.clients.push(Client {
                syns_seen: Vec::new(),
                profile: profile_index as u16,
                frustration_timeout,
                give_up_after: profile.give_up_at(frustration_timeout),
                path,
                txn: 0,
                txn_start: Nanos::ZERO,
                attempt: 0,
                phase: Phase::Idle,
                requests_left: 0,
                state: ServerState::Closed,
                syn_sent: Nanos::ZERO,
                accepted_attempt: 0,
                conn_fail: Nanos::ZERO,
                syn_arrival: Nanos::ZERO,
                rtt_sample: Nanos::ZERO,
                request_sent: Nanos::ZERO,
                request_in: false,
                request_backoff: 0,
                app_start: Nanos::ZERO,
                app_time: Nanos::ZERO,
                response_segments: 1,
                window: Window::initial(c.server.initial_window),
            });
            let at = self.ramp_offset();
            self.queue.schedule(at, Event::Start { client: id });
        }
    }

    fn ramp_offset(&mut self) -> Nanos {
        let ramp = self.config.clients.ramp;
        if ramp == Nanos::ZERO {
            Nanos::ZERO
        } else {
            Nanos(self.rng.gen_range(0..ramp.0))
        }
    }

    fn run_until(&mut self, horizon: Nanos) {
        while let Some((now, event)) = self.queue.pop() {
            if now >= horizon {
                break;
            }
            self.run.stats.events += 1;
            match event {
                Event::Start { client } => self.start(client, now),
                Event::Syn {
                    client,
                    txn,
                    attempt,
                } => self.syn_arrives(client, txn, attempt, now),
                Event::ClientTimer {
                    client,
                    txn,
                    attempt,
                } => self.client_timer(client, txn, attempt, now),
                Event::SynAck { client, txn, delay } => {
                    self.synack_arrives(client, txn, delay, now)
                }
                Event::SynAckTimer {
                    client,
                    txn,
                    retries,
                } => self.synack_timer(client, txn, retries, now),
                Event::Ack {
                    client,
                    txn,
                    with_request,
                } => self.ack_arrives(client, txn, with_request, now),
                Event::Request { client, txn } => {
                    let cl = &self.clients[client as usize];
                    if cl.txn == txn && cl.state == ServerState::AwaitingRequest {
                        self.begin_request(client, now);
                    }
                }
                Event::Cpu { generation } => {
                    if generation == self.cpu_generation {
                        self.cpu_done(now);
                    }
                }
                Event::Received { client, txn } => self.response_received(client, txn, now),
                Event::Release => self.release_worker(now),
            }
        }
    }

    fn interval(&self, at: Nanos) -> usize {
        self.run
            .index(at)
            .expect("events after the horizon are not processed")
    }

    fn start(&mut self, client: u32, now: Nanos) {
        if let Some(on_off) = self.config.clients.on_off {
            let on = on_off.next_on(now);
            if on != now {
                let at = on + self.ramp_offset();
                self.queue.schedule(at, Event::Start { client });
                return;
            }
        }
        let config = self.config;
        if config.clients.draw == Draw::PerTransaction {
            let profile_index = config.population.choose(self.rng.gen());
            let profile = config.population.profile(profile_index);
            let fto = config.clients.choose_frustration_timeout(self.rng.gen());
            let cl = &mut self.clients[client as usize];
            cl.profile = profile_index as u16;
            cl.frustration_timeout = fto;
            cl.give_up_after = profile.give_up_at(fto);
        }
        let window = Window::initial(config.server.initial_window);
        let requests = config.clients.requests_per_connection;
        let cl = &mut self.clients[client as usize];
        cl.txn += 1;
        cl.txn_start = now;
        cl.syns_seen.clear();
        cl.attempt = 0;
        cl.phase = Phase::Connecting;
        cl.requests_left = requests;
        cl.app_time = Nanos::ZERO;
        cl.window = window;
        self.run.stats.transactions_started += 1;
        self.send_syn(client, now);
    }

    fn next_transaction(&mut self, client: u32, now: Nanos) {
        let think = self.config.clients.think_time;
        if think == Nanos::ZERO {
            self.start(client, now);
        } else {
            let u: f64 = self.rng.gen();
            let pause = Nanos::from_secs_f64(-(1.0 - u).ln() * think.as_secs_f64());
            self.queue.schedule(now + pause, Event::Start { client });
        }
    }

    fn send_syn(&mut self, client: u32, now: Nanos) {
        let i = self.interval(now);
        self.run.extras[i].syns_sent += 1;
        let cl = &mut self.clients[client as usize];
        cl.syn_sent = now;
        let (txn, attempt, path) = (cl.txn, cl.attempt, cl.path);
        if path.lost(&mut self.rng) {
            self.run.extras[i].syns_lost += 1;
        } else {
            let delay = path.one_way(&mut self.rng);
            self.queue.schedule(
                now + delay,
                Event::Syn {
                    client,
                    txn,
                    attempt,
                },
            );
        }
        let cl = &self.clients[client as usize];
        let profile = self.config.population.profile(cl.profile as usize);
        let give_up_at = cl.txn_start + cl.give_up_after;
        let gap = profile.timeout(attempt as usize, self.rng.gen());
        let next = match gap {
            Some(gap)
                if profile.sends_retransmission(cl.frustration_timeout, attempt as usize + 1)
                    && now + gap < give_up_at =>
            {
                now + gap
            }
            _ => give_up_at,
        };
        self.queue.schedule(
            next,
            Event::ClientTimer {
                client,
                txn,
                attempt,
            },
        );
    }

    fn client_timer(&mut self, client: u32, txn: u32, attempt: u16, now: Nanos) {
        let cl = &mut self.clients[client as usize];
        if cl.txn != txn || cl.phase != Phase::Connecting || cl.attempt != attempt {
            return;
        }
        if now >= cl.txn_start + cl.give_up_after {
            let waited = now - cl.txn_start;
            // The client's RST (to any later SYN-ACK) ends a request socket.
            if cl.state == ServerState::SynReceived {
                cl.state = ServerState::Closed;
                self.request_sockets -= 1;
            }
            cl.phase = Phase::Idle;
            // Reported when the client gives up; a capture infers it when
            // no SYN follows within the schedule's next gap.
            if !cl.syns_seen.is_empty() {
                self.run
                    .syn_learner
                    .observe(&cl.syns_seen, AttemptOutcome::Abandoned);
                cl.syns_seen.clear();
            }
            let i = self.interval(now);
            self.run.truth[i].record(waited, true);
            self.next_transaction(client, now);
        } else {
            cl.attempt += 1;
            self.send_syn(client, now);
        }
    }

    fn syn_arrives(&mut self, client: u32, txn: u32, attempt: u16, now: Nanos) {
        let cl = &self.clients[client as usize];
        if cl.txn != txn || cl.phase == Phase::Idle {
            return;
        }
        match cl.state {
            // A duplicate SYN: Linux finds the request socket and re-sends
            // the SYN-ACK; it is neither dropped nor a new acceptance.
            ServerState::SynReceived => {
                self.run.stats.synack_retransmissions += 1;
                self.send_synack(client, now);
            }
            ServerState::Closed if cl.phase == Phase::Connecting => {
                let i = self.interval(now);
                let server = &self.config.server;
                // Linux drops a SYN when the accept queue is full, and (no
                // SYN cookies, as in the paper's kernel) when the SYN queue is.
                let full = server.accept_queue.is_full(self.accept_queue.len(), now)
                    || self.request_sockets >= server.syn_backlog;
                let j = usize::from(attempt);
                let stats = &mut self.run.stats;
                if stats.offered_by_attempt.len() <= j {
                    stats.offered_by_attempt.resize(j + 1, 0);
                    stats.dropped_by_attempt.resize(j + 1, 0);
                }
                stats.offered_by_attempt[j] += 1;
                stats.dropped_by_attempt[j] += u64::from(full);
                let seen = &mut self.clients[client as usize].syns_seen;
                seen.push(now);
                if !full {
                    self.run.syn_learner.observe(seen, AttemptOutcome::Accepted);
                    seen.clear();
                }
                if attempt > 0 {
                    let extras = &mut self.run.extras[i];
                    extras.retries_offered += 1;
                    extras.retries_dropped += u64::from(full);
                }
                if full {
                    self.run.counters[i].dropped += 1;
                } else {
                    self.run.counters[i].accepted += 1;
                    self.request_sockets += 1;
                    let cl = &mut self.clients[client as usize];
                    cl.state = ServerState::SynReceived;
                    cl.syn_arrival = now;
                    cl.accepted_attempt = attempt;
                    // Delays are shorter than any gap between SYNs, so the
                    // latest SYN sent is this one.
                    cl.conn_fail = cl.syn_sent - cl.txn_start;
                    self.send_synack(client, now);
                    self.queue.schedule(
                        now + self.config.server.synack_timeout,
                        Event::SynAckTimer {
                            client,
                            txn,
                            retries: 0,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    fn send_synack(&mut self, client: u32, now: Nanos) {
        let cl = &self.clients[client as usize];
        let (txn, path) = (cl.txn, cl.path);
        if !path.lost(&mut self.rng) {
            let delay = path.one_way(&mut self.rng);
            self.queue
                .schedule(now + delay, Event::SynAck { client, txn, delay });
        }
    }

    fn synack_timer(&mut self, client: u32, txn: u32, retries: u32, now: Nanos) {
        let cl = &mut self.clients[client as usize];
        if cl.txn != txn || !matches!(cl.state, ServerState::SynReceived | ServerState::Overflowed)
        {
            return;
        }
        if retries >= self.config.server.synack_retries {
            // Linux drops the request socket; a client still connecting
            // will be heard again by its next SYN. One whose ACK is on its
            // way keeps its socket (a departure that only matters after a
            // minute of losses in a row).
            if cl.phase == Phase::Connecting {
                cl.state = ServerState::Closed;
                self.request_sockets -= 1;
                self.run.stats.requests_expired += 1;
            }
            return;
        }
        self.run.stats.synack_retransmissions += 1;
        self.send_synack(client, now);
        let next = self
            .config
            .server
            .synack_timeout
            .saturating_mul(1 << (retries + 1).min(20));
        self.queue.schedule(
            now + next,
            Event::SynAckTimer {
                client,
                txn,
                retries: retries + 1,
            },
        );
    }

    fn synack_arrives(&mut self, client: u32, txn: u32, delay: Nanos, now: Nanos) {
        let cl = &mut self.clients[client as usize];
        if cl.txn != txn {
            return;
        }
        match cl.phase {
            Phase::Connecting => {
                cl.phase = Phase::Connected;
                let up = cl.path.deliver(now, &mut self.rng);
                cl.rtt_sample = delay + up.delay;
                cl.request_sent = up.sent;
                cl.request_backoff = up.transmissions - 1;
                self.queue.schedule(
                    up.arrival,
                    Event::Ack {
                        client,
                        txn,
                        with_request: true,
                    },
                );
            }
            // A re-sent SYN-ACK to a connected client: it answers with an
            // ACK at once (which completes a handshake whose first ACK the
            // server dropped).
            // (The ACK itself may be lost, drawn once the server is known
            // to be waiting.)
            Phase::Connected
                if matches!(cl.state, ServerState::SynReceived | ServerState::Overflowed)
                    && !cl.path.lost(&mut self.rng) =>
            {
                let arrival = now + cl.path.one_way(&mut self.rng);
                self.queue.schedule(
                    arrival,
                    Event::Ack {
                        client,
                        txn,
                        with_request: false,
                    },
                );
            }
            _ => {}
        }
    }

    fn ack_arrives(&mut self, client: u32, txn: u32, with_request: bool, now: Nanos) {
        let full = self
            .config
            .server
            .accept_queue
            .is_full(self.accept_queue.len(), now);
        let i = self.interval(now);
        let cl = &mut self.clients[client as usize];
        if cl.txn != txn {
            return;
        }
        if with_request {
            // A retransmitted request reaching an established connection
            // whose handshake an ACK alone completed: the kernel keeps it
            // for the worker, or hands it to the worker already waiting.
            match cl.state {
                ServerState::Queued => {
                    cl.request_in = true;
                    return;
                }
                ServerState::AwaitingFirstRequest => {
                    cl.request_in = true;
                    self.begin_request(client, now);
                    return;
                }
                _ => {}
            }
        }
        if !matches!(cl.state, ServerState::SynReceived | ServerState::Overflowed) {
            return;
        }
        if full {
            self.run.extras[i].listen_overflows += 1;
            cl.state = ServerState::Overflowed;
            if !with_request {
                // The next re-sent SYN-ACK will draw another ACK.
                return;
            }
            // The client hears nothing and re-sends its request on its RTO.
            let mut at = cl.request_sent + cl.path.rto_backed_off(cl.request_backoff);
            let mut backoff = cl.request_backoff + 1;
            while cl.path.lost(&mut self.rng) {
                at += cl.path.rto_backed_off(backoff);
                backoff += 1;
            }
            cl.request_sent = at;
            cl.request_backoff = backoff;
            let arrival = at + cl.path.one_way(&mut self.rng);
            self.queue.schedule(
                arrival,
                Event::Ack {
                    client,
                    txn,
                    with_request: true,
                },
            );
        } else {
            cl.state = ServerState::Queued;
            cl.request_in = with_request;
            self.request_sockets -= 1;
            self.accept_queue.push_back(client);
            let length = self.accept_queue.len() as u32;
            let extras = &mut self.run.extras[i];
            extras.accept_queue_max = extras.accept_queue_max.max(length);
            self.dispatch(now);
        }
    }

    /// A worker done with its connection runs its overhead job, then takes
    /// the next connection.
    fn release_worker(&mut self, now: Nanos) {
        let overhead = self.config.server.worker_overhead;
        if overhead == Nanos::ZERO {
            self.free_workers += 1;
            self.dispatch(now);
        } else {
            self.cpu.add(now, overhead, WORKER_OVERHEAD_JOB);
            self.reschedule_cpu();
        }
    }

    fn dispatch(&mut self, now: Nanos) {
        while self.free_workers > 0 {
            let Some(client) = self.accept_queue.pop_front() else {
                break;
            };
            self.free_workers -= 1;
            if self.clients[client as usize].request_in {
                self.begin_request(client, now);
            } else {
                self.clients[client as usize].state = ServerState::AwaitingFirstRequest;
                self.run.stats.first_requests_awaited += 1;
            }
        }
    }

    fn begin_request(&mut self, client: u32, now: Nanos) {
        let server = &self.config.server;
        let page = server.choose_page(self.rng.gen());
        let demand = page.service.sample(&mut self.rng);
        let segments = server.segments(page.size_bytes);
        let cl = &mut self.clients[client as usize];
        cl.state = ServerState::Serving;
        cl.response_segments = segments;
        cl.app_start = now;
        self.cpu.add(now, demand, client);
        self.reschedule_cpu();
    }

    fn reschedule_cpu(&mut self) {
        self.cpu_generation += 1;
        if let Some(at) = self.cpu.next_completion() {
            self.queue.schedule(
                at,
                Event::Cpu {
                    generation: self.cpu_generation,
                },
            );
        }
    }

    fn cpu_done(&mut self, now: Nanos) {
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        self.cpu.finished(now, &mut done);
        for &job in &done {
            if job == WORKER_OVERHEAD_JOB {
                self.free_workers += 1;
                self.dispatch(now);
            } else {
                self.response_ready(job, now);
            }
        }
        self.done = done;
        self.reschedule_cpu();
    }

    /// The worker hands the response to the kernel: application-level time
    /// ends, the response goes out.
    fn response_ready(&mut self, client: u32, now: Nanos) {
        let persistent = self.config.clients.requests_per_connection > 1;
        let run = &mut self.run;
        let cl = &mut self.clients[client as usize];
        cl.app_time += now - cl.app_start;
        cl.requests_left -= 1;
        let counters = &mut run.counters;
        let interval = run.interval.0.max(1);
        let transfer = send_response(
            now,
            cl.response_segments,
            &mut cl.window,
            &cl.path,
            &mut self.rng,
            |at, sent, retransmitted| {
                if let Some(c) = counters.get_mut((at.0 / interval) as usize) {
                    c.segments_sent += u64::from(sent);
                    c.segments_retransmitted += u64::from(retransmitted);
                }
            },
        );
        let txn = cl.txn;
        if cl.requests_left == 0 {
            let end = match self.config.server.end_of_connection {
                EndOfConnection::FirstFin => transfer.last_segment_first_sent,
                EndOfConnection::LastTransmission => transfer.last_transmission,
            };
            if let Some(i) = run.index(end) {
                let syn_to_end = end - cl.syn_arrival;
                let c = &mut run.counters[i];
                c.completed += 1;
                c.syn_to_end_sum += syn_to_end;
                c.rtt_sum += cl.rtt_sample;
                c.syn_to_end_histogram
                    .get_or_insert_with(LatencyHistogram::new)
                    .record(syn_to_end);
                run.extras[i].application_sum += cl.app_time;
                run.truth[i].record(transfer.delivered - cl.txn_start, false);
                run.stats.rtt_sum += cl.rtt_sample;
                run.stats.rtt_samples += 1;
                let j = usize::from(cl.accepted_attempt);
                let by_attempt = &mut run.stats.completed_by_attempt;
                if by_attempt.len() <= j {
                    by_attempt.resize(j + 1, 0);
                }
                by_attempt[j] += 1;
                run.stats.conn_fail_sum += cl.conn_fail;
            }
            cl.state = ServerState::Closed;
            if persistent || self.config.server.lingering_close {
                // The worker waits for the client's FIN.
                let fin = transfer.delivered + cl.path.one_way(&mut self.rng);
                self.queue.schedule(fin, Event::Release);
            } else {
                // The worker closes after the write and moves on.
                self.release_worker(now);
            }
        } else {
            cl.state = ServerState::AwaitingRequest;
        }
        self.queue
            .schedule(transfer.delivered, Event::Received { client, txn });
    }

    fn response_received(&mut self, client: u32, txn: u32, now: Nanos) {
        let cl = &mut self.clients[client as usize];
        if cl.txn != txn || cl.phase != Phase::Connected {
            return;
        }
        if cl.requests_left > 0 {
            let d = cl.path.deliver(now, &mut self.rng);
            self.queue
                .schedule(d.arrival, Event::Request { client, txn });
        } else {
            cl.phase = Phase::Idle;
            self.next_transaction(client, now);
        }
    }
}
