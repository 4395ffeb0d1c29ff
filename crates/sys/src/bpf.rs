//! A few `bpf(2)` commands: an array map of `u64` shared by memory with
//! the kernel (`BPF_F_MMAPABLE`), a socket-filter program loaded from
//! instructions assembled here, and pinning it in bpffs so that iptables
//! (`-m bpf --object-pinned PATH`) can use it.
//!
//! Written by hand: the Rust BPF loaders (`aya`, `libbpf-rs`) load ELF
//! objects built by clang; none loads a handful of raw instructions, and
//! the machines the gate runs on need not have clang.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// Where bpffs is mounted by convention.
pub const BPFFS: &str = "/sys/fs/bpf";

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_FS_MAGIC: libc::c_long = 0xcafe_4a11;

/// Errors of the `bpf(2)` commands, with what was asked.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    #[error("bpf({command}): {source}")]
    Syscall {
        command: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("bpf(BPF_PROG_LOAD) refused the program: {source}; verifier: {log}")]
    Verifier {
        #[source]
        source: std::io::Error,
        log: String,
    },
    #[error("mmap of the BPF map: {0}")]
    Mmap(#[source] std::io::Error),
    #[error("bpffs at {path}: {source}")]
    Bpffs {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a valid path")]
    BadPath(PathBuf),
}

/// `union bpf_attr`, large enough for every command used here; zeroed
/// bytes past a command's fields are what the kernel expects.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32_at(&mut self, offset: usize, value: u32) -> &mut Attr {
        self.0[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
        self
    }
    fn u64_at(&mut self, offset: usize, value: u64) -> &mut Attr {
        self.0[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
        self
    }
}

fn bpf(command: libc::c_long, attr: &mut Attr) -> std::io::Result<RawFd> {
    // SAFETY: `attr` is a valid, writable buffer of the size passed, laid
    // out as `union bpf_attr` for `command`; pointers in it outlive the call.
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    if result < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(result as RawFd)
    }
}

/// An array map of `u64`, keys `0..len`, mapped into this process: reads
/// and writes are plain atomic memory accesses, no system call.
#[derive(Debug)]
pub struct U64Array {
    fd: OwnedFd,
    memory: *mut AtomicU64,
    len: u32,
    mapped_bytes: usize,
}

// SAFETY: the mapping is shared memory accessed only through `AtomicU64`.
unsafe impl Send for U64Array {}
// SAFETY: as above.
unsafe impl Sync for U64Array {}

impl U64Array {
    /// Creates the map (`len` ≥ 1 entries, all zero) and maps it.
    pub fn create(len: u32) -> Result<U64Array, BpfError> {
        let len = len.max(1);
        let mut attr = Attr::new();
        attr.u32_at(0, BPF_MAP_TYPE_ARRAY)
            .u32_at(4, 4)
            .u32_at(8, 8)
            .u32_at(12, len)
            .u32_at(16, BPF_F_MMAPABLE);
        let fd = bpf(BPF_MAP_CREATE, &mut attr).map_err(|source| BpfError::Syscall {
            command: "BPF_MAP_CREATE",
            source,
        })?;
        // SAFETY: a new descriptor this process owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mapped_bytes = (len as usize * 8).div_ceil(page) * page;
        // SAFETY: maps the map's shared pages; checked for failure below.
        let memory = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if memory == libc::MAP_FAILED {
            return Err(BpfError::Mmap(std::io::Error::last_os_error()));
        }
        Ok(U64Array {
            fd,
            memory: memory.cast(),
            len,
            mapped_bytes,
        })
    }

