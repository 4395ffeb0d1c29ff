//! Per-download records: what each client saw (start, end or failure,
//! bytes, time to first byte, the longest span without a byte) joined with
//! what the kernel reported of the proxy's connection to it around that
//! span (send buffer, segments in flight, congestion window, RTO,
//! retransmissions), sampled by [`super::sampler`] every memory sample.
//! One JSON object per line in `downloads.jsonl`, beside `report.json`;
//! a summary of the stalled ones per variant goes into the report.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::client::{DownloadRecord, Outcome, MAX_SLOTS, SLOT_S};
use super::plan::PathPlan;
use super::report::quantile;
use super::sampler::{ConnectionSample, ConnectionTraces};

/// The proxy's connection to one client around its longest gap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyView {
    /// Samples of this connection in the run.
    pub samples: u32,
    /// Median `SO_SNDBUF` over the connection's samples, bytes.
    pub send_buffer_median: u32,
    /// At the last sample before the gap began (the first of the
    /// connection if none was before): `SO_SNDBUF`, bytes queued, segments
    /// in flight, congestion window, MSS, RTT and RTO.
    pub send_buffer_at_gap: u32,
    pub send_queued_at_gap: u32,
    pub unacked_at_gap: u32,
    pub cwnd_at_gap: u32,
    pub mss: u32,
    pub rtt_ms_at_gap: f64,
    pub rto_ms_at_gap: f64,
    /// Samples within the gap.
    pub samples_in_gap: u32,
    /// Smallest `SO_SNDBUF` within the gap (or at it), bytes.
    pub send_buffer_min_in_gap: u32,
    /// Largest RTO within the gap, and the connection's smallest RTO:
    /// their ratio is 2^(consecutive time-outs), Linux doubling the RTO at
    /// each back-off.
    pub rto_ms_max_in_gap: f64,
    pub rto_ms_min: f64,
    /// Segments retransmitted between the sample at the gap and the last
    /// one within it.
    pub retransmits_in_gap: u32,
    /// The largest smoothed RTT over the connection's samples and when it
    /// was read (s, as `t_s`), and the RTT at its last sample: a connection
    /// closing with a smoothed RTT of tens of seconds leaves it in the
    /// kernel's per-destination metrics cache, which seeds the next
    /// connection's first RTO.
    pub rtt_ms_max: f64,
    pub rtt_max_at_s: f64,
    pub rtt_ms_last: f64,
    /// Bytes queued and not yet sent at the sample at the gap: 0 means
    /// nothing new stood behind the segments in flight, so a lost one
    /// could get no duplicate ACK from new data. Absent in files written
    /// before it was recorded, or when the kernel does not report it.
    #[serde(default)]
    pub notsent_at_gap: Option<u32>,
}

impl ProxyView {
    /// Consecutive time-outs the RTO shows within the gap:
    /// log2(max in gap / connection's min), rounded down.
    pub fn backoffs_in_gap(&self) -> u32 {
        if self.rto_ms_min <= 0.0 || self.rto_ms_max_in_gap < self.rto_ms_min {
            return 0;
        }
        // A doubling read from two jiffy-rounded values: allow 10 %.
        (self.rto_ms_max_in_gap / self.rto_ms_min * 1.1)
            .log2()
            .floor()
            .max(0.0) as u32
    }
}

/// One download, one line of `downloads.jsonl`. Times `*_at_s` count from
/// the moment the run's first download was due.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DownloadRow {
    pub variant: String,
    /// Index of the path in the plan, and the path.
    pub path: usize,
    pub rtt_ms: f64,
    pub loss_pct: f64,
    pub rate_mbit: f64,
    /// The client's address and port; `None` if the connect failed.
    pub client: Option<String>,
    pub outcome: Outcome,
    pub start_at_s: f64,
    pub end_at_s: f64,
    pub bytes: u64,
    pub objects: u64,
    pub first_byte_s: Option<f64>,
    pub longest_gap_s: f64,
    pub longest_gap_at_s: f64,
    /// Body bytes per 10-s slot from the first download's start (slot k:
    /// [10 k, 10 k + 10) s), up to the slot of the last byte. Absent in
    /// files written before it was recorded.
    #[serde(default)]
    pub bytes_per_10s: Vec<u64>,
    /// `None` if the proxy's connection was never sampled (closed within
    /// one sampling period, or beyond the trace cap).
    pub proxy: Option<ProxyView>,
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    Some(v[(v.len() - 1) / 2])
}

