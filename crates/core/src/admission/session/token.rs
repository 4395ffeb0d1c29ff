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
//! does not decode, has a bad tag, whose `expires` is not after `now`,
//! whose `issued` lies more than [`MAX_CLOCK_SKEW`] after `now`, or that is
//! older than the signer's maximum session age (`issued + max_age ≤ now`)
//! is refused; [`super::SessionGate`] then treats the request as a new
//! session. A token is refreshed ([`TokenSigner::refresh`]; the gate does it
//! once T/16 has passed since the last refresh, `super::gate`): only
//! `expires` moves (to `now + T`), `issued` stays, so a session idle for
//! T ends, its last token cannot be replayed after that, and no session
//! outlives its maximum age however often it is refreshed (nor across a
//! restart: the issue time is inside the signed token). Before that,
//! whoever holds the token holds the session — as with any bearer cookie
//! (the live driver sets it `HttpOnly`).
//!
//! Key rotation: a signer holds several keys; the first signs, every one
//! verifies. Dropping a key from the list ends every session it signed.
//!
//! [`TokenMemo`]: the last token that authenticated on one connection; the
//! same text again (compared in constant time) skips the HMAC, never the
//! time rules, and a signer with other keys never recalls it.
//!
//! Departures: instants are the driver's [`Nanos`] (its clock origin; a
//! driver whose tokens must survive a restart uses the wall clock). Keys
//! shorter than 16 bytes are refused.

use crate::Nanos;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identities of signers, unique within the process (see [`TokenMemo`]).
static NEXT_SIGNER_ID: AtomicU64 = AtomicU64::new(1);

type HmacSha256 = Hmac<Sha256>;

const VERSION: u8 = 1;
const PAYLOAD_LEN: usize = 1 + 8 + 8 + 8;
const TAG_LEN: usize = 32;
/// Length of a token's text: base64url of 57 bytes (a multiple of 3, so
/// no padding is left out).
const ENCODED_LEN: usize = (PAYLOAD_LEN + TAG_LEN) / 3 * 4;
const _: () = assert!((PAYLOAD_LEN + TAG_LEN).is_multiple_of(3));
/// Shortest secret accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// Most keys one signer holds (each verification may try them all).
pub const MAX_KEYS: usize = 16;
/// How far in the future an issue time may lie (clocks of restarted or
/// neighbouring servers differ a little); beyond it the token is refused.
pub const MAX_CLOCK_SKEW: Nanos = Nanos::from_secs(5);

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
    #[error("session token issued at {issued} is past the maximum session age")]
    TooOld { issued: Nanos },
    #[error("session token issued at {issued}, in the future")]
    IssuedInFuture { issued: Nanos },
    #[error("session key must be at least {MIN_KEY_LEN} bytes, got {0}")]
    ShortKey(usize),
    #[error("a session signer needs between 1 and {MAX_KEYS} keys, got {0}")]
    KeyCount(usize),
}

/// Mints tokens under its first key and verifies them under any of its
/// keys, with an optional maximum session age.
#[derive(Clone)]
pub struct TokenSigner {
    macs: Vec<HmacSha256>,
    max_age: Option<Nanos>,
    /// Unique to this set of keys: a [`TokenMemo`] filled under other keys
    /// is not recalled (clones share it, having the same keys).
    id: u64,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TokenSigner {{ keys: <{} secret>, max_age: {:?} }}",
            self.macs.len(),
            self.max_age
        )
    }
}

fn mac_for(key: &[u8]) -> Result<HmacSha256, TokenError> {
    if key.len() < MIN_KEY_LEN {
        return Err(TokenError::ShortKey(key.len()));
    }
    HmacSha256::new_from_slice(key).map_err(|_| TokenError::ShortKey(key.len()))
}

impl TokenSigner {
    /// One key, no maximum session age.
    pub fn new(key: &[u8]) -> Result<TokenSigner, TokenError> {
        TokenSigner::with_keys(&[key])
    }

