//! A session gate: a controller and signed tokens together, per request.
//!
//! Section 7 and footnote 3: only a request without a valid session cookie
//! is a *new session*, and only new sessions are subject to admission; the
//! cookie's expiry ends a session idle for T. Here the cookie is a
//! [`TokenSigner`] token, refreshed as the session goes on (its issue time
//! kept, so the signer's maximum session age bounds a session however
//! active), so a forged, tampered, expired, over-age or rotated-out token is
//! simply a new session that must pass admission.
//!
//! Departures: the paper's cookie is unsigned; signing it is what keeps a
//! client from bypassing admission by claiming a session. The paper's
//! cookie expires T after the session's last request; here a token is
//! re-issued only once [`REFRESH_AFTER_FRACTION`] of T (T/16) has passed
//! since it was issued, or at once when an older key signed it, so a
//! session in progress pays one signature and one `Set-Cookie` per T/16
//! rather than per request. A session therefore ends after being idle for
//! between 15T/16 and T. A driver may keep a [`TokenMemo`] per connection
//! ([`SessionGate::on_request_remembering`]): between refreshes a client
//! presents the same token, whose signature then is not checked again.

use super::token::{TokenError, TokenMemo, TokenSigner};
use super::SessionAdmission;
use crate::Nanos;

/// A token is re-issued once more than `T / REFRESH_AFTER_FRACTION` has
/// passed since it was last issued.
pub const REFRESH_AFTER_FRACTION: u64 = 16;

/// What to do with one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateVerdict {
    /// A request of an admitted session (begun at `issued`): serve it, and
    /// set `token` when there is one (the client's token is re-issued only
    /// once T/16 has passed, or when an older key signed it).
    Continue {
        session_id: u64,
        issued: Nanos,
        token: Option<String>,
    },
    /// A new session, admitted: serve it and set `token`. `presented` says
    /// why a token the client sent did not count.
    Admitted {
        session_id: u64,
        token: String,
        presented: Option<TokenError>,
    },
    /// A new session, rejected: send the explicit rejection message.
    Rejected { presented: Option<TokenError> },
}

/// An admission controller behind session tokens.
#[derive(Debug)]
pub struct SessionGate<C> {
    controller: C,
    signer: TokenSigner,
    idle_timeout: Nanos,
    next_session_id: u64,
}

impl<C: SessionAdmission> SessionGate<C> {
    /// Sessions idle for `idle_timeout` (T) end; session ids start at
    /// `first_session_id` (a live driver picks a random one).
    pub fn new(
        controller: C,
        signer: TokenSigner,
        idle_timeout: Nanos,
        first_session_id: u64,
    ) -> SessionGate<C> {
        SessionGate {
            controller,
            signer,
            idle_timeout,
            next_session_id: first_session_id,
        }
    }

    pub fn controller(&self) -> &C {
        &self.controller
    }

    pub fn controller_mut(&mut self) -> &mut C {
        &mut self.controller
    }

    pub fn signer(&self) -> &TokenSigner {
        &self.signer
    }

    /// Replaces the keys (rotation) and maximum age; sessions in progress
    /// continue if one of the new keys signed their token.
    pub fn set_signer(&mut self, signer: TokenSigner) {
        self.signer = signer;
    }

    /// T, the idle time that ends a session.
    pub fn idle_timeout(&self) -> Nanos {
        self.idle_timeout
    }

    /// A request arrives at `now`, carrying the client's token if any.
    pub fn on_request(&mut self, now: Nanos, token: Option<&str>) -> GateVerdict {
        self.on_request_remembering(now, token, &mut TokenMemo::new())
    }

