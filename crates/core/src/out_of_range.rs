//! The one error of a mechanism's own parameter checks (filters, session
//! controllers, MWM, …): which parameter, what it must be, what it was.

/// A parameter outside what a mechanism accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{parameter} must be {expected}, got {value}")]
pub struct OutOfRange {
    pub parameter: &'static str,
    pub expected: &'static str,
    pub value: String,
}

impl OutOfRange {
    /// `Ok(())` when `ok`, else the error for `parameter`.
    pub fn check(
        ok: bool,
        parameter: &'static str,
        expected: &'static str,
        value: impl std::fmt::Display,
    ) -> Result<(), OutOfRange> {
        if ok {
            Ok(())
        } else {
            Err(OutOfRange {
                parameter,
                expected,
                value: value.to_string(),
            })
        }
    }
}
