//! Socket options whose value is a C `int` (`SO_RCVBUFFORCE`,
//! `TCP_SYNCNT`, `NETLINK_NO_ENOBUFS`, …), set on any descriptor.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub fn set_int_option(
    fd: impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and its exact size is passed alongside.
    let status = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn sets_an_option_and_reports_a_bad_one() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int_option(&socket, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).unwrap();
        assert!(set_int_option(&socket, libc::SOL_SOCKET, -1, 1).is_err());
    }
}