    /// Several keys: the first signs, all verify (rotation: put the new key
    /// first, keep the old ones until their sessions may have ended).
    pub fn with_keys<K: AsRef<[u8]>>(keys: &[K]) -> Result<TokenSigner, TokenError> {
        if keys.is_empty() || keys.len() > MAX_KEYS {
            return Err(TokenError::KeyCount(keys.len()));
        }
        let macs = keys
            .iter()
            .map(|k| mac_for(k.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TokenSigner {
            macs,
            max_age: None,
            id: NEXT_SIGNER_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Tokens issued `max_age` or longer ago are refused, however recently
    /// refreshed.
    pub fn with_max_age(mut self, max_age: Nanos) -> TokenSigner {
        self.max_age = Some(max_age);
        self
    }

    pub fn max_age(&self) -> Option<Nanos> {
        self.max_age
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

    /// The token of a verified session, refreshed at `now`: `issued` kept,
    /// `expires = now + lifetime`.
    pub fn refresh(&self, token: &SessionToken, now: Nanos, lifetime: Nanos) -> String {
        self.encode(&SessionToken {
            session_id: token.session_id,
            issued: token.issued,
            expires: now.saturating_add(lifetime),
        })
    }

    /// Encodes and signs `token` with the first key.
    pub fn encode(&self, token: &SessionToken) -> String {
        let mut bytes = [0u8; PAYLOAD_LEN + TAG_LEN];
        bytes[0] = VERSION;
        bytes[1..9].copy_from_slice(&token.session_id.to_be_bytes());
        bytes[9..17].copy_from_slice(&token.issued.0.to_be_bytes());
        bytes[17..25].copy_from_slice(&token.expires.0.to_be_bytes());
        let mut mac = self.macs[0].clone();
        mac.update(&bytes[..PAYLOAD_LEN]);
        bytes[PAYLOAD_LEN..].copy_from_slice(&mac.finalize().into_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The token's contents if one of our keys signed it, it is intact, not
    /// expired at `now`, not issued in the future and not past the maximum
    /// session age.
    pub fn verify(&self, token: &str, now: Nanos) -> Result<SessionToken, TokenError> {
        self.verify_signer(token, now).map(|(valid, _)| valid)
    }

    /// As [`TokenSigner::verify`], and whether the key that signed it is
    /// the one that signs now (the first): a token signed by an older key
    /// is re-signed at once, so that a rotation completes.
    pub fn verify_signer(
        &self,
        token: &str,
        now: Nanos,
    ) -> Result<(SessionToken, bool), TokenError> {
        let (parsed, by_signing_key) = self.authenticate(token)?;
        self.check_times(&parsed, now)?;
        Ok((parsed, by_signing_key))
    }

    /// As [`TokenSigner::verify_signer`], remembering in `memo` the last
    /// token that authenticated: when `token` is the same text (compared
    /// in constant time) and this signer's keys signed it, its signature
    /// is not checked again. The time rules (expiry, issue time, maximum
    /// age) are checked on every call.
    pub fn verify_remembered(
        &self,
        token: &str,
        now: Nanos,
        memo: &mut TokenMemo,
    ) -> Result<(SessionToken, bool), TokenError> {
        let (parsed, by_signing_key) = match memo.recall(self.id, token) {
            Some(remembered) => remembered,
            None => {
                let authenticated = self.authenticate(token)?;
                memo.remember(self.id, token, authenticated);
                authenticated
            }
        };
        self.check_times(&parsed, now)?;
        Ok((parsed, by_signing_key))
    }

    /// The token's contents if it decodes and one of our keys signed it,
    /// and whether that key is the first; no time rule is checked.
    fn authenticate(&self, token: &str) -> Result<(SessionToken, bool), TokenError> {
        // Anything but the exact length is refused before decoding.
        if token.len() != ENCODED_LEN {
            return Err(TokenError::Malformed);
        }
        // Decoded into a buffer of the exact size: no allocation.
        let mut bytes = [0u8; PAYLOAD_LEN + TAG_LEN];
        match URL_SAFE_NO_PAD.decode_slice(token.as_bytes(), &mut bytes) {
            Ok(len) if len == bytes.len() && bytes[0] == VERSION => {}
            _ => return Err(TokenError::Malformed),
        }
        let Some(signer) = self.macs.iter().position(|mac| {
            let mut mac = mac.clone();
            mac.update(&bytes[..PAYLOAD_LEN]);
            mac.verify_slice(&bytes[PAYLOAD_LEN..]).is_ok()
        }) else {
            return Err(TokenError::BadSignature);
        };
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
        Ok((parsed, signer == 0))
    }

    /// The time rules of an authentic token at `now`: not expired, not
    /// issued in the future, not past the maximum session age.
    fn check_times(&self, parsed: &SessionToken, now: Nanos) -> Result<(), TokenError> {
        if now >= parsed.expires {
            return Err(TokenError::Expired {
                expired: parsed.expires,
            });
        }
        if parsed.issued > now.saturating_add(MAX_CLOCK_SKEW) {
            return Err(TokenError::IssuedInFuture {
                issued: parsed.issued,
            });
        }
        if let Some(max_age) = self.max_age {
            if parsed.issued.saturating_add(max_age) <= now {
                return Err(TokenError::TooOld {
                    issued: parsed.issued,
                });
            }
        }
        Ok(())
    }
}

/// The last token that authenticated on one connection, so that a client
/// presenting the same token again (as it does until the gate refreshes
/// it) costs a constant-time comparison instead of an HMAC.
///
/// It remembers the text and what it said, and which signer's keys
/// authenticated it: a signer with other keys (a rotation, a reload) never
/// recalls it. It is a cache of the signature check only; what the token
/// says is checked against the clock each time.
#[derive(Clone, Debug, Default)]
pub struct TokenMemo {
    remembered: Option<Remembered>,
}

#[derive(Clone, Debug)]
struct Remembered {
    signer_id: u64,
    text: [u8; ENCODED_LEN],
    token: SessionToken,
    by_signing_key: bool,
}

impl TokenMemo {
    pub fn new() -> TokenMemo {
        TokenMemo::default()
    }

    fn recall(&self, signer_id: u64, token: &str) -> Option<(SessionToken, bool)> {
        let remembered = self.remembered.as_ref()?;
        if remembered.signer_id != signer_id || token.len() != ENCODED_LEN {
            return None;
        }
        // Constant time: a connection may carry several clients' requests
        // (an intermediary's), and the time a comparison takes must not
        // tell one of them how much of another's token it guessed.
        same_text(&remembered.text, token.as_bytes())
            .then_some((remembered.token, remembered.by_signing_key))
    }

    fn remember(&mut self, signer_id: u64, token: &str, authenticated: (SessionToken, bool)) {
        let mut text = [0u8; ENCODED_LEN];
        // `authenticate` accepted only tokens of exactly this length.
        if token.len() != ENCODED_LEN {
            return;
        }
        text.copy_from_slice(token.as_bytes());
        self.remembered = Some(Remembered {
            signer_id,
            text,
            token: authenticated.0,
            by_signing_key: authenticated.1,
        });
    }
}

/// Whether `b` is `a`, in time independent of where they differ: eight
/// bytes at a time, differences gathered without a branch on them.
fn same_text(a: &[u8; ENCODED_LEN], b: &[u8]) -> bool {
    if b.len() != ENCODED_LEN {
        return false;
    }
    let mut difference = 0u64;
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        let word = |c: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_ne_bytes(w)
        };
        difference |= word(x) ^ word(y);
    }
    for (x, y) in a[ENCODED_LEN / 8 * 8..]
        .iter()
        .zip(&b[ENCODED_LEN / 8 * 8..])
    {
        difference |= u64::from(x ^ y);
    }
    std::hint::black_box(difference) == 0
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
    fn refresh_keeps_issued_and_max_age_ends_the_session() {
        let s = TokenSigner::new(KEY)
            .unwrap()
            .with_max_age(Nanos::from_secs(100));
        let t = s.issue(9, Nanos::from_secs(10), Nanos::from_secs(30));
        // Refreshed every 20 s: `issued` never moves.
        let mut token = t;
        for at in (30..110).step_by(20) {
            let v = s.verify(&token, Nanos::from_secs(at)).unwrap();
            assert_eq!(v.issued, Nanos::from_secs(10));
            token = s.refresh(&v, Nanos::from_secs(at), Nanos::from_secs(30));
        }
        // Still before expiry (90 + 30), but issued 100 s ago: over age.
        assert_eq!(
            s.verify(&token, Nanos::from_secs(110)),
            Err(TokenError::TooOld {
                issued: Nanos::from_secs(10)
            })
        );
        assert!(s.verify(&token, Nanos::from_secs(109)).is_ok());
        // Without a maximum age the same token is still valid.
        assert!(TokenSigner::new(KEY)
            .unwrap()
            .verify(&token, Nanos::from_secs(110))
            .is_ok());
    }

    #[test]
    fn a_token_from_the_future_is_refused() {
        let s = TokenSigner::new(KEY).unwrap();
        let now = Nanos::from_secs(1000);
        let ahead = s.issue(1, now + MAX_CLOCK_SKEW, Nanos::from_secs(30));
        assert!(s.verify(&ahead, now).is_ok(), "within the skew");
        let future = s.issue(1, now + MAX_CLOCK_SKEW + Nanos(1), Nanos::from_secs(30));
        assert!(matches!(
            s.verify(&future, now),
            Err(TokenError::IssuedInFuture { .. })
        ));
    }

    #[test]
    fn rotation_first_key_signs_all_verify() {
        const NEW: &[u8] = b"the new key, also thirty-two B!!";
        let old = TokenSigner::new(KEY).unwrap();
        let now = Nanos::from_secs(1);
        let by_old = old.issue(1, now, Nanos::from_secs(60));
        let rotated = TokenSigner::with_keys(&[NEW, KEY]).unwrap();
        // Old tokens still verify; new ones are signed with the new key.
        assert_eq!(rotated.verify(&by_old, now).unwrap().session_id, 1);
        let by_new = rotated.issue(2, now, Nanos::from_secs(60));
        assert_eq!(old.verify(&by_new, now), Err(TokenError::BadSignature));
        assert!(TokenSigner::new(NEW).unwrap().verify(&by_new, now).is_ok());
        // The old key retired: its tokens are refused.
        let retired = TokenSigner::with_keys(&[NEW]).unwrap();
        assert_eq!(retired.verify(&by_old, now), Err(TokenError::BadSignature));
        assert!(retired.verify(&by_new, now).is_ok());
        let none: [&[u8]; 0] = [];
        assert_eq!(
            TokenSigner::with_keys(&none).unwrap_err(),
            TokenError::KeyCount(0)
        );
        assert_eq!(
            TokenSigner::with_keys(&[NEW, b"short"]).unwrap_err(),
            TokenError::ShortKey(5)
        );
    }

    #[test]
    fn a_remembered_token_still_obeys_every_rule() {
        const NEW: &[u8] = b"the new key, also thirty-two B!!";
        let s = TokenSigner::new(KEY)
            .unwrap()
            .with_max_age(Nanos::from_secs(100));
        let mut memo = TokenMemo::new();
        let t = s.issue(3, Nanos::from_secs(10), Nanos::from_secs(30));
        let first = s.verify_remembered(&t, Nanos::from_secs(11), &mut memo);
        assert_eq!(first, s.verify_signer(&t, Nanos::from_secs(11)));
        // Remembered: recalled without a signature check, same answer.
        assert_eq!(
            memo.recall(s.id, &t),
            Some((first.clone().unwrap().0, true))
        );
        assert_eq!(
            s.verify_remembered(&t, Nanos::from_secs(12), &mut memo),
            first
        );
        // A one-character change is not recalled, and fails its signature.
        let mut tampered = t.clone().into_bytes();
        tampered[40] = if tampered[40] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(memo.recall(s.id, &tampered), None);
        assert_eq!(
            s.verify_remembered(&tampered, Nanos::from_secs(12), &mut memo),
            Err(TokenError::BadSignature)
        );
        // The failure did not displace it; time rules are checked anew.
        assert!(memo.recall(s.id, &t).is_some());
        assert_eq!(
            s.verify_remembered(&t, Nanos::from_secs(40), &mut memo),
            Err(TokenError::Expired {
                expired: Nanos::from_secs(40)
            })
        );
        let aged = TokenSigner::new(KEY)
            .unwrap()
            .with_max_age(Nanos::from_secs(20));
        // Another signer (other id) never recalls it, even with the same key.
        assert_eq!(memo.recall(aged.id, &t), None);
        assert_eq!(
            aged.verify_remembered(&t, Nanos::from_secs(30), &mut memo),
            Err(TokenError::TooOld {
                issued: Nanos::from_secs(10)
            })
        );
        // Rotated out: the keys that signed it are gone, so is the memo's use.
        let retired = TokenSigner::new(NEW).unwrap();
        let mut memo = TokenMemo::new();
        s.verify_remembered(&t, Nanos::from_secs(11), &mut memo)
            .unwrap();
        assert_eq!(
            retired.verify_remembered(&t, Nanos::from_secs(11), &mut memo),
            Err(TokenError::BadSignature)
        );
        // Rotated, old key kept: it verifies, as signed by an older key.
        let rotated = TokenSigner::with_keys(&[NEW, KEY]).unwrap();
        assert_eq!(
            rotated
                .verify_remembered(&t, Nanos::from_secs(11), &mut memo)
                .map(|(_, by_signing_key)| by_signing_key),
            Ok(false)
        );
        // A clone has the same keys and recalls it.
        assert!(memo.recall(rotated.clone().id, &t).is_some());
    }

    #[test]
    fn same_text_sees_every_byte() {
        let a = [b'x'; ENCODED_LEN];
        assert!(same_text(&a, &a));
        for i in 0..ENCODED_LEN {
            let mut b = a;
            b[i] = b'y';
            assert!(!same_text(&a, &b), "byte {i}");
        }
        assert!(!same_text(&a, &a[1..]));
    }

    #[test]
    fn short_keys_are_refused() {
        assert_eq!(
            TokenSigner::new(b"short").unwrap_err(),
            TokenError::ShortKey(5)
        );
    }
}
