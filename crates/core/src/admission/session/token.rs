//! Signed, expiring session tokens: Section 7, footnote 3.
//!
//! HP's WebQoS told sessions in progress from new ones by a cookie whose
//! *expire* field ended a session idle for T. A plain cookie lets any client
//! claim "already admitted" and bypass admission control; here the cookie's
//! value is signed with HMAC-SHA-256 under a server secret, so only the
//! server can mint one.
//!
//! Layout, then base64url without padding (the `base64` crate):
//!
//! ```text
//! version (1 byte, = 1) | session id (u64 BE) | issued (u64 BE, ns) |
//! expires (u64 BE, ns) | HMAC-SHA-256 tag over the previous 25 bytes (32)
//! ```
//!
//! The tag is checked in constant time (`Mac::verify_slice`). A token that
//! does not decode, has a bad tag, or whose `expires` is not after `now` is
//! refused; [`super::SessionGate`] then treats the request as a new session.
//! A token is refreshed (re-issued with `expires = now + T`) on every
//! request, so a session idle for T ends and its last token cannot be
//! replayed after that; before that, whoever holds the token holds the
//! session — as with any bearer cookie (the live driver sets it `Secure;
//! HttpOnly`).
//!
//! Departures: instants are the driver's [`Nanos`] (its clock origin);
//! tokens survive a restart only if the driver keeps the key and a
//! monotonic origin. Keys shorter than 16 bytes are refused.

use crate::Nanos;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 1;
const PAYLOAD_LEN: usize = 1 + 8 + 8 + 8;
const TAG_LEN: usize = 32;
/// Shortest secret accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;

/// What a valid token says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionToken {
    pub session_id: u64,
    pub issued: Nanos,
    pub expires: Nanos,
}

/// Why a token was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("session token is not base64url of the expected length and version")]
    Malformed,
    #[error("session token signature does not verify")]
    BadSignature,
    #[error("session token expired at {expired}")]
    Expired { expired: Nanos },
    #[error("session key must be at least {MIN_KEY_LEN} bytes, got {0}")]
    ShortKey(usize),
}

/// Mints and verifies tokens under one secret key.
#[derive(Clone)]
pub struct TokenSigner {
    mac: HmacSha256,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSigner { key: <secret> }")
    }
}

impl TokenSigner {
    pub fn new(key: &[u8]) -> Result<TokenSigner, TokenError> {
        if key.len() < MIN_KEY_LEN {
            return Err(TokenError::ShortKey(key.len()));
        }
        let mac = HmacSha256::new_from_slice(key).map_err(|_| TokenError::ShortKey(key.len()))?;
        Ok(TokenSigner { mac })
    }

    /// A token for `session_id`, valid from `now` until `now + lifetime`.
    pub fn issue(&self, session_id: u64, now: Nanos, lifetime: Nanos) -> String {
        let token = SessionToken {
            session_id,
            issued: now,
            expires: now + lifetime,
        };
        self.encode(&token)
    }

    /// Encodes and signs `token`.
    pub fn encode(&self, token: &SessionToken) -> String {
        let mut bytes = [0u8; PAYLOAD_LEN + TAG_LEN];
        bytes[0] = VERSION;
        bytes[1..9].copy_from_slice(&token.session_id.to_be_bytes());
        bytes[9..17].copy_from_slice(&token.issued.0.to_be_bytes());
        bytes[17..25].copy_from_slice(&token.expires.0.to_be_bytes());
        let mut mac = self.mac.clone();
        mac.update(&bytes[..PAYLOAD_LEN]);
        bytes[PAYLOAD_LEN..].copy_from_slice(&mac.finalize().into_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The token's contents if it is ours, intact and not expired at `now`.
    pub fn verify(&self, token: &str, now: Nanos) -> Result<SessionToken, TokenError> {
        // Reject oversized input before decoding anything.
        if token.len() > 2 * (PAYLOAD_LEN + TAG_LEN) {
            return Err(TokenError::Malformed);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token.as_bytes())
            .map_err(|_| TokenError::Malformed)?;
        if bytes.len() != PAYLOAD_LEN + TAG_LEN || bytes[0] != VERSION {
            return Err(TokenError::Malformed);
        }
        let mut mac = self.mac.clone();
        mac.update(&bytes[..PAYLOAD_LEN]);
        mac.verify_slice(&bytes[PAYLOAD_LEN..])
            .map_err(|_| TokenError::BadSignature)?;
        let field = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_be_bytes(b)
        };
        let parsed = SessionToken {
            session_id: field(1),
            issued: Nanos(field(9)),
            expires: Nanos(field(17)),
        };
        if now >= parsed.expires {
            return Err(TokenError::Expired {
                expired: parsed.expires,
            });
        }
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a server secret of 32 bytes long";

    #[test]
    fn round_trip_and_expiry() {
        let s = TokenSigner::new(KEY).unwrap();
        let t = s.issue(42, Nanos::from_secs(10), Nanos::from_secs(30));
        let v = s.verify(&t, Nanos::from_secs(39)).unwrap();
        assert_eq!(v.session_id, 42);
        assert_eq!(v.issued, Nanos::from_secs(10));
        assert_eq!(v.expires, Nanos::from_secs(40));
        // Replayed at or after its expiry: refused, whatever it says.
        for later in [40, 41, 10_000] {
            assert_eq!(
                s.verify(&t, Nanos::from_secs(later)),
                Err(TokenError::Expired {
                    expired: Nanos::from_secs(40)
                })
            );
        }
    }

    #[test]
    fn forged_and_tampered_tokens_fail() {
        let s = TokenSigner::new(KEY).unwrap();
        let other = TokenSigner::new(b"another secret, also 32 bytes!!!").unwrap();
        let now = Nanos::from_secs(1);
        // Signed with another key.
        let forged = other.issue(7, now, Nanos::from_secs(60));
        assert_eq!(s.verify(&forged, now), Err(TokenError::BadSignature));
        // A genuine token with its expiry pushed out.
        let genuine = s.issue(7, now, Nanos::from_secs(60));
        let mut bytes = URL_SAFE_NO_PAD.decode(&genuine).unwrap();
        bytes[24] ^= 0x40;
        let tampered = URL_SAFE_NO_PAD.encode(&bytes);
        assert_eq!(s.verify(&tampered, now), Err(TokenError::BadSignature));
        // Every single-bit flip anywhere is caught.
        let clean = URL_SAFE_NO_PAD.decode(&genuine).unwrap();
        for i in 0..clean.len() {
            let mut b = clean.clone();
            b[i] ^= 1;
            assert!(s.verify(&URL_SAFE_NO_PAD.encode(&b), now).is_err());
        }
        // Garbage, truncation, padding, oversize.
        for junk in ["", "abc", "!!!!", &genuine[..genuine.len() - 1]] {
            assert_eq!(s.verify(junk, now), Err(TokenError::Malformed));
        }
        assert_eq!(
            s.verify(&"A".repeat(10_000), now),
            Err(TokenError::Malformed)
        );
    }

    #[test]
    fn short_keys_are_refused() {
        assert_eq!(
            TokenSigner::new(b"short").unwrap_err(),
            TokenError::ShortKey(5)
        );
    }
}
