//! Context states and their transitions (digest §5.1, §5.7).
//!
//! ```text
//!                 close_write                    peer_finished
//!   ACTIVE ─────────────────────▶ LOCAL_DONE ───────────────────┐
//!     │                                                          ▼
//!     │ peer_finished            close_write                  CLOSING ── all_acked ─▶ INACTIVE ── linger_expired ─▶ QUIESCENT
//!     └──────────────▶ PEER_DONE ───────────────────────────────▲ (END sent)
//!
//!   any live state ── end_received | abort | retry_limit ──▶ INACTIVE
//! ```
//!
//! * ACTIVE: data may flow both ways.
//! * LOCAL_DONE: we closed our writing side (WCLOSE rides on our packets once
//!   all data has left); the peer may still send.
//! * PEER_DONE: the peer's data is complete up to its WCLOSE (we answer with
//!   RCLOSE); we may still send.
//! * CLOSING: both writing sides closed; waiting for our data to be acknowledged.
//! * INACTIVE: END sent or received, or aborted; the slot lingers (CTIMEOUT) so
//!   late packets are recognised — and answered with END — not misrouted.
//! * QUIESCENT: the slot is free. (LISTENING is not a context state here:
//!   listeners live in the endpoint's passive map.)
//!
//! The graceful sequence is the digest's proposal (G17): whichever side is in
//! CLOSING with everything acknowledged sends END (with WCLOSE and RCLOSE) and
//! goes INACTIVE; the other side goes INACTIVE on receiving it. A lost END is
//! recovered because an INACTIVE context answers any status request with END.

use core::fmt;

/// States of a context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Data may flow both ways.
    Active,
    /// Our writing side is closed.
    LocalDone,
    /// The peer's writing side is closed and its data complete.
    PeerDone,
    /// Both writing sides closed; waiting for acknowledgement.
    Closing,
    /// Ended; lingering.
    Inactive,
    /// Free.
    Quiescent,
}

/// Inputs that move a context between states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// The application closed its writing side.
    CloseWrite,
    /// All the peer's data up to its WCLOSE has arrived.
    PeerFinished,
    /// Everything we wrote (and our WCLOSE) is acknowledged while CLOSING.
    AllAcked,
    /// A packet with END arrived.
    EndReceived,
    /// The application aborted.
    Abort,
    /// WTIMER expired more often than allowed.
    RetryLimit,
    /// CTIMEOUT of an INACTIVE context expired.
    LingerExpired,
}

impl Input {
    /// What the context does when this input moves it.
    pub fn action(self) -> &'static str {
        match self {
            Input::CloseWrite => "WCLOSE on the packet that ends our data (or a CNTL with WCLOSE and SREQ)",
            Input::PeerFinished => "RCLOSE on our packets; `PeerFinished` event",
            Input::AllAcked => "send CNTL with END, WCLOSE, RCLOSE; `Closed(Graceful)`; arm CTIMEOUT",
            Input::EndReceived => {
                "no reply; `Closed` (graceful if both directions are complete); arm CTIMEOUT"
            }
            Input::Abort => "send DIAG code 2 with END; `Closed(LocalAbort)`; arm CTIMEOUT",
            Input::RetryLimit => "send DIAG code 2 with END; `Closed(Timeout { acked })`; arm CTIMEOUT",
            Input::LingerExpired => "free the slot (its key goes stale)",
        }
    }
}

impl State {
    /// Every state, in table order.
    pub const ALL: [State; 6] =
        [State::Active, State::LocalDone, State::PeerDone, State::Closing, State::Inactive, State::Quiescent];

    /// The state after `input`, or `None` if the input changes nothing here.
    pub fn on(self, input: Input) -> Option<State> {
        use Input::*;
        use State::*;
        Some(match (self, input) {
            (Active, CloseWrite) => LocalDone,
            (Active, PeerFinished) => PeerDone,
            (LocalDone, PeerFinished) | (PeerDone, CloseWrite) => Closing,
            (Closing, AllAcked) => Inactive,
            (Active | LocalDone | PeerDone | Closing, EndReceived | Abort | RetryLimit) => Inactive,
            (Inactive, LingerExpired) => Quiescent,
            _ => return None,
        })
    }

    /// Whether the context still exchanges data.
    pub fn is_live(self) -> bool {
        matches!(self, State::Active | State::LocalDone | State::PeerDone | State::Closing)
    }

    /// Whether our writing side is closed.
    pub fn is_write_closed(self) -> bool {
        matches!(self, State::LocalDone | State::Closing)
    }

    /// The transition table in Markdown (the snapshot in docs/PROTOCOL.md).
    pub fn table_markdown() -> String {
        let inputs = [
            Input::CloseWrite,
            Input::PeerFinished,
            Input::AllAcked,
            Input::EndReceived,
            Input::Abort,
            Input::RetryLimit,
            Input::LingerExpired,
        ];
        let mut s = String::from("| state |");
        for i in inputs {
            s.push_str(&format!(" {i:?} |"));
        }
        s.push_str("\n|---|");
        for _ in inputs {
            s.push_str("---|");
        }
        s.push('\n');
        for st in State::ALL {
            s.push_str(&format!("| **{st}** |"));
            for i in inputs {
                match st.on(i) {
                    Some(to) => s.push_str(&format!(" → {to} |")),
                    None => s.push_str(" · |"),
                }
            }
            s.push('\n');
        }
        s.push_str("\n| input | action |\n|---|---|\n");
        for i in inputs {
            s.push_str(&format!("| {i:?} | {} |\n", i.action()));
        }
        s
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Active => "ACTIVE",
            State::LocalDone => "LOCAL_DONE",
            State::PeerDone => "PEER_DONE",
            State::Closing => "CLOSING",
            State::Inactive => "INACTIVE",
            State::Quiescent => "QUIESCENT",
        })
    }
}