/// The proxy's view of a connection whose longest gap began at `from_s`
/// and lasted `gap_s`; `None` without samples.
pub fn proxy_view(samples: &[ConnectionSample], from_s: f64, gap_s: f64) -> Option<ProxyView> {
    let first = samples.first()?;
    let at = samples
        .iter()
        .rev()
        .find(|s| s.t_s <= from_s)
        .unwrap_or(first);
    let within: Vec<&ConnectionSample> = samples
        .iter()
        .filter(|s| s.t_s > from_s && s.t_s <= from_s + gap_s)
        .collect();
    let last = within.last().copied().unwrap_or(at);
    let rtt_max = samples
        .iter()
        .fold(first, |max, s| if s.rtt_us > max.rtt_us { s } else { max });
    let ms = |us: u32| f64::from(us) / 1000.0;
    Some(ProxyView {
        samples: samples.len() as u32,
        send_buffer_median: median(samples.iter().map(|s| s.send_buffer).collect()).unwrap_or(0),
        send_buffer_at_gap: at.send_buffer,
        send_queued_at_gap: at.send_queued,
        unacked_at_gap: at.unacked,
        cwnd_at_gap: at.cwnd,
        mss: at.mss,
        rtt_ms_at_gap: ms(at.rtt_us),
        rto_ms_at_gap: ms(at.rto_us),
        samples_in_gap: within.len() as u32,
        send_buffer_min_in_gap: within
            .iter()
            .map(|s| s.send_buffer)
            .fold(at.send_buffer, u32::min),
        rto_ms_max_in_gap: ms(within.iter().map(|s| s.rto_us).fold(at.rto_us, u32::max)),
        rto_ms_min: ms(samples.iter().map(|s| s.rto_us).min().unwrap_or(0)),
        retransmits_in_gap: last.total_retrans.saturating_sub(at.total_retrans),
        rtt_ms_max: ms(rtt_max.rtt_us),
        rtt_max_at_s: rtt_max.t_s,
        rtt_ms_last: ms(samples.last().unwrap_or(first).rtt_us),
        notsent_at_gap: at.notsent,
    })
}

/// Joins a variant's downloads with the proxy's traces (by the client's
/// address and port).
pub fn rows(
    variant: &str,
    paths: &[PathPlan],
    downloads: &[DownloadRecord],
    traces: &ConnectionTraces,
) -> Vec<DownloadRow> {
    downloads
        .iter()
        .map(|d| {
            let path = paths.get(d.path);
            DownloadRow {
                variant: variant.to_string(),
                path: d.path,
                rtt_ms: path.map_or(0.0, |p| p.rtt_ms),
                loss_pct: path.map_or(0.0, |p| p.loss_pct),
                rate_mbit: path.map_or(0.0, |p| p.rate_mbit),
                client: d.local.map(|a| a.to_string()),
                outcome: d.outcome,
                start_at_s: d.start_at_s,
                end_at_s: d.start_at_s + d.active_s,
                bytes: d.bytes,
                objects: d.objects,
                first_byte_s: d.first_byte_s,
                longest_gap_s: d.longest_gap_s,
                longest_gap_at_s: d.longest_gap_at_s,
                bytes_per_10s: d.bytes_per_slot.clone(),
                proxy: d
                    .local
                    .and_then(|a| traces.get(&a))
                    .and_then(|s| proxy_view(s, d.longest_gap_at_s, d.longest_gap_s)),
            }
        })
        .collect()
}

/// `downloads.jsonl`'s text.
pub fn to_jsonl(rows: &[DownloadRow]) -> Result<String, serde_json::Error> {
    let mut text = String::new();
    for row in rows {
        text.push_str(&serde_json::to_string(row)?);
        text.push('\n');
    }
    Ok(text)
}

/// Jain's fairness index of `values`, (Σx)² / (n · Σx²): 1 when all are
/// equal, 1/n when one has everything; `None` when there are none or all
/// are 0.
pub fn jain_index(values: &[u64]) -> Option<f64> {
    let sum: f64 = values.iter().map(|&v| v as f64).sum();
    let squares: f64 = values.iter().map(|&v| (v as f64) * (v as f64)).sum();
    if values.is_empty() || squares == 0.0 {
        return None;
    }
    Some(sum * sum / (values.len() as f64 * squares))
}

/// The downloads of one path in one 10-s slot.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SlotProgress {
    /// The slot's start, seconds from the first download's start.
    pub from_s: f64,
    /// Downloads that ran through the whole slot (started at or before its
    /// start, ended at or after its end, whatever their outcome).
    pub running: u32,
    /// Of them, those that received at least one body byte in it.
    pub moving: u32,
}

