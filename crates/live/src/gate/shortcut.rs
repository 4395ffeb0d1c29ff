//! The kernel-side shortcut: while the filter's verdict is constant
//! ([`SynFilter::constant_until`]: e.g. a token bucket with no token drops
//! every SYN until its next token), the kernel applies it without queueing
//! the SYN, and the filter is told afterwards
//! ([`SynFilter::on_decided_elsewhere`]). The sans-IO filter stays the only
//! thing that decides; the kernel only repeats a decision for the time the
//! filter gave.
//!
//! One BPF array map of four `u64` per gate, shared by memory with the
//! gate ([`U64Array`]):
//!
//! | key | value |
//! |---|---|
//! | 0 | drop every SYN while `CLOCK_MONOTONIC` < this (ns) |
//! | 1 | reject every SYN while `CLOCK_MONOTONIC` < this (ns) |
//! | 2 | SYNs the drop rule took |
//! | 3 | SYNs the reject rule took |
//!
//! Two socket-filter programs (one per verdict, 23 instructions each,
//! assembled in [`program`]) read their deadline, compare it with
//! `bpf_ktime_get_ns`, and on a match add one to their count (atomically).
//! They never read the packet, so the same programs serve the iptables and
//! the ip6tables rules (IPv4 and IPv6 listeners alike).
//! They are pinned in bpffs ([`pin_path`]) and used by iptables rules in
//! front of each listener's NFQUEUE rule:
//!
//! ```text
//! -A VANTAGE-GATE-q<queue> -p tcp --syn [-d A] --dport P -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q<queue>_p<pid>_drop -j DROP
//! -A VANTAGE-GATE-q<queue> -p tcp --syn [-d A] --dport P -m bpf --object-pinned /sys/fs/bpf/vantage_gate_q<queue>_p<pid>_reject -j REJECT --reject-with tcp-reset
//! ```
//!
//! (only the rules of the verdicts the filter kind can hold constant). A
//! gate that dies leaves deadlines that pass by themselves: the SYNs go to
//! the queue again (and, with no reader, through by bypass).
//!
//! What the shortcut does not see: the 4-tuple of the SYNs it decides (they
//! are not checked for retransmission) and their listener (one map per
//! gate: its SYNs are counted per verdict, not per listener). Both are
//! counted apart (`shortcut_dropped`, `shortcut_rejected`) so the
//! difference is known.

use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use vantage_core::admission::syn::{FilterKind, Verdict};
use vantage_sys::bpf::{self, asm::*, BpfError, Insn, Program, U64Array};

/// Prefix of every pinned program of a gate, in bpffs.
pub const PIN_PREFIX: &str = "vantage_gate_q";

/// The verdicts the shortcut can apply, in map order.
pub const VERDICTS: [Verdict; 2] = [Verdict::Drop, Verdict::Reject];

const KEYS: u32 = 4;

/// The map slot of a shortcut verdict (`None` for `Accept`).
pub fn slot(verdict: Verdict) -> Option<usize> {
    VERDICTS.iter().position(|v| *v == verdict)
}

fn verdict_name(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Accept => "accept",
        Verdict::Drop => "drop",
        Verdict::Reject => "reject",
    }
}

/// Where the program of `verdict` of the gate on `queue` owned by `pid` is
/// pinned (`pid` is text so that `gate check` can print `PID`).
pub fn pin_path(queue: u16, pid: &str, verdict: Verdict) -> PathBuf {
    Path::new(bpf::BPFFS).join(format!(
        "{PIN_PREFIX}{queue}_p{pid}_{}",
        verdict_name(verdict)
    ))
}

/// The verdicts a filter kind can hold constant, i.e. the shortcut rules
/// it needs (`constant_until` of each filter).
pub fn verdicts_for(kind: FilterKind) -> &'static [Verdict] {
    match kind {
        FilterKind::Tbf => &[Verdict::Drop],
        FilterKind::TbfReject | FilterKind::Abacus => &[Verdict::Reject],
        FilterKind::Greedy => &[Verdict::Drop, Verdict::Reject],
    }
}

/// The program of slot `slot`: match (return 1) and count while
/// `ktime < map[slot]`, else return 0.
pub fn program(map_fd: RawFd, slot: usize) -> Vec<Insn> {
    let until_key = slot as i32;
    let count_key = 2 + slot as i32;
    let mut p = Vec::with_capacity(23);
    // r0 = &map[until_key]
    p.push(store_u32_imm(R10, -4, until_key));
    p.extend(load_map_fd(R1, map_fd));
    p.push(mov_reg(R2, R10));
    p.push(add_imm(R2, -4));
    p.push(call(HELPER_MAP_LOOKUP));
    p.push(jump_eq_imm(R0, 0, 14)); // → no match
    p.push(load_u64(R7, R0, 0));
    p.push(call(HELPER_KTIME_GET_NS));
    p.push(jump_ge_reg(R0, R7, 11)); // now ≥ until → no match
                                     // r0 = &map[count_key]; *r0 += 1
    p.push(store_u32_imm(R10, -4, count_key));
    p.extend(load_map_fd(R1, map_fd));
    p.push(mov_reg(R2, R10));
    p.push(add_imm(R2, -4));
    p.push(call(HELPER_MAP_LOOKUP));
    p.push(jump_eq_imm(R0, 0, 4)); // → no match
    p.push(mov_imm(R1, 1));
    p.push(atomic_add_u64(R0, R1, 0));
    p.push(mov_imm(R0, 1));
    p.push(exit());
    // no match
    p.push(mov_imm(R0, 0));
    p.push(exit());
    p
}

