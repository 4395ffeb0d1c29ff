//! Linux plumbing shared by the live daemons and the testbed.
//!
//! * [`bpf`] — an mmap-shared BPF array map, a socket-filter program
//!   assembled in Rust, pinned in bpffs for iptables' `bpf` match;
//! * [`capabilities`] — which capabilities the process holds;
//! * [`cgroup`] — the TCP memory limit and usage of the calling thread's
//!   memory cgroup, and the `/proc/PID/cgroup` format;
//! * [`nfqueue`] — NFQUEUE over raw netlink, with the socket exposed;
//! * [`command`] — running a program to completion, a failure as a typed
//!   error that carries the command line and its standard error;
//! * [`iptables`] — finding and running `iptables`/`ip6tables`, failures as
//!   typed errors that carry the command and its standard error;
//! * [`nft`] — running `nft`, a script as one transaction, failures as
//!   typed errors;
//! * [`process`] — whether a recorded owner pid is alive, and the
//!   descriptors this process holds;
//! * [`packet_ring`] — an `AF_PACKET` TPACKET_V3 capture with a kernel-side
//!   filter for a listener's handshakes, tear-downs and data segments;
//! * [`proc_net`] — the `Group: names` / `Group: values` counters of
//!   `/proc/net/netstat` and `/proc/net/snmp`;
//! * [`sock_diag`] — `TCP_INFO` and `SK_MEMINFO` of many sockets in one
//!   `NETLINK_SOCK_DIAG` dump, by socket cookie;
//! * [`socket`] — setting a socket option whose value is a C int;
//! * [`privilege`] — whether the process runs as root;
//! * [`tcp_info`] — `TCP_INFO`, `SO_MEMINFO`, socket buffer sizes and the
//!   kernel's TCP memory (`/proc/net/sockstat`, `tcp_mem`, `wmem_max`);
//! * [`stdout_relay`] — standard output that a reader who leaves early
//!   cannot break (`vantage … | head`).

pub mod bpf;
pub mod capabilities;
pub mod cgroup;
pub mod command;
pub mod iptables;
pub mod netlink;
pub mod nfqueue;
pub mod nft;
pub mod packet_ring;
pub mod privilege;
pub mod proc_net;
pub mod process;
pub mod sock_diag;
pub mod socket;
pub mod stdout_relay;
pub mod tcp_info;