/// For each slot some download ran through whole: how many did, and how
/// many of them moved. A stalled download counts as running, not moving,
/// through the slots of its gap until it is given up.
pub fn progress_per_slot(rows: &[&DownloadRow]) -> Vec<SlotProgress> {
    let slots = rows
        .iter()
        .map(|r| ((r.end_at_s.max(0.0) / SLOT_S) as usize).min(MAX_SLOTS))
        .max()
        .unwrap_or(0);
    (0..slots)
        .filter_map(|k| {
            let from_s = k as f64 * SLOT_S;
            let through: Vec<&&DownloadRow> = rows
                .iter()
                .filter(|r| r.start_at_s <= from_s && r.end_at_s >= from_s + SLOT_S)
                .collect();
            if through.is_empty() {
                return None;
            }
            Some(SlotProgress {
                from_s,
                running: through.len() as u32,
                moving: through
                    .iter()
                    .filter(|r| r.bytes_per_10s.get(k).is_some_and(|&b| b > 0))
                    .count() as u32,
            })
        })
        .collect()
}

/// The stalled downloads of one variant, summarized.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StallSummary {
    pub stalled: u32,
    /// When their longest gap began, seconds: 10th, 50th, 90th percentile.
    pub gap_at_p10_s: f64,
    pub gap_at_p50_s: f64,
    pub gap_at_p90_s: f64,
    /// Of them, never a byte.
    pub without_a_byte: u32,
    /// With the proxy's view.
    pub traced: u32,
    /// Medians at the gap: send buffer (bytes), segments in flight.
    pub send_buffer_at_gap_p50: u32,
    pub unacked_at_gap_p50: u32,
    /// Fewer than 4 segments in flight at the gap (too few for three
    /// duplicate ACKs after a loss).
    pub under_four_unacked: u32,
    /// The RTO at least doubled (one time-out or more) within the gap; at
    /// least quadrupled.
    pub backed_off: u32,
    pub backed_off_twice: u32,
    /// Median send buffer of the variant's downloads that did not stall,
    /// over their whole connection, bytes.
    pub others_send_buffer_p50: u32,
    /// Nothing queued unsent at the gap: of the stalled with a reading,
    /// and of the others (at their own longest gap) with one, and how
    /// many had a reading in each group.
    pub nothing_unsent: u32,
    pub with_unsent_reading: u32,
    pub others_nothing_unsent: u32,
    pub others_with_unsent_reading: u32,
}

pub fn stall_summary(rows: &[DownloadRow]) -> StallSummary {
    let stalled: Vec<&DownloadRow> = rows
        .iter()
        .filter(|r| r.outcome == Outcome::Stalled)
        .collect();
    let views: Vec<&ProxyView> = stalled.iter().filter_map(|r| r.proxy.as_ref()).collect();
    let others: Vec<&ProxyView> = rows
        .iter()
        .filter(|r| r.outcome != Outcome::Stalled)
        .filter_map(|r| r.proxy.as_ref())
        .collect();
    let mut at: Vec<f64> = stalled.iter().map(|r| r.longest_gap_at_s).collect();
    StallSummary {
        stalled: stalled.len() as u32,
        gap_at_p10_s: quantile(&mut at, 0.10),
        gap_at_p50_s: quantile(&mut at, 0.50),
        gap_at_p90_s: quantile(&mut at, 0.90),
        without_a_byte: stalled.iter().filter(|r| r.bytes == 0).count() as u32,
        traced: views.len() as u32,
        send_buffer_at_gap_p50: median(views.iter().map(|v| v.send_buffer_at_gap).collect())
            .unwrap_or(0),
        unacked_at_gap_p50: median(views.iter().map(|v| v.unacked_at_gap).collect()).unwrap_or(0),
        under_four_unacked: views.iter().filter(|v| v.unacked_at_gap < 4).count() as u32,
        backed_off: views.iter().filter(|v| v.backoffs_in_gap() >= 1).count() as u32,
        backed_off_twice: views.iter().filter(|v| v.backoffs_in_gap() >= 2).count() as u32,
        others_send_buffer_p50: median(others.iter().map(|v| v.send_buffer_median).collect())
            .unwrap_or(0),
        nothing_unsent: unsent_zero(views.iter().copied()),
        with_unsent_reading: views.iter().filter(|v| v.notsent_at_gap.is_some()).count() as u32,
        others_nothing_unsent: unsent_zero(others.iter().copied()),
        others_with_unsent_reading: others.iter().filter(|v| v.notsent_at_gap.is_some()).count()
            as u32,
    }
}

