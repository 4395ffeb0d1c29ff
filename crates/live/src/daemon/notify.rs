//! systemd's readiness protocol (`sd_notify(3)`): one datagram to the
//! socket named by `$NOTIFY_SOCKET` (a path, or `@name` in the abstract
//! namespace). Without the variable (not started by systemd) it does
//! nothing.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// A state the daemon reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotifyState {
    /// Serving: queues bound and rules in.
    Ready,
    /// Reloading the configuration (`RELOADING=1`), until `Ready` again.
    Reloading,
    /// On the way out.
    Stopping,
}

impl NotifyState {
    pub fn message(self) -> &'static str {
        match self {
            NotifyState::Ready => "READY=1",
            NotifyState::Reloading => "RELOADING=1",
            NotifyState::Stopping => "STOPPING=1",
        }
    }
}

/// Sends `state` to `$NOTIFY_SOCKET`; returns whether it was sent.
pub fn notify(state: NotifyState) -> std::io::Result<bool> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let target = target.to_string_lossy().into_owned();
    let address = match target.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(&target)?,
    };
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(state.message().as_bytes(), &address)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_one_datagram_to_the_socket() {
        let dir = std::env::temp_dir().join(format!("vantage-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let receiver = UnixDatagram::bind(&path).unwrap();
        std::env::set_var("NOTIFY_SOCKET", &path);
        assert!(notify(NotifyState::Ready).unwrap());
        std::env::remove_var("NOTIFY_SOCKET");
        let mut buffer = [0u8; 64];
        let n = receiver.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..n], b"READY=1");
        assert!(!notify(NotifyState::Stopping).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
