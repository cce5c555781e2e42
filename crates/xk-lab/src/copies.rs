//! E9's copy count on the real XTP path (seed 000 §3: how many times is a
//! payload byte copied between the sending user and the receiving user?).
//!
//! Two endpoints on UDP drivers over loopback, one thread taking turns
//! (as E1's one-thread row). The client sends messages one way; the server
//! reads them. Every place that copies payload counts it where it copies:
//!
//! | stage | where | counter |
//! | --- | --- | --- |
//! | user write → send buffer | `Endpoint::write` takes the `Bytes` | none: no copy there |
//! | send buffer → packet data | pieces joined into one packet | `ContextStats::copied_joining` |
//! | → packet | `poll_transmit` emits the payload | `ContextStats::copied_into_packets` |
//! | packet re-laid out | the driver's `data_first` | `PathCopies::relaid` |
//! | → kernel | `sendmsg`/`sendmmsg` | `PathCopies::to_kernel` (the kernel's one copy in) |
//! | kernel → packet | `recvmsg` | `PathCopies::from_kernel` (the kernel's one copy out) |
//! | packet → receive buffer → user read | slices of the received datagram | none: no copy there |
//! | chunks → one contiguous message | the reader joins them | counted here |
//!
//! The two kernel copies are the kernel's, counted at the system call (the
//! bytes handed in and taken out), not observed inside the kernel.
//!
//! Message forms: *contiguous* (written as one `Bytes`, read into one
//! buffer) and *rope* (written as three pieces, ¼ ½ ¼, and read as the
//! chunks that arrived, uncopied).

use std::hint::black_box;
use std::time::Instant as WallInstant;

use bytes::Bytes;
use xk_driver::driver::{PathCopies, UdpDriver};
use xk_time::Duration;
use xtp_proto::{ContextConfig, ContextId, CopyCount, EndpointConfig, Event};

/// How a message is written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// One `Bytes` written; read into one contiguous buffer.
    Contiguous,
    /// Three pieces written (¼, ½, ¼); read as a list of chunks.
    Rope,
}

impl Form {
    /// Its name in rows.
    pub fn name(self) -> &'static str {
        match self {
            Form::Contiguous => "contiguous",
            Form::Rope => "rope",
        }
    }
}

/// What one (size, form) point counted: per stage, how many times each
/// payload byte was copied there; the totals per message and per packet.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Path {
    /// Message bytes.
    pub size: usize,
    /// `contiguous` or `rope`.
    pub form: String,
    /// `one way` or `ping-pong (echoed)`: an echoed message crosses twice,
    /// so its copies per byte cover the round trip.
    pub exchange: String,
    /// Messages counted (after one to open the context).
    pub messages: u64,
    /// DATA packets per message.
    pub packets_per_message: f64,
    /// Copies per payload byte: written pieces joined into one packet.
    pub join: f64,
    /// Copies per payload byte: emitted into the packet buffer.
    pub into_packet: f64,
    /// Copies per payload byte: the driver re-laying out a batch.
    pub relaid: f64,
    /// Copies per payload byte: into the kernel (`sendmsg`).
    pub to_kernel: f64,
    /// Copies per payload byte: out of the kernel (`recvmsg`).
    pub from_kernel: f64,
    /// Copies per payload byte: the reader joining chunks into one buffer.
    pub read_join: f64,
    /// Copies per payload byte, end to end (the sum of the stages).
    pub per_byte: f64,
    /// Copy operations per message, end to end.
    pub ops_per_message: f64,
    /// Copy operations per DATA packet, end to end.
    pub ops_per_packet: f64,
    /// Bytes retransmitted while counting (0 on loopback; else the counts
    /// include the retransmissions' copies).
    pub retransmitted: u64,
}

/// Raw counts of one run, per stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Written pieces joined into one packet.
    pub join: CopyCount,
    /// Payload emitted into packets.
    pub into_packet: CopyCount,
    /// The sending driver's and the receiving driver's.
    pub client: PathCopies,
    /// The receiving driver's.
    pub server: PathCopies,
    /// The reader's joins.
    pub read_join: CopyCount,
    /// Bytes retransmitted.
    pub retransmitted: u64,
}

