//! Why a context ended, as a sentence a user can act on (not a Rust value):
//! `peer aborted: no such context (DIAG 3)`.

use xtp_proto::CloseReason;
use xtp_wire::{diag_code_name, diag_value_name};

/// The sentence for `reason`; the DIAG numbers stay at the end, in
/// parentheses, for whoever reads a capture next to it.
pub fn describe(reason: &CloseReason) -> String {
    match reason {
        CloseReason::Graceful => "closed gracefully".into(),
        CloseReason::LocalAbort => "aborted here".into(),
        CloseReason::PeerAbort { code: Some(code), text, .. } => {
            let what =
                if text.is_empty() { diag_code_name(*code).unwrap_or("no reason given") } else { text };
            format!("peer aborted: {what} (DIAG {code})")
        }
        CloseReason::PeerAbort { code: None, .. } => {
            "peer aborted (it ended the context without closing)".into()
        }
        CloseReason::Timeout { acked } => format!(
            "peer unreachable: no answer within the retry limit ({} of our data acknowledged)",
            crate::format::bytes(*acked)
        ),
        // The engine's sentence names the address and the likely cause.
        CloseReason::NoAnswer { .. }
        | CloseReason::Unconfirmed { .. }
        | CloseReason::Unvalidated { .. }
        | CloseReason::SpecRefused { .. } => reason.to_string(),
        CloseReason::Refused { code, value, text } => {
            let what = if text.is_empty() {
                diag_value_name(*value).or(diag_code_name(*code)).unwrap_or("no reason given")
            } else {
                text
            };
            let hint = if *value == xtp_wire::diag_value::NO_LISTENER {
                " — is `xpress serve` running there?"
            } else {
                ""
            };
            format!("peer refused the context: {what} (DIAG {code}/{value}){hint}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborts_read_as_sentences_with_the_diag_numbers() {
        let r = CloseReason::PeerAbort { code: Some(3), value: Some(0), text: "no such context".into() };
        assert_eq!(describe(&r), "peer aborted: no such context (DIAG 3)");
        let r = CloseReason::PeerAbort { code: Some(3), value: None, text: String::new() };
        assert_eq!(describe(&r), "peer aborted: invalid context (DIAG 3)");
        let r = CloseReason::Refused { code: 1, value: 1, text: String::new() };
        assert!(
            describe(&r).starts_with("peer refused the context: no listener (DIAG 1/1)"),
            "{}",
            describe(&r)
        );
        let r = CloseReason::Timeout { acked: 2048 };
        assert!(describe(&r).contains("2.00 KiB"), "{}", describe(&r));
        assert!(!describe(&r).contains('{'));
    }
}