    /// Entry `key` (panics past the end: keys are the caller's constants).
    pub fn entry(&self, key: u32) -> &AtomicU64 {
        assert!(key < self.len, "key {key} of a map of {}", self.len);
        // SAFETY: in bounds, 8-byte aligned (page-aligned base), alive as
        // long as `self`.
        unsafe { &*self.memory.add(key as usize) }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for U64Array {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create`, unmapped once.
        unsafe { libc::munmap(self.memory.cast(), self.mapped_bytes) };
    }
}

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// The few instructions the gate's programs use.
pub mod asm {
    use super::Insn;

    pub const R0: u8 = 0;
    pub const R1: u8 = 1;
    pub const R2: u8 = 2;
    pub const R7: u8 = 7;
    pub const R10: u8 = 10;
    /// `bpf_map_lookup_elem`.
    pub const HELPER_MAP_LOOKUP: i32 = 1;
    /// `bpf_ktime_get_ns` (`CLOCK_MONOTONIC`).
    pub const HELPER_KTIME_GET_NS: i32 = 5;

    fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
    /// `dst = imm` (64-bit).
    pub fn mov_imm(dst: u8, imm: i32) -> Insn {
        insn(0xb7, dst, 0, 0, imm)
    }
    /// `dst = src` (64-bit).
    pub fn mov_reg(dst: u8, src: u8) -> Insn {
        insn(0xbf, dst, src, 0, 0)
    }
    /// `dst += imm` (64-bit).
    pub fn add_imm(dst: u8, imm: i32) -> Insn {
        insn(0x07, dst, 0, 0, imm)
    }
    /// `*(u32 *)(dst + off) = imm`.
    pub fn store_u32_imm(dst: u8, off: i16, imm: i32) -> Insn {
        insn(0x62, dst, 0, off, imm)
    }
    /// `dst = *(u64 *)(src + off)`.
    pub fn load_u64(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x79, dst, src, off, 0)
    }
    /// `lock *(u64 *)(dst + off) += src`.
    pub fn atomic_add_u64(dst: u8, src: u8, off: i16) -> Insn {
        insn(0xdb, dst, src, off, 0)
    }
    /// `dst = map` (two instructions: a 64-bit immediate of the map's fd).
    pub fn load_map_fd(dst: u8, fd: i32) -> [Insn; 2] {
        [insn(0x18, dst, 1, 0, fd), insn(0, 0, 0, 0, 0)]
    }
    /// `call helper`.
    pub fn call(helper: i32) -> Insn {
        insn(0x85, 0, 0, 0, helper)
    }
    /// `if dst == imm goto +off`.
    pub fn jump_eq_imm(dst: u8, imm: i32, off: i16) -> Insn {
        insn(0x15, dst, 0, off, imm)
    }
    /// `if dst >= src goto +off` (unsigned).
    pub fn jump_ge_reg(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x3d, dst, src, off, 0)
    }
    /// `exit` (returns r0).
    pub fn exit() -> Insn {
        insn(0x95, 0, 0, 0, 0)
    }
}

/// A loaded socket-filter program.
#[derive(Debug)]
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads `insns` as a `BPF_PROG_TYPE_SOCKET_FILTER` program named
    /// `name` (at most 15 bytes are kept); the verifier's log is in the
    /// error when it refuses.
    pub fn load_socket_filter(name: &str, insns: &[Insn]) -> Result<Program, BpfError> {
        let license = c"GPL";
        let mut log = vec![0u8; 64 * 1024];
        let mut attr = Attr::new();
        attr.u32_at(0, BPF_PROG_TYPE_SOCKET_FILTER)
            .u32_at(4, insns.len() as u32)
            .u64_at(8, insns.as_ptr() as u64)
            .u64_at(16, license.as_ptr() as u64)
            .u32_at(24, 1)
            .u32_at(28, log.len() as u32)
            .u64_at(32, log.as_mut_ptr() as u64);
        let name: Vec<u8> = name
            .bytes()
            .filter(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .take(15)
            .collect();
        attr.0[48..48 + name.len()].copy_from_slice(&name);
        match bpf(BPF_PROG_LOAD, &mut attr) {
            // SAFETY: a new descriptor this process owns.
            Ok(fd) => Ok(Program {
                fd: unsafe { OwnedFd::from_raw_fd(fd) },
            }),
            Err(source) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                Err(BpfError::Verifier {
                    source,
                    log: String::from_utf8_lossy(&log[..end]).trim().to_string(),
                })
            }
        }
    }

    /// Pins the program at `path` (in a bpffs); it stays loaded until the
    /// path is removed and no one else holds it.
    pub fn pin(&self, path: &Path) -> Result<(), BpfError> {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| BpfError::BadPath(path.to_path_buf()))?;
        let mut attr = Attr::new();
        attr.u64_at(0, c_path.as_ptr() as u64)
            .u32_at(8, self.fd.as_raw_fd() as u32);
        bpf(BPF_OBJ_PIN, &mut attr).map_err(|source| BpfError::Syscall {
            command: "BPF_OBJ_PIN",
            source,
        })?;
        Ok(())
    }
}

/// Whether `path` is a mounted bpffs.
pub fn is_bpffs(path: &Path) -> bool {
    let Ok(c_path) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct given.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid C string and out pointer.
    let result = unsafe { libc::statfs(c_path.as_ptr(), &mut stat) };
    result == 0 && stat.f_type as libc::c_long == BPF_FS_MAGIC
}

/// Mounts bpffs at [`BPFFS`] unless one is mounted there.
pub fn ensure_bpffs() -> Result<PathBuf, BpfError> {
    let path = PathBuf::from(BPFFS);
    if is_bpffs(&path) {
        return Ok(path);
    }
    let error = |source| BpfError::Bpffs {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(&path).map_err(error)?;
    let target = CString::new(BPFFS).map_err(|_| BpfError::BadPath(path.clone()))?;
    // SAFETY: valid C strings; no data argument.
    let result = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            target.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if result != 0 {
        return Err(error(std::io::Error::last_os_error()));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::asm::*;
    use super::*;

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        let insn = jump_ge_reg(R0, R7, 11);
        assert_eq!((insn.code, insn.regs, insn.off), (0x3d, 0x70, 11));
        let [first, second] = load_map_fd(R1, 9);
        assert_eq!((first.code, first.regs, first.imm), (0x18, 0x11, 9));
        assert_eq!(
            second,
            Insn {
                code: 0,
                regs: 0,
                off: 0,
                imm: 0
            }
        );
    }
}