fn since(now: PathCopies, then: PathCopies) -> PathCopies {
    PathCopies {
        relaid: now.relaid.since(then.relaid),
        to_kernel: now.to_kernel.since(then.to_kernel),
        from_kernel: now.from_kernel.since(then.from_kernel),
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The message's pieces as written.
fn pieces(msg: &Bytes, form: Form) -> Vec<Bytes> {
    match form {
        Form::Contiguous => vec![msg.clone()],
        Form::Rope => {
            let (a, b) = (msg.len() / 4, msg.len() / 4 + msg.len() / 2);
            [msg.slice(..a), msg.slice(a..b), msg.slice(b..)].into_iter().filter(|p| !p.is_empty()).collect()
        }
    }
}

/// What the server does with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// Reads it (the count is one way: the seed's "end to end").
    OneWay,
    /// Writes back the chunks it read, which the client reads (E1's
    /// ping-pong: the count covers both ways).
    Echo,
}

impl Exchange {
    /// Its name in rows.
    pub fn name(self) -> &'static str {
        match self {
            Exchange::OneWay => "one way",
            Exchange::Echo => "ping-pong (echoed)",
        }
    }
}

/// Both ends and the one context.
struct Ends {
    client: UdpDriver,
    server: UdpDriver,
    ctx: ContextId,
    server_ctx: Option<ContextId>,
}

fn in_flight(d: &mut UdpDriver, ctx: Option<ContextId>) -> bool {
    ctx.and_then(|c| d.endpoint().context_stats(c)).is_some_and(|s| s.in_flight > 0)
}

/// The chunks are `msg`, byte for byte (compared in place).
fn check(msg: &Bytes, chunks: &[Bytes], what: &str) -> Result<(), String> {
    let mut at = 0;
    for c in chunks {
        if msg.get(at..at + c.len()) != Some(&c[..]) {
            return Err(format!("E9 copies {} B {what}: data differs at {at}", msg.len()));
        }
        at += c.len();
    }
    if at != msg.len() {
        return Err(format!("E9 copies {} B {what}: {at} bytes arrived", msg.len()));
    }
    Ok(())
}

/// The reader of a contiguous message that came in several chunks copies
/// them into one buffer; a rope reader keeps the chunks.
fn read_as(chunks: &[Bytes], form: Form) -> CopyCount {
    let mut read_join = CopyCount::default();
    if form == Form::Contiguous && chunks.len() > 1 {
        let mut whole = Vec::with_capacity(chunks.iter().map(Bytes::len).sum());
        for c in chunks {
            whole.extend_from_slice(c);
        }
        read_join.add(whole.len());
        black_box(whole);
    }
    read_join
}

impl Ends {
    /// Turns both ends until every message is acknowledged both ways, then
    /// sends what each still holds: the next message is written to a quiet
    /// context. (Otherwise a status reply one end owes may leave in the
    /// same batch as the next message's data, and the driver re-lays that
    /// batch out: the copy a ping-pong's reply costs, counted in the echoed
    /// rows, not a one-way message's own.)
    fn settle(&mut self) -> Result<(), String> {
        let t = WallInstant::now();
        while in_flight(&mut self.client, Some(self.ctx)) || in_flight(&mut self.server, self.server_ctx) {
            if t.elapsed() > std::time::Duration::from_secs(5) {
                return Err("E9 copies: a message not acknowledged within 5 s".into());
            }
            self.client.turn(Duration::ZERO).map_err(err)?;
            self.server.turn(Duration::ZERO).map_err(err)?;
        }
        self.client.flush().map_err(err)?;
        self.server.flush().map_err(err)
    }