    /// As [`SessionGate::on_request`], with `memo` holding the last token
    /// that authenticated on the same connection: the same token again is
    /// not authenticated again ([`TokenSigner::verify_remembered`]), its
    /// time rules are.
    pub fn on_request_remembering(
        &mut self,
        now: Nanos,
        token: Option<&str>,
        memo: &mut TokenMemo,
    ) -> GateVerdict {
        let presented = match token.map(|t| self.signer.verify_remembered(t, now, memo)) {
            Some(Ok((valid, by_signing_key))) => {
                // `expires` was set to `issued_at + T` at the last refresh.
                let refresh_every = Nanos(self.idle_timeout.0 / REFRESH_AFTER_FRACTION);
                let fresh_until = valid
                    .expires
                    .saturating_sub(self.idle_timeout.saturating_sub(refresh_every));
                let token = (!by_signing_key || now > fresh_until)
                    .then(|| self.signer.refresh(&valid, now, self.idle_timeout));
                return GateVerdict::Continue {
                    session_id: valid.session_id,
                    issued: valid.issued,
                    token,
                };
            }
            Some(Err(why)) => Some(why),
            None => None,
        };
        if !self.controller.admit_new_session(now) {
            return GateVerdict::Rejected { presented };
        }
        let session_id = self.next_session_id;
        self.next_session_id = self.next_session_id.wrapping_add(1);
        GateVerdict::Admitted {
            session_id,
            token: self.signer.issue(session_id, now, self.idle_timeout),
            presented,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EwmaConfig, EwmaController, IntervalMeasurement};
    use super::*;

    fn gate() -> SessionGate<EwmaController> {
        SessionGate::new(
            EwmaController::new(EwmaConfig::responsive()).unwrap(),
            TokenSigner::new(b"0123456789abcdef0123456789abcdef").unwrap(),
            Nanos::from_secs(30),
            1,
        )
    }

    fn overload(g: &mut SessionGate<EwmaController>, at: Nanos) {
        g.controller_mut().on_interval(
            at,
            &IntervalMeasurement {
                elapsed: Nanos::from_secs(1),
                busy: Nanos::from_secs(1),
                ..Default::default()
            },
        );
    }

    #[test]
    fn sessions_in_progress_pass_while_new_ones_are_rejected() {
        let mut g = gate();
        let GateVerdict::Admitted { token, .. } = g.on_request(Nanos::ZERO, None) else {
            panic!("an idle server admits");
        };
        overload(&mut g, Nanos::from_secs(1));
        let verdict = g.on_request(Nanos::from_secs(2), Some(&token));
        let GateVerdict::Continue {
            session_id,
            token: Some(token),
            ..
        } = verdict
        else {
            panic!("a session in progress continues, re-issued after T/16: {verdict:?}");
        };
        assert_eq!(session_id, 1);
        // A new client is rejected while overloaded.
        assert_eq!(
            g.on_request(Nanos::from_secs(2), None),
            GateVerdict::Rejected { presented: None }
        );
        // The refreshed token keeps the session alive past the first one's
        // expiry (30 s after t = 0).
        assert!(matches!(
            g.on_request(Nanos::from_secs(31), Some(&token)),
            GateVerdict::Continue { session_id: 1, .. }
        ));
    }

    #[test]
    fn over_age_and_rotated_out_tokens_are_new_sessions() {
        const NEW: &[u8] = b"the new key, also thirty-two B!!";
        let old_key: &[u8] = b"0123456789abcdef0123456789abcdef";
        let mut g = gate();
        g.set_signer(
            TokenSigner::new(old_key)
                .unwrap()
                .with_max_age(Nanos::from_secs(50)),
        );
        let GateVerdict::Admitted { mut token, .. } = g.on_request(Nanos::ZERO, None) else {
            panic!("an idle server admits");
        };
        // Refreshed every 20 s, the session keeps its issue time ...
        for at in [20, 40] {
            match g.on_request(Nanos::from_secs(at), Some(&token)) {
                GateVerdict::Continue {
                    session_id: 1,
                    issued,
                    token: Some(next),
                } => {
                    assert_eq!(issued, Nanos::ZERO);
                    token = next;
                }
                other => panic!("expected the session to continue, got {other:?}"),
            }
        }
        // ... so at 50 s it is over age: a new session, with a new id.
        match g.on_request(Nanos::from_secs(50), Some(&token)) {
            GateVerdict::Admitted {
                session_id,
                presented,
                ..
            } => {
                assert_eq!(session_id, 2);
                assert_eq!(
                    presented,
                    Some(TokenError::TooOld {
                        issued: Nanos::ZERO
                    })
                );
            }
            other => panic!("expected a new session, got {other:?}"),
        }
        // Rotation: new key first, old kept — old tokens continue.
        let GateVerdict::Admitted { token: old, .. } = g.on_request(Nanos::from_secs(51), None)
        else {
            panic!("admits");
        };
        g.set_signer(TokenSigner::with_keys(&[NEW, old_key]).unwrap());
        assert!(matches!(
            g.on_request(Nanos::from_secs(52), Some(&old)),
            GateVerdict::Continue { session_id: 3, .. }
        ));
        // Old key retired: the same token, replayed, is a new session,
        // rejected under overload.
        g.set_signer(TokenSigner::new(NEW).unwrap());
        overload(&mut g, Nanos::from_secs(53));
        assert_eq!(
            g.on_request(Nanos::from_secs(54), Some(&old)),
            GateVerdict::Rejected {
                presented: Some(TokenError::BadSignature)
            }
        );
    }

    #[test]
    fn forged_or_expired_tokens_are_new_sessions() {
        let mut g = gate();
        let GateVerdict::Admitted { token, .. } = g.on_request(Nanos::ZERO, None) else {
            panic!("an idle server admits");
        };
        let forger = TokenSigner::new(b"not the server's key, but long!!").unwrap();
        let forged = forger.issue(1, Nanos::ZERO, Nanos::from_secs(3600));
        overload(&mut g, Nanos::from_secs(1));
        // Under overload, a forged token does not get through.
        assert_eq!(
            g.on_request(Nanos::from_secs(2), Some(&forged)),
            GateVerdict::Rejected {
                presented: Some(TokenError::BadSignature)
            }
        );
        // The genuine token, replayed after the idle timeout: expired, so it
        // is a new session, rejected under overload.
        assert_eq!(
            g.on_request(Nanos::from_secs(30), Some(&token)),
            GateVerdict::Rejected {
                presented: Some(TokenError::Expired {
                    expired: Nanos::from_secs(30)
                })
            }
        );
        // Once the load falls, the same replay is admitted as a *new*
        // session with a new id, never as the old one.
        g.controller_mut().on_interval(
            Nanos::from_secs(31),
            &IntervalMeasurement {
                elapsed: Nanos::from_secs(1),
                busy: Nanos::from_millis(100),
                ..Default::default()
            },
        );
        match g.on_request(Nanos::from_secs(32), Some(&token)) {
            GateVerdict::Admitted {
                session_id,
                presented,
                ..
            } => {
                assert_eq!(session_id, 2);
                assert!(matches!(presented, Some(TokenError::Expired { .. })));
            }
            other => panic!("expected a new session, got {other:?}"),
        }
    }

    #[test]
    fn a_token_is_re_issued_only_after_a_sixteenth_of_t() {
        // T = 32 s: re-issued once more than 2 s have passed since issue.
        let mut g = SessionGate::new(
            EwmaController::new(EwmaConfig::responsive()).unwrap(),
            TokenSigner::new(b"0123456789abcdef0123456789abcdef").unwrap(),
            Nanos::from_secs(32),
            1,
        );
        let GateVerdict::Admitted { token, .. } = g.on_request(Nanos::ZERO, None) else {
            panic!("an idle server admits");
        };
        for at in [Nanos::from_millis(1), Nanos::from_secs(2)] {
            assert_eq!(
                g.on_request(at, Some(&token)),
                GateVerdict::Continue {
                    session_id: 1,
                    issued: Nanos::ZERO,
                    token: None
                },
                "at {at}"
            );
        }
        let GateVerdict::Continue {
            token: Some(next), ..
        } = g.on_request(Nanos::from_millis(2_001), Some(&token))
        else {
            panic!("re-issued after T/16");
        };
        // The new token expires T after its issue, the old one T after t = 0.
        let signer = g.signer();
        assert_eq!(
            signer.verify(&next, Nanos::from_secs(33)).unwrap().expires,
            Nanos::from_millis(34_001)
        );
        assert!(signer.verify(&token, Nanos::from_secs(32)).is_err());
        // A session whose last request (at 2 s) got no new token ends 30 s
        // after it: idle for 15T/16, the least this gate allows.
        assert!(signer.verify(&token, Nanos::from_millis(31_999)).is_ok());
    }

    #[test]
    fn the_refresh_rule_holds_with_a_connection_memo() {
        // T = 32 s, refreshed after T/16 = 2 s; one connection's memo kept
        // throughout, as the live proxy keeps it.
        let mut g = SessionGate::new(
            EwmaController::new(EwmaConfig::responsive()).unwrap(),
            TokenSigner::new(b"0123456789abcdef0123456789abcdef").unwrap(),
            Nanos::from_secs(32),
            1,
        );
        let mut memo = TokenMemo::new();
        let GateVerdict::Admitted { token, .. } =
            g.on_request_remembering(Nanos::ZERO, None, &mut memo)
        else {
            panic!("an idle server admits");
        };
        // Within the refresh window: no new token, however often.
        for ms in [1, 500, 1_999, 2_000] {
            assert_eq!(
                g.on_request_remembering(Nanos::from_millis(ms), Some(&token), &mut memo),
                GateVerdict::Continue {
                    session_id: 1,
                    issued: Nanos::ZERO,
                    token: None
                },
                "at {ms} ms"
            );
        }
        // After it: a new token, expiring T after now.
        let GateVerdict::Continue {
            token: Some(next), ..
        } = g.on_request_remembering(Nanos::from_millis(2_001), Some(&token), &mut memo)
        else {
            panic!("re-issued after T/16");
        };
        assert_eq!(
            g.signer().verify(&next, Nanos::ZERO).unwrap().expires,
            Nanos::from_millis(34_001)
        );
        // The client kept the old token and went idle: 30 s after its last
        // refresh-free request it is past T since the token was issued, so
        // the remembered token does not keep it alive: a new session.
        match g.on_request_remembering(Nanos::from_secs(32), Some(&token), &mut memo) {
            GateVerdict::Admitted {
                session_id,
                presented,
                ..
            } => {
                assert_eq!(session_id, 2);
                assert_eq!(
                    presented,
                    Some(TokenError::Expired {
                        expired: Nanos::from_secs(32)
                    })
                );
            }
            other => panic!("idle past T must be a new session, got {other:?}"),
        }
        // The refreshed one, idle for T after its issue, ends the same way.
        assert!(matches!(
            g.on_request_remembering(Nanos::from_millis(34_001), Some(&next), &mut memo),
            GateVerdict::Admitted { session_id: 3, .. }
        ));
    }

    #[test]
    fn a_token_signed_by_an_older_key_is_re_signed_at_once() {
        const OLD: &[u8] = b"0123456789abcdef0123456789abcdef";
        const NEW: &[u8] = b"the new key, also thirty-two B!!";
        let mut g = gate();
        let GateVerdict::Admitted { token, .. } = g.on_request(Nanos::ZERO, None) else {
            panic!("an idle server admits");
        };
        g.set_signer(TokenSigner::with_keys(&[NEW, OLD]).unwrap());
        let GateVerdict::Continue {
            token: Some(next), ..
        } = g.on_request(Nanos::from_millis(1), Some(&token))
        else {
            panic!("a token of the old key is re-signed at once");
        };
        // The new token verifies with the new key alone.
        assert!(TokenSigner::new(NEW)
            .unwrap()
            .verify(&next, Nanos::from_millis(2))
            .is_ok());
        assert!(matches!(
            g.on_request(Nanos::from_millis(2), Some(&next)),
            GateVerdict::Continue { token: None, .. }
        ));
    }
}
