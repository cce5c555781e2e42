//! The FTPS client's TLS session store. Every data connection resumes the
//! control connection's session (servers such as vsftpd, and ours, refuse
//! one that does not), and TLS 1.3 tickets are spent one per resumption.
//! rustls' in-memory store keeps at most 8 tickets per server, and the
//! data connection of an upload brings none (a server that sent some
//! would have them arrive unread at a client that only writes, whose close
//! then resets the connection), so a session of nine uploads ran dry and
//! the ninth was refused. This store keeps up to [`PER_SERVER`] tickets
//! and tells how many are left, so that the client can refresh its supply
//! (a listing's data connection brings new tickets) before it runs out.
//!
//! Each ticket is still handed out once, as rustls requires.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use rustls::NamedGroup;
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;

/// Tickets kept per server (the oldest is dropped beyond).
pub(crate) const PER_SERVER: usize = 64;
/// Servers remembered (the store is per client, which talks to few).
const SERVERS: usize = 16;

#[derive(Default)]
struct Server {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    tickets: VecDeque<Tls13ClientSessionValue>,
}

/// A client's session store (see the module's documentation).
#[derive(Default)]
pub(crate) struct TicketStore {
    servers: Mutex<HashMap<ServerName<'static>, Server>>,
}

impl std::fmt::Debug for TicketStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketStore")
    }
}

impl TicketStore {
    fn with<T>(&self, name: &ServerName<'_>, f: impl FnOnce(&mut Server) -> T) -> T {
        let mut m = self.servers.lock().unwrap_or_else(|e| e.into_inner());
        if !m.contains_key(name) && m.len() >= SERVERS {
            m.clear(); // rare: a client of many servers starts afresh
        }
        f(m.entry(name.to_owned()).or_default())
    }

    /// TLS 1.3 tickets held for `name`.
    pub(crate) fn count(&self, name: &ServerName<'static>) -> usize {
        self.with(name, |s| s.tickets.len())
    }
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.with(&name, |s| s.kx_hint = Some(group));
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.with(name, |s| s.kx_hint)
    }
    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.with(&name, |s| s.tls12 = Some(value));
    }
    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.with(name, |s| s.tls12.clone())
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.with(name, |s| s.tls12 = None);
    }
    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.with(&name, |s| {
            if s.tickets.len() >= PER_SERVER {
                s.tickets.pop_front();
            }
            s.tickets.push_back(value);
        });
    }
    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        // The newest first, as rustls' own store does.
        self.with(name, |s| s.tickets.pop_back())
    }
}