fn unsent_zero<'a>(views: impl Iterator<Item = &'a ProxyView>) -> u32 {
    views.filter(|v| v.notsent_at_gap == Some(0)).count() as u32
}

/// The stalled downloads' table, one line per variant.
pub fn render_stalls(out: &mut String, variants: &[(&str, &StallSummary)], stall_s: f64) {
    let _ = writeln!(
        out,
        "\nStalled downloads (no byte for {stall_s} s), from `downloads.jsonl`: when the longest gap began (s since the first download was due), the proxy's connection at the last sample before it (send buffer as the kernel holds it, segments in flight), and whether its RTO backed off within the gap.\n"
    );
    let _ = writeln!(
        out,
        "| variant | stalled | gap began p10 / p50 / p90 s | never a byte | traced | send buffer at gap p50 KiB | others' send buffer p50 KiB | in flight at gap p50 | < 4 in flight | RTO ≥ 2× | RTO ≥ 4× | nothing unsent at gap | others: nothing unsent at their longest gap |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (name, s) in variants {
        let _ = writeln!(
            out,
            "| {name} | {} | {:.1} / {:.1} / {:.1} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} of {} | {} of {} |",
            s.stalled,
            s.gap_at_p10_s,
            s.gap_at_p50_s,
            s.gap_at_p90_s,
            s.without_a_byte,
            s.traced,
            f64::from(s.send_buffer_at_gap_p50) / 1024.0,
            f64::from(s.others_send_buffer_p50) / 1024.0,
            s.unacked_at_gap_p50,
            s.under_four_unacked,
            s.backed_off,
            s.backed_off_twice,
            s.nothing_unsent,
            s.with_unsent_reading,
            s.others_nothing_unsent,
            s.others_with_unsent_reading,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(
        t_s: f64,
        send_buffer: u32,
        unacked: u32,
        rto_ms: u32,
        retrans: u32,
    ) -> ConnectionSample {
        ConnectionSample {
            t_s,
            send_buffer,
            send_queued: send_buffer / 2,
            unacked,
            cwnd: unacked.max(1),
            mss: 1448,
            rtt_us: 10_000,
            rto_us: rto_ms * 1000,
            total_retrans: retrans,
            notsent: Some(unacked % 2 * 1448),
        }
    }

    fn record(local: &str, outcome: Outcome, gap_at: f64, gap: f64) -> DownloadRecord {
        DownloadRecord {
            path: 0,
            local: Some(local.parse().unwrap()),
            outcome,
            bytes: 1000,
            objects: 0,
            start_at_s: 1.0,
            active_s: 40.0,
            first_byte_s: Some(0.2),
            longest_gap_s: gap,
            longest_gap_at_s: gap_at,
            bytes_per_slot: vec![600, 400],
        }
    }

    #[test]
    fn jain_index_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert_eq!(jain_index(&[5, 5, 5, 5]), Some(1.0));
        assert_eq!(jain_index(&[8, 0, 0, 0]), Some(0.25));
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0, 0]), None);
    }

    #[test]
    fn a_slot_counts_the_downloads_running_through_it_and_those_that_moved() {
        let row = |start: f64, end: f64, slots: Vec<u64>| DownloadRow {
            variant: "ssbt".into(),
            path: 0,
            rtt_ms: 5.0,
            loss_pct: 0.0,
            rate_mbit: 50.0,
            client: None,
            outcome: Outcome::Completed,
            start_at_s: start,
            end_at_s: end,
            bytes: slots.iter().sum(),
            objects: 0,
            first_byte_s: None,
            longest_gap_s: 0.0,
            longest_gap_at_s: start,
            bytes_per_10s: slots,
            proxy: None,
        };
        let a = row(0.0, 30.5, vec![10, 10, 10]);
        // Stalled from 12 s and given up at 32 s: running, not moving, in
        // slot 2.
        let b = row(1.0, 32.0, vec![10, 5]);
        // Started late: only in slot 2.
        let c = row(19.0, 30.0, vec![0, 1, 2]);
        let slots = progress_per_slot(&[&a, &b, &c]);
        let at = |from_s: f64| slots.iter().find(|s| s.from_s == from_s).copied();
        assert_eq!(
            at(0.0),
            Some(SlotProgress {
                from_s: 0.0,
                running: 1,
                moving: 1
            })
        );
        assert_eq!(
            at(10.0),
            Some(SlotProgress {
                from_s: 10.0,
                running: 2,
                moving: 2
            })
        );
        assert_eq!(
            at(20.0),
            Some(SlotProgress {
                from_s: 20.0,
                running: 3,
                moving: 2
            })
        );
        assert_eq!(slots.len(), 3);
    }

    #[test]
    fn the_view_is_taken_at_the_gap_and_over_it() {
        let samples = vec![
            sample(9.0, 40_000, 20, 210, 3),
            sample(10.0, 8_000, 3, 210, 4),
            ConnectionSample {
                rtt_us: 25_000,
                ..sample(11.0, 6_000, 2, 420, 5)
            },
            sample(13.0, 6_000, 1, 1680, 7),
            sample(40.0, 50_000, 30, 210, 9),
        ];
        let v = proxy_view(&samples, 10.5, 20.0).unwrap();
        assert_eq!(v.samples, 5);
        assert_eq!(v.send_buffer_at_gap, 8_000);
        assert_eq!(v.unacked_at_gap, 3);
        assert_eq!(v.samples_in_gap, 2);
        assert_eq!(v.send_buffer_min_in_gap, 6_000);
        assert_eq!(v.rto_ms_max_in_gap, 1680.0);
        assert_eq!(v.rto_ms_min, 210.0);
        assert_eq!(v.backoffs_in_gap(), 3);
        assert_eq!(v.retransmits_in_gap, 3);
        assert_eq!(v.send_buffer_median, 8_000);
        assert_eq!(
            (v.rtt_ms_max, v.rtt_max_at_s, v.rtt_ms_last),
            (25.0, 11.0, 10.0)
        );
        // A gap before the first sample reads the first one.
        let v = proxy_view(&samples, 1.0, 2.0).unwrap();
        assert_eq!((v.send_buffer_at_gap, v.samples_in_gap), (40_000, 0));
        assert_eq!(v.backoffs_in_gap(), 0);
        assert_eq!(proxy_view(&[], 1.0, 2.0), None);
    }

    #[test]
    fn downloads_join_their_traces_and_stalls_are_summarized() {
        let mut traces = ConnectionTraces::new();
        traces.insert(
            "10.0.0.2:4000".parse().unwrap(),
            vec![sample(5.0, 8_000, 2, 210, 0), sample(6.0, 8_000, 1, 840, 2)],
        );
        traces.insert(
            "10.0.0.2:4001".parse().unwrap(),
            vec![sample(5.0, 100_000, 40, 210, 0)],
        );
        let paths: Vec<PathPlan> =
            toml::from_str::<std::collections::BTreeMap<String, Vec<PathPlan>>>(
                "[[p]]\nrtt_ms = 5\nloss_pct = 0\nrate_mbit = 50\ndownloads = 2\n",
            )
            .unwrap()
            .remove("p")
            .unwrap();
        let downloads = vec![
            record("10.0.0.2:4000", Outcome::Stalled, 5.5, 20.0),
            record("10.0.0.2:4001", Outcome::Completed, 2.0, 0.5),
            record("10.0.0.2:4002", Outcome::Stalled, 30.0, 20.0),
        ];
        let rows = rows("ssbt", &paths, &downloads, &traces);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].rtt_ms, 5.0);
        assert_eq!(rows[0].end_at_s, 41.0);
        assert_eq!(rows[2].proxy, None, "never sampled");
        let s = stall_summary(&rows);
        assert_eq!((s.stalled, s.traced), (2, 1));
        assert_eq!(s.send_buffer_at_gap_p50, 8_000);
        assert_eq!(s.under_four_unacked, 1);
        assert_eq!((s.backed_off, s.backed_off_twice), (1, 1));
        assert_eq!(s.others_send_buffer_p50, 100_000);
        // At the gap the stalled one had 2 in flight and nothing unsent;
        // the other, 40 in flight and nothing unsent either.
        assert_eq!((s.nothing_unsent, s.with_unsent_reading), (1, 1));
        assert_eq!(
            (s.others_nothing_unsent, s.others_with_unsent_reading),
            (1, 1)
        );
        assert_eq!(rows[0].proxy.as_ref().unwrap().notsent_at_gap, Some(0));
        assert_eq!((s.gap_at_p10_s, s.gap_at_p90_s), (5.5, 30.0));

        let text = to_jsonl(&rows).unwrap();
        let back: Vec<DownloadRow> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, rows);
        let mut table = String::new();
        render_stalls(&mut table, &[("ssbt", &s)], 20.0);
        assert!(
            table.contains("| ssbt | 2 | 5.5 / 5.5 / 30.0 | 0 | 1 | 8 | 98 | 2 | 1 | 1 | 1 | 1 of 1 | 1 of 1 |"),
            "{table}"
        );
    }
}