    /// Turns both drivers (client first) until the server (`at_server`) or
    /// the client has read one whole message; returns its chunks.
    fn read_one(&mut self, at_server: bool, len: usize) -> Result<Vec<Bytes>, String> {
        let mut chunks: Vec<Bytes> = Vec::new();
        let mut eom = false;
        let t0 = WallInstant::now();
        while !eom {
            if t0.elapsed() > std::time::Duration::from_secs(5) {
                return Err(format!("E9 copies {len} B: not delivered within 5 s"));
            }
            self.client.turn(Duration::ZERO).map_err(err)?;
            self.server.turn(Duration::ZERO).map_err(err)?;
            while let Some(ev) = self.server.endpoint().poll_event() {
                if let Event::Incoming { ctx, .. } = ev {
                    self.server_ctx = Some(ctx);
                }
            }
            while self.client.endpoint().poll_event().is_some() {}
            let (d, ctx) = if at_server {
                (&mut self.server, self.server_ctx)
            } else {
                (&mut self.client, Some(self.ctx))
            };
            let now = d.now();
            if let Some(ctx) = ctx {
                while let Some(c) = d.endpoint().read(now, ctx) {
                    eom = c.eom;
                    chunks.push(c.data);
                }
            }
        }
        Ok(chunks)
    }

    /// Writes `msg` in `form`, turns both drivers until it is read (and, for
    /// an echo, written back and read again), then settles; returns the
    /// readers' join copies.
    fn one(&mut self, msg: &Bytes, form: Form, exchange: Exchange) -> Result<CopyCount, String> {
        let now = self.client.now();
        let parts = pieces(msg, form);
        let last = parts.len() - 1;
        for (i, p) in parts.into_iter().enumerate() {
            self.client.endpoint().write(now, self.ctx, p, i == last, None).map_err(err)?;
        }
        let chunks = self.read_one(true, msg.len())?;
        check(msg, &chunks, form.name())?;
        let read = match (exchange, self.server_ctx) {
            (Exchange::OneWay, _) => read_as(&chunks, form),
            (Exchange::Echo, Some(sctx)) => {
                // As E1's server: each chunk written back as it was read.
                let now = self.server.now();
                let last = chunks.len() - 1;
                for (i, c) in chunks.into_iter().enumerate() {
                    self.server.endpoint().write(now, sctx, c, i == last, None).map_err(err)?;
                }
                let back = self.read_one(false, msg.len())?;
                check(msg, &back, "echo")?;
                read_as(&back, form)
            }
            (Exchange::Echo, None) => return Err("E9 copies: no server context".into()),
        };
        self.settle()?;
        Ok(read)
    }

    /// Both endpoints' copy counters and retransmissions now.
    fn engine(&mut self) -> (CopyCount, CopyCount, u64) {
        let mut out = (CopyCount::default(), CopyCount::default(), 0);
        for (d, ctx) in [(&mut self.client, Some(self.ctx)), (&mut self.server, self.server_ctx)] {
            if let Some(s) = ctx.and_then(|c| d.endpoint().context_stats(c)) {
                out.0.ops += s.copied_joining.ops;
                out.0.bytes += s.copied_joining.bytes;
                out.1.ops += s.copied_into_packets.ops;
                out.1.bytes += s.copied_into_packets.bytes;
                out.2 += s.retransmitted;
            }
        }
        out
    }
}

/// Sends `messages` messages of `size` bytes in `form` over real UDP on
/// loopback (after one that opens the context), one way or echoed, and
/// counts every payload copy on both ends. Returns the counts and the wall
/// time per message (ns).
pub fn count(size: usize, form: Form, exchange: Exchange, messages: u32) -> Result<(Counts, f64), String> {
    let mut server = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 21).map_err(err)?;
    let saddr = server.local_addr().map_err(err)?;
    server.endpoint().listen(7, ContextConfig::stream()).map_err(err)?;
    let mut client = UdpDriver::bind("127.0.0.1:0", EndpointConfig::default(), 22).map_err(err)?;
    let now = client.now();
    let ctx = client.endpoint().connect(now, saddr, 7, ContextConfig::stream()).map_err(err)?;
    let mut ends = Ends { client, server, ctx, server_ctx: None };
    let msg = Bytes::from((0..size).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>());
    // The first message rides the FIRST packet; count from the second on.
    ends.one(&msg, form, exchange)?;
    let (e0, c0, v0) = (ends.engine(), ends.client.copies(), ends.server.copies());
    let mut read_join = CopyCount::default();
    let t = WallInstant::now();
    for _ in 0..messages {
        let r = ends.one(&msg, form, exchange)?;
        read_join.ops += r.ops;
        read_join.bytes += r.bytes;
    }
    let ns = t.elapsed().as_nanos() as f64 / f64::from(messages.max(1));
    let e1 = ends.engine();
    let counts = Counts {
        join: e1.0.since(e0.0),
        into_packet: e1.1.since(e0.1),
        client: since(ends.client.copies(), c0),
        server: since(ends.server.copies(), v0),
        read_join,
        retransmitted: e1.2 - e0.2,
    };
    Ok((counts, ns))
}