/// The map a gate's shortcut programs read, and its pinned programs.
#[derive(Debug)]
pub struct Shortcut {
    map: U64Array,
    pins: Mutex<Vec<PathBuf>>,
}

impl Shortcut {
    /// Mounts bpffs if needed, creates the map, loads both programs and
    /// pins them for the gate on `queue` owned by this process.
    pub fn create(queue: u16) -> Result<Shortcut, BpfError> {
        bpf::ensure_bpffs()?;
        let map = U64Array::create(KEYS)?;
        let pid = std::process::id().to_string();
        let shortcut = Shortcut {
            map,
            pins: Mutex::new(Vec::new()),
        };
        for (slot, &verdict) in VERDICTS.iter().enumerate() {
            let program = Program::load_socket_filter(
                &format!("vantage_{}", verdict_name(verdict)),
                &program(shortcut.map.fd(), slot),
            )?;
            let path = pin_path(queue, &pid, verdict);
            // A left-over of a process with the same pid (pids are reused).
            let _ = std::fs::remove_file(&path);
            program.pin(&path)?;
            // On error, the pins made so far go with `shortcut`.
            shortcut.pins_mut().push(path);
        }
        Ok(shortcut)
    }

    fn pins_mut(&self) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
        self.pins
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The pinned programs (none once unpinned).
    pub fn pins(&self) -> Vec<PathBuf> {
        self.pins_mut().clone()
    }

    /// Lets the kernel apply `verdict` to every SYN until `until_ns`
    /// (`CLOCK_MONOTONIC`), and no other verdict.
    pub fn arm(&self, verdict: Verdict, until_ns: u64) {
        for (slot, &v) in VERDICTS.iter().enumerate() {
            let value = if v == verdict { until_ns } else { 0 };
            self.map.entry(slot as u32).store(value, Ordering::Release);
        }
    }

    /// No verdict in the kernel: every SYN is queued.
    pub fn disarm(&self) {
        for slot in 0..VERDICTS.len() {
            self.map.entry(slot as u32).store(0, Ordering::Release);
        }
    }

    /// SYNs each rule took so far (in [`VERDICTS`] order).
    pub fn counts(&self) -> [u64; 2] {
        [2, 3].map(|key| self.map.entry(key).load(Ordering::Acquire))
    }

    /// Removes the pins (idempotent; rules that use the programs keep them
    /// alive until they go).
    pub fn unpin(&self) {
        for path in self.pins_mut().drain(..) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Shortcut {
    fn drop(&mut self) {
        self.unpin();
    }
}

/// The pinned programs of gates in bpffs: `(path, owner pid)`.
pub fn pinned() -> Vec<(PathBuf, u32)> {
    let Ok(entries) = std::fs::read_dir(bpf::BPFFS) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let pid = pin_owner(path.file_name()?.to_str()?)?;
            Some((path, pid))
        })
        .collect()
}

/// The owner pid in a pin's name (`vantage_gate_q3_p42_drop` → 42).
pub fn pin_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PIN_PREFIX)?;
    let (_queue, rest) = rest.split_once("_p")?;
    let (pid, verdict) = rest.split_once('_')?;
    matches!(verdict, "drop" | "reject").then_some(())?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_are_named_by_queue_owner_and_verdict() {
        let path = pin_path(3, "42", Verdict::Reject);
        assert_eq!(path, Path::new("/sys/fs/bpf/vantage_gate_q3_p42_reject"));
        assert_eq!(pin_owner("vantage_gate_q3_p42_reject"), Some(42));
        assert_eq!(pin_owner("vantage_gate_q3_p42_drop"), Some(42));
        assert_eq!(pin_owner("vantage_gate_q3_p42_accept"), None);
        assert_eq!(pin_owner("other_q3_p42_drop"), None);
    }

    #[test]
    fn jumps_land_on_the_exits() {
        let p = program(3, 1);
        assert_eq!(p.len(), 23);
        // Both early exits and the failed second lookup reach `r0 = 0`.
        let no_match = p.len() - 2;
        assert_eq!(p[no_match], mov_imm(R0, 0));
        assert_eq!(p[no_match - 2], mov_imm(R0, 1));
    }

    #[test]
    fn each_kind_gets_the_rules_of_its_constant_verdicts() {
        assert_eq!(verdicts_for(FilterKind::Tbf), &[Verdict::Drop]);
        assert_eq!(verdicts_for(FilterKind::Abacus), &[Verdict::Reject]);
        assert_eq!(verdicts_for(FilterKind::Greedy).len(), 2);
    }
}
