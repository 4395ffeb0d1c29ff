//! The privileges the gate, the WAN emulator and the testbed need
//! (CAP_NET_ADMIN for NFQUEUE, iptables and network namespaces).

/// True when the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: plain system call without arguments.
    unsafe { libc::geteuid() == 0 }
}