impl Counts {
    /// Every copy of the path, stage by stage, in path order.
    pub fn stages(&self) -> [CopyCount; 6] {
        let c = &self.client;
        let v = &self.server;
        // Both drivers' re-layouts and kernel crossings: the client sends
        // the data and the server receives it, but count both sides so a
        // copy on the other side could not hide.
        let add = |a: CopyCount, b: CopyCount| CopyCount { ops: a.ops + b.ops, bytes: a.bytes + b.bytes };
        [
            self.join,
            self.into_packet,
            add(c.relaid, v.relaid),
            add(c.to_kernel, v.to_kernel),
            add(c.from_kernel, v.from_kernel),
            self.read_join,
        ]
    }

    /// The row of `messages` messages of `size` bytes in `form`.
    pub fn path(&self, size: usize, form: Form, exchange: Exchange, messages: u32) -> Path {
        let payload = (size as f64 * f64::from(messages)).max(1.0);
        let [join, into_packet, relaid, to_kernel, from_kernel, read_join] = self.stages();
        let per = |c: CopyCount| c.bytes as f64 / payload;
        let ops: u64 = self.stages().iter().map(|c| c.ops).sum();
        let packets = self.into_packet.ops.max(1) as f64;
        let per_byte = [join, into_packet, relaid, to_kernel, from_kernel, read_join].map(per).iter().sum();
        Path {
            size,
            form: form.name().into(),
            exchange: exchange.name().into(),
            messages: u64::from(messages),
            packets_per_message: self.into_packet.ops as f64 / f64::from(messages.max(1)),
            join: per(join),
            into_packet: per(into_packet),
            relaid: per(relaid),
            to_kernel: per(to_kernel),
            from_kernel: per(from_kernel),
            read_join: per(read_join),
            per_byte,
            ops_per_message: ops as f64 / f64::from(messages.max(1)),
            ops_per_packet: ops as f64 / packets,
            retransmitted: self.retransmitted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u32 = 5;

    /// Per message, one way: size, form, DATA packets, then (copy
    /// operations, payload bytes) at each stage — pieces joined, into the
    /// packet, re-layout, into the kernel, out of the kernel, reader's join.
    type Expect = (usize, Form, u64, [(u64, u64); 6]);
    const ONE_WAY: [Expect; 6] = [
        (10, Form::Contiguous, 1, [(0, 0), (1, 10), (0, 0), (1, 10), (1, 10), (0, 0)]),
        (10, Form::Rope, 1, [(1, 10), (1, 10), (0, 0), (1, 10), (1, 10), (0, 0)]),
        (1000, Form::Contiguous, 1, [(0, 0), (1, 1000), (0, 0), (1, 1000), (1, 1000), (0, 0)]),
        (1000, Form::Rope, 1, [(1, 1000), (1, 1000), (0, 0), (1, 1000), (1, 1000), (0, 0)]),
        (10_000, Form::Contiguous, 8, [(0, 0), (8, 10_000), (0, 0), (8, 10_000), (8, 10_000), (1, 10_000)]),
        (10_000, Form::Rope, 8, [(2, 2_800), (8, 10_000), (0, 0), (8, 10_000), (8, 10_000), (0, 0)]),
    ];

    /// Runs one point and checks what holds for every exchange: no
    /// retransmission, every message copied alike, and the engine's count
    /// equal to both drivers' (payload emitted = handed to the kernel =
    /// taken from it). Returns the counts, the stages per message with the
    /// re-layout zeroed, and the re-layout.
    fn measure(size: usize, form: Form, exchange: Exchange) -> (Counts, Vec<(u64, u64)>, CopyCount) {
        let n = u64::from(N);
        let (c, _) = count(size, form, exchange, N).unwrap();
        let what = format!("{size} B {form:?} {exchange:?}: {c:?}");
        assert_eq!(c.retransmitted, 0, "a retransmission would add copies: {what}");
        let mut stages = c.stages();
        let relaid = std::mem::take(&mut stages[2]);
        assert!(stages.iter().all(|s| s.ops % n == 0 && s.bytes % n == 0), "every message alike: {what}");
        let both = |a: CopyCount, b: CopyCount| (a.ops + b.ops, a.bytes + b.bytes);
        let emitted = (c.into_packet.ops, c.into_packet.bytes);
        assert_eq!(emitted, both(c.client.to_kernel, c.server.to_kernel), "{what}");
        assert_eq!(emitted, both(c.client.from_kernel, c.server.from_kernel), "{what}");
        (c, stages.iter().map(|s| (s.ops / n, s.bytes / n)).collect(), relaid)
    }

    /// The copy count of the one-way path, stage by stage, for every size
    /// and form, exactly. A copy added or removed anywhere on the path
    /// changes a number here: update `ONE_WAY` (and docs/PERF.md's E9
    /// table) with it.
    #[test]
    fn every_copy_on_the_real_path_is_counted_and_expected() {
        for (size, form, packets, expect) in ONE_WAY {
            let (c, got, relaid) = measure(size, form, Exchange::OneWay);
            // One way, the sender's batches hold its DATA alone — unless a
            // control packet (a status request or a keep-alive, when the
            // machine is slow enough for a timer to fire mid-run) shares a
            // batch with a longer DATA packet, which the driver re-lays out
            // (seen once under a load average of 25). Bounded, not zero.
            let n = u64::from(N);
            assert!(relaid.ops <= packets * n && relaid.bytes <= size as u64 * n, "{size} B {form:?}: {c:?}");
            assert_eq!(got, expect, "{size} B {form:?}: {c:?}");
            assert_eq!(c.into_packet.ops, packets * u64::from(N), "{size} B {form:?}");
        }
    }

    /// The ping-pong: the packet and kernel stages exactly twice the one-way
    /// count (the echo writes back the chunks it read: no join on the
    /// server; only the client joins chunks to read) — except the driver's
    /// re-layout. The reply leaves with the status report the server owes
    /// for the request when both are in one batch, and the driver copies a
    /// batch whose control packet precedes a longer DATA packet; whether
    /// they share a batch depends on timing (a report already sent alone
    /// does not), so that stage is bounded: at most every reply packet, on
    /// the server only, never for 10 B (its DATA packet is the shorter).
    #[test]
    fn an_echo_counts_both_ways_and_bounds_the_re_layout() {
        let n = u64::from(N);
        for (size, form, packets, one) in ONE_WAY {
            let twice = |(ops, bytes): (u64, u64)| (2 * ops, 2 * bytes);
            let expect = [one[0], twice(one[1]), (0, 0), twice(one[3]), twice(one[4]), one[5]];
            let (c, got, relaid) = measure(size, form, Exchange::Echo);
            assert_eq!(got, expect, "{size} B {form:?}: {c:?}");
            assert!(relaid.ops <= packets * n && relaid.bytes <= size as u64 * n, "{size} B {form:?}: {c:?}");
            if size == 10 {
                assert_eq!(relaid, CopyCount::default(), "{size} B {form:?}: {c:?}");
            }
            assert_eq!(c.client.relaid, CopyCount::default(), "the client's batches carry data alone: {c:?}");
        }
    }

    #[test]
    fn a_row_sums_its_stages() {
        let c = Counts {
            into_packet: CopyCount { ops: 8, bytes: 10_000 },
            client: PathCopies { to_kernel: CopyCount { ops: 8, bytes: 10_000 }, ..PathCopies::default() },
            server: PathCopies { from_kernel: CopyCount { ops: 8, bytes: 10_000 }, ..PathCopies::default() },
            read_join: CopyCount { ops: 1, bytes: 10_000 },
            ..Counts::default()
        };
        let p = c.path(10_000, Form::Contiguous, Exchange::OneWay, 1);
        assert_eq!((p.per_byte, p.ops_per_message, p.ops_per_packet), (4.0, 25.0, 25.0 / 8.0));
        assert_eq!(p.packets_per_message, 8.0);
    }
}
