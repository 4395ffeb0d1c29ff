//! From a filter's verdict to what the kernel is told, for one batch of
//! queued packets. Pure: no socket, no clock, no lock — the caller holds the
//! filter and says what time it is.
//!
//! Abacus paper, Section 2 and Section 3.2: a SYN is *accepted* (the
//! handshake proceeds), *dropped* (silently: the client retransmits after
//! its timeout) or *rejected* (the client is told to stop). The paper's
//! prototype modified `ipchains` to drop; Linux now offers the three through
//! NFQUEUE verdicts:
//!
//! | filter verdict | NFQUEUE verdict | effect |
//! |---|---|---|
//! | `Accept` | `NF_ACCEPT` | the SYN continues to the TCP stack |
//! | `Drop` | `NF_DROP` | discarded; the client retransmits |
//! | `Reject` | `NF_REPEAT` with the reject mark | the packet re-enters the INPUT hook from its first rule; the gate's chain starts with `-m mark --mark M -j REJECT --reject-with tcp-reset`, so the client gets a RST (`ECONNREFUSED`) |
//!
//! In a dry run every verdict is still computed and counted, and every
//! packet is accepted.

use vantage_core::admission::syn::record::GateCounts;
use vantage_core::admission::syn::{SynFilter, Verdict};
use vantage_core::Nanos;

use super::packet::PacketClass;

/// What the gate tells the kernel about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateAction {
    /// `NF_ACCEPT`.
    Accept,
    /// `NF_DROP`.
    Drop,
    /// `NF_REPEAT` with the reject mark: the chain's REJECT rule answers
    /// with a RST.
    Reject,
}

/// The kernel action for a filter verdict (everything is accepted in a dry
/// run).
pub fn action_for(verdict: Verdict, dry_run: bool) -> GateAction {
    if dry_run {
        return GateAction::Accept;
    }
    match verdict {
        Verdict::Accept => GateAction::Accept,
        Verdict::Drop => GateAction::Drop,
        Verdict::Reject => GateAction::Reject,
    }
}

/// Whether a batch has any SYN, i.e. whether the filter must be locked.
pub fn has_syn(packets: &[(u32, PacketClass)]) -> bool {
    packets.iter().any(|(_, class)| *class == PacketClass::Syn)
}

/// Decides one batch: each SYN meets `filter` at `now` in order, every
/// other packet passes. Calls `emit(packet_id, action)` once per packet, in
/// order, and returns the counts.
pub fn decide_batch<F, E>(
    filter: &mut F,
    now: Nanos,
    packets: &[(u32, PacketClass)],
    dry_run: bool,
    emit: E,
) -> GateCounts
where
    F: SynFilter + ?Sized,
    E: FnMut(u32, GateAction),
{
    decide_batch_with(filter, now, packets, dry_run, emit, |_| {})
}

/// [`decide_batch`], also calling `on_syn(verdict)` with the filter's
/// verdict of each SYN, in order (also in a dry run).
pub fn decide_batch_with<F, E, S>(
    filter: &mut F,
    now: Nanos,
    packets: &[(u32, PacketClass)],
    dry_run: bool,
    mut emit: E,
    mut on_syn: S,
) -> GateCounts
where
    F: SynFilter + ?Sized,
    E: FnMut(u32, GateAction),
    S: FnMut(Verdict),
{
    let mut counts = GateCounts::default();
    for &(id, class) in packets {
        match class {
            PacketClass::Syn => {
                let verdict = filter.on_syn(now);
                match verdict {
                    Verdict::Accept => counts.accepted += 1,
                    Verdict::Drop => counts.dropped += 1,
                    Verdict::Reject => counts.rejected += 1,
                }
                on_syn(verdict);
                emit(id, action_for(verdict, dry_run));
            }
            PacketClass::Pass(_) => {
                counts.passed += 1;
                emit(id, GateAction::Accept);
            }
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::packet::PassReason;
    use vantage_core::admission::syn::{EmptyAction, TokenBucket, TokenBucketFilter};

    #[test]
    fn verdicts_map_to_kernel_actions() {
        assert_eq!(action_for(Verdict::Accept, false), GateAction::Accept);
        assert_eq!(action_for(Verdict::Drop, false), GateAction::Drop);
        assert_eq!(action_for(Verdict::Reject, false), GateAction::Reject);
        for v in [Verdict::Accept, Verdict::Drop, Verdict::Reject] {
            assert_eq!(action_for(v, true), GateAction::Accept);
        }
    }

    fn reject_filter(tokens: u64) -> TokenBucketFilter {
        TokenBucketFilter::new(TokenBucket::new(tokens, 0.0).unwrap(), EmptyAction::Reject)
    }

    #[test]
    fn a_batch_is_decided_in_order_and_counted() {
        let mut filter = reject_filter(2);
        let packets = [
            (10, PacketClass::Syn),
            (11, PacketClass::Pass(PassReason::NotSyn)),
            (12, PacketClass::Syn),
            (13, PacketClass::Syn),
            (14, PacketClass::Pass(PassReason::NotTcp)),
        ];
        assert!(has_syn(&packets));
        let mut out = Vec::new();
        let counts = decide_batch(
            &mut filter,
            Nanos::from_secs(1),
            &packets,
            false,
            |id, a| out.push((id, a)),
        );
        assert_eq!(
            out,
            vec![
                (10, GateAction::Accept),
                (11, GateAction::Accept),
                (12, GateAction::Accept),
                (13, GateAction::Reject),
                (14, GateAction::Accept),
            ]
        );
        assert_eq!(
            counts,
            GateCounts {
                accepted: 2,
                rejected: 1,
                passed: 2,
                ..GateCounts::default()
            }
        );
        assert_eq!(counts.syns(), 3);
    }

    #[test]
    fn a_dry_run_counts_decisions_but_accepts_everything() {
        let mut filter =
            TokenBucketFilter::new(TokenBucket::new(1, 0.0).unwrap(), EmptyAction::Drop);
        let packets = [
            (1, PacketClass::Syn),
            (2, PacketClass::Syn),
            (3, PacketClass::Syn),
        ];
        let mut actions = Vec::new();
        let counts = decide_batch(&mut filter, Nanos::ZERO, &packets, true, |_, a| {
            actions.push(a)
        });
        assert_eq!(actions, vec![GateAction::Accept; 3]);
        assert_eq!((counts.accepted, counts.dropped), (1, 2));
    }

    #[test]
    fn a_batch_without_syns_does_not_touch_the_filter() {
        let mut filter = reject_filter(0);
        let packets = [(5, PacketClass::Pass(PassReason::OtherListener))];
        assert!(!has_syn(&packets));
        let counts = decide_batch(&mut filter, Nanos::ZERO, &packets, false, |_, a| {
            assert_eq!(a, GateAction::Accept)
        });
        assert_eq!(counts.passed, 1);
        assert_eq!(counts.syns(), 0);
    }
}
