//! The output side of a context: what it sends next — diagnostics and
//! END, answers to status requests, data within the flow, congestion and
//! rate limits (retransmissions first), then control packets (probes,
//! WTIMER's handshake, window updates) — built into the caller's buffer.

use super::*;

impl Context {
    pub(crate) fn wants_to_send(&self) -> bool {
        self.need_end
            || self.need_diag.is_some()
            || (self.state.is_live()
                && (self.reply_echo.is_some()
                    || self.need_probe
                    || self.need_tcntl
                    || self.send.has_retransmit()
                    || self.send.has_new()
                    || self.wclose_pending
                    || (self.initiator && !self.established && self.stats.packets_sent == 0)
                    || self.alloc_update_due()))
    }

    fn key_out(&self) -> u64 {
        if self.initiator {
            if self.peer_key_known { self.peer_key | RTN } else { self.local_key }
        } else {
            self.peer_key | RTN
        }
    }

    fn base_options(&self) -> Options {
        let mut o = Options::EMPTY;
        o.set(Options::NOERR, self.cfg.noerr);
        o.set(Options::NOFLOW, self.cfg.noflow);
        o.set(Options::FASTNAK, self.cfg.fastnak);
        o.set(Options::SORT, self.cfg.sort.is_some());
        o.set(Options::RCLOSE, self.recv.complete());
        o.set(Options::WCLOSE, self.send.fin.is_some_and(|f| self.send.nxt >= f));
        o
    }

    /// A receiver with no data of its own in flight has no RTT, and needs one
    /// to size its buffer (`right_size`): at most once per round trip and
    /// once per eighth of a buffer received, a report or window update asks
    /// for status too (SREQ with a fresh sync).
    fn rtt_probe(&mut self, now: Instant) -> Options {
        // Only while data arrives (two idle peers must not answer each
        // other's probes for ever), at most once per round trip, and only
        // after an eighth of a buffer: the RTT matters to `right_size` when
        // a round trip brings half a buffer, and then an eighth comes in a
        // quarter of one, so such paths are still probed every round trip.
        // Where a round trip brings far less the answers cost link time for
        // nothing: each is a control packet on the sender's (bottleneck)
        // side, and at a 0.5 ms RTT one per round trip was 1 % of a
        // 45 Mbit/s link (`paths.rs::bbr_fills_a_short_lossy_path`).
        let eighth = (self.recv.buffer() / 8).max(1);
        let due = self.rtt_probe_at.is_none_or(|(t, nxt)| {
            self.recv.nxt >= nxt.saturating_add(eighth)
                && self.rtt.srtt().is_some_and(|srtt| now.saturating_since(t) >= srtt)
        }) && self.recv.nxt > 0;
        let idle = self.send.in_flight() == 0 && !self.send.has_new();
        if !due || !idle || self.cfg.noerr || self.recv.buffer() >= self.recv.max_buffer() {
            return Options::EMPTY;
        }
        self.rec.next_sync();
        self.rec.on_optional_request(now, self.send.nxt);
        self.rtt_probe_at = Some((now, self.recv.nxt));
        Options::SREQ
    }

    /// Our allocation grew by a quarter buffer since we last told the peer.
    fn alloc_update_due(&self) -> bool {
        self.recv.alloc() >= self.last_alloc_sent + (self.recv.buffer() / 4).max(1)
    }

    /// A fresh `sync` for a control packet that asks for status (digest
    /// G11: every data packet and every status request gets one, so an echo
    /// names exactly one transmission). Logged so its answer is recognised.
    fn bump_sync(&mut self, now: Instant) {
        self.rec.next_sync();
        self.rec.on_sent(now, self.send.nxt, self.send.nxt, false, false);
        self.arm_timers(now, false);
    }

    /// The wire `sync`: the low 32 bits of ours.
    fn wire_sync(&self) -> u32 {
        self.rec.sync as u32
    }

    /// Whether a data packet of `wire` bytes may leave now under rate
    /// control and pacing; if not, RTIMER is set for when it may.
    ///
    /// Not generic over the subscriber (its decision is traced by the
    /// caller, `trace_rate`): made generic, LLVM stopped inlining the token
    /// buckets into it and the untraced engine paid for it (callgrind,
    /// Session 20 review).
    fn may_send(&mut self, now: Instant, wire: usize) -> bool {
        match self.cc.pacing_rate(self.rtt.srtt()) {
            Some(data_rate) => {
                // The controllers count data (delivery rates, windows); the
                // pacer counts what goes on the wire. Paced at the data
                // rate, BBR's gain-1.0 phases sent 1,400 data bytes per
                // 1,432 wire bytes 2.2 % below the bottleneck it measured,
                // and the link idled that much (simulated, 45 Mbit/s,
                // 50 ms: 97.7 % busy; kernel BBR fills it).
                let seg = self.seg as u64;
                let rate = data_rate.saturating_mul(seg + xtp_wire::HEADER_LEN as u64) / seg;
                let burst = crate::cc::send_quantum(rate, self.max_packet as u64);
                self.pacer.set(rate, burst, now);
            }
            None if self.pacer.rate() != 0 => self.pacer.set(0, 1, now),
            None => {}
        }
        let ready = self.bucket.ready_at(now, wire).max(self.pacer.ready_at(now, wire));
        if ready > now {
            self.rtimer = Some(ready);
            return false;
        }
        self.bucket.try_take(now, wire);
        self.pacer.try_take(now, wire);
        true
    }

    /// Reports a rate-control decision after `may_send`: the pacing rate
    /// changed from `rate_before`, or the packet must wait (`sent` false:
    /// RTIMER set for when it may leave).
    fn trace_rate<S: Subscriber>(&self, now: Instant, sent: bool, rate_before: u64, sink: &mut Sink<'_, S>) {
        if sent && self.pacer.rate() == rate_before {
            return;
        }
        let wait = match self.rtimer {
            Some(t) if !sent && t > now => t - now,
            _ => xk_time::Duration::ZERO,
        };
        sink.trace(|| Trace::RateDecision { ctx: self.id, rate: self.pacer.rate(), wait });
    }

    /// Most spans an ECNTL may carry on this path.
    fn max_spans(&self) -> usize {
        ((self.max_packet.saturating_sub(ECNTL_BASE)) / 16).clamp(1, MAX_SPANS)
    }

    fn control(&self) -> ControlSegment {
        ControlSegment { rseq: self.recv.nxt, alloc: self.recv.alloc(), echo: self.reply_echo.unwrap_or(0) }
    }

    fn first_address(&self) -> AddressSegment<'static> {
        let addr = match self.peer.ip() {
            IpAddr::V4(dst) => Address::Ipv4 { dst, src: Ipv4Addr::UNSPECIFIED, dport: self.port, sport: 0 },
            IpAddr::V6(dst) => {
                Address::Ipv6 { dst, src: std::net::Ipv6Addr::UNSPECIFIED, dport: self.port, sport: 0 }
            }
        };
        AddressSegment { domain: 0, addr }
    }

    /// Caps the packet size for the next `poll_packet` (amplification
    /// budget); returns the previous cap to restore.
    pub(crate) fn cap_packet(&mut self, cap: usize) -> usize {
        let old = self.max_packet;
        self.max_packet = self.max_packet.min(cap);
        old
    }

    pub(crate) fn restore_packet_cap(&mut self, old: usize) {
        self.max_packet = old;
    }

    /// Builds the next packet into `buf`; returns its length.
    /// A packet header of this context.
    fn header(&self, options: Options, ptype: PacketType, seq: u64) -> HeaderRepr {
        HeaderRepr {
            key: self.key_out(),
            options,
            ptype,
            sort: self.cfg.sort.unwrap_or(0),
            sync: self.wire_sync(),
            seq,
        }
    }

    pub(crate) fn poll_packet<S: Subscriber>(
        &mut self,
        now: Instant,
        ep: &EndpointConfig,
        buf: &mut [u8],
        sink: &mut Sink<'_, S>,
    ) -> Option<usize> {
        let header = Self::header;
        // 1. Diagnostics and END.
        if let Some((code, value, text)) = self.need_diag.take() {
            let mut o = self.base_options();
            if self.need_end {
                o |= Options::END;
                self.need_end = false;
            }
            let p = PacketRepr {
                header: header(self, o, PacketType::Diag, self.send.nxt),
                body: Body::Diag(DiagSegment { code, value, text: text.as_bytes() }),
            };
            return self.emit(&p, buf, None, sink);
        }
        if self.need_end {
            self.need_end = false;
            let o = self.base_options() | Options::END | Options::WCLOSE | Options::RCLOSE;
            let p = PacketRepr {
                header: header(self, o, PacketType::Cntl, self.send.nxt),
                body: Body::Cntl(self.control()),
            };
            self.reply_echo = None;
            return self.emit(&p, buf, None, sink);
        }
        if !self.state.is_live() {
            return None;
        }
        // 2. Key exchange (responder's first answers) and status reports.
        if self.need_tcntl || (self.reply_echo.is_some() && !self.peer_uses_rtn && !self.report_follows) {
            self.need_tcntl = false;
            let o = self.base_options();
            let control =
                TrafficControlSegment { control: self.control(), reserved: 0, xkey: self.local_key };
            let p = PacketRepr {
                header: header(self, o, PacketType::Tcntl, self.send.nxt),
                body: Body::Tcntl { control, traffic: traffic(&self.cfg, self.maxdata) },
            };
            // A TCNTL carries no spans: if we hold data beyond rseq, the
            // same answer follows as an ECNTL, or the sender would take the
            // missing spans for losses.
            if self.reply_echo.is_some() && self.recv.span_count() > 0 && !self.cfg.noerr {
                self.report_follows = true;
            } else {
                self.reply_echo = None;
            }
            self.last_alloc_sent = self.recv.alloc();
            return self.emit(&p, buf, None, sink);
        }
        if self.reply_echo.is_some() {
            self.report_follows = false;
            let spans = if self.cfg.noerr { Vec::new() } else { self.recv.spans(self.max_spans()) };
            let o = self.base_options() | self.rtt_probe(now);
            let ctl = self.control();
            let body = if spans.is_empty() {
                Body::Cntl(ctl)
            } else {
                Body::Ecntl(ErrorControlSegment { control: ctl, spans: Spans::List(&spans) })
            };
            let p = PacketRepr { header: header(self, o, body.ptype(), self.send.nxt), body };
            self.reply_echo = None;
            self.last_alloc_sent = self.recv.alloc();
            let n = self.emit(&p, buf, None, sink)?;
            return Some(n);
        }
        // 3. Data: retransmissions first, then new data within flow and
        //    congestion limits, paced by the rate bucket and the pacer.
        let first = self.initiator && !self.established;
        let overhead = 32
            + if first {
                self.first_address().buffer_len() + traffic(&self.cfg, self.maxdata).buffer_len()
            } else {
                0
            };
        let room = self.max_packet.saturating_sub(overhead);
        let flow = if self.cfg.noflow { u64::MAX } else { self.peer_alloc };
        // A fixed send window counts from the lowest unacknowledged byte.
        let flow = flow.min(self.cfg.send_window.map_or(u64::MAX, |w| self.send.una.saturating_add(w)));
        // The congestion window counts bytes in flight (not those the peer
        // holds or we know lost), so the edge for new data is relative to nxt.
        let cwnd = self.cc.window();
        let in_flight = self.send.in_flight();
        let mut room_cc = match &self.prr {
            Some(p) => p.allowance(cwnd, in_flight, self.seg as u64),
            None => cwnd.saturating_sub(in_flight),
        };
        // Sender-side silly-window avoidance (RFC 1122 §4.2.3.4): while data
        // is in flight, wait until the window admits a full packet rather
        // than cut a small one to fit it (a window in bytes, as CUBIC's, would
        // otherwise fill the path with fragments of packets).
        let full = self.seg.min(room.saturating_sub(8)).max(1) as u64;
        if room_cc < full && in_flight > 0 {
            room_cc = 0;
        }
        let limit = flow.min(self.send.nxt.saturating_add(room_cc));
        // Retransmissions are data in flight like any other: within the window.
        let retransmit_ok = room_cc > 0 || in_flight == 0;
        if let Some(seg) = self.send.next_segment(self.seg, room, limit, retransmit_ok) {
            let wire = overhead + seg.btag.map_or(0, |_| 8) + seg.data.len();
            let traced = S::ENABLED && sink.subscriber.recording();
            let rate_before = if traced { self.pacer.rate() } else { 0 };
            let sent = self.may_send(now, wire);
            if traced {
                self.trace_rate(now, sent, rate_before, sink);
            }
            if !sent {
                // The data must wait for the rate bucket or the pacer, but a
                // probe, WTIMER's handshake or a window update need not: a
                // rate-limited sender with data queued never reached step 4,
                // and its probes waited for the next data packet that asked
                // anyway (Session 21 review: 94 spurious timeouts in 30 s
                // at 72 kB/s, 50 ms, `Disabled`, lossless).
                return self.poll_control(now, buf, sink);
            }
            let end = seg.seq + seg.data.len() as u64;
            debug_assert!(self.cfg.noflow || end <= self.peer_alloc, "flow control violated");
            let more_after = self.send.more_after(&seg, limit);
            let mut o = self.base_options();
            o.set(Options::EOM, seg.eom);
            o.set(Options::NOCHECK, self.cfg.nocheck);
            // On data, WCLOSE marks only the packet whose data ends where ours
            // ends: the receiver takes `seq + len` of a WCLOSE packet as our
            // end of data, so a retransmitted earlier segment must not carry it.
            o.set(Options::WCLOSE, self.send.fin == Some(end));
            self.data_since_sreq += 1;
            // With a small window every reply counts: ask at least every quarter
            // window, so one lost report does not stall the sender until WTIMER.
            let window_pkts = (cwnd / self.seg.max(1) as u64).max(1);
            let every = u64::from(self.cfg.sreq_every).min((window_pkts / 16).max(2)) as u32;
            // And at least once a round trip: at a low rate 16 packets
            // take longer than the timeout, and a report only comes when
            // asked (an RTT sample every round trip, issue #12).
            let round_due = self.sreq_at.zip(self.rtt.srtt()).is_some_and(|(at, srtt)| now >= at + srtt);
            let ask = !self.cfg.noerr
                && (!more_after
                    || round_due
                    || self.data_since_sreq >= every
                    || o.contains(Options::WCLOSE)
                    || seg.retransmit);
            self.rec.next_sync();
            if ask {
                self.data_since_sreq = 0;
                self.sreq_at = Some(now);
                o |= Options::SREQ;
            }
            let datagram_done = self.cfg.service == Service::Datagram && self.send.fin == Some(end);
            if datagram_done {
                o |= Options::END;
            }
            if o.contains(Options::WCLOSE) {
                self.wclose_pending = false;
            }
            let ptype = if first { PacketType::First } else { PacketType::Data };
            let body = if first {
                Body::First {
                    address: self.first_address(),
                    traffic: traffic(&self.cfg, self.maxdata),
                    btag: seg.btag,
                    data: &seg.data,
                }
            } else {
                Body::Data { btag: seg.btag, data: &seg.data }
            };
            let p = PacketRepr { header: header(self, o, ptype, seg.seq), body };
            debug_assert!(p.buffer_len() <= self.max_packet, "packet over max_packet");
            let n = self.emit(&p, buf, Some(seg.data.len()), sink)?;
            // The payload copies this packet cost (E9 counts them).
            if seg.joined {
                self.stats.copied_joining.add(seg.data.len());
            }
            if !seg.data.is_empty() {
                self.stats.copied_into_packets.add(seg.data.len());
            }
            if seg.retransmit {
                self.stats.retransmitted += seg.data.len() as u64;
                sink.trace(|| Trace::Retransmit {
                    ctx: self.id,
                    flow: self.flow(true),
                    seq: seg.seq,
                    len: seg.data.len(),
                });
            }
            self.send.on_sent(&seg);
            if let Some(p) = &mut self.prr {
                p.on_sent(seg.data.len() as u64);
            }
            self.stats.bytes_sent += seg.data.len() as u64;
            if !self.cfg.noerr {
                // Application-limited: nothing more to send and the window not full.
                let in_flight = self.send.in_flight();
                let app_limited = !self.send.has_new() && in_flight < cwnd;
                self.rec.on_sent(now, seg.seq, end, seg.retransmit, app_limited);
                self.round_peak = self.round_peak.max(in_flight);
                // The probe waits for the sender to fall quiet (as TCP's
                // loss probe, rescheduled on every send): while data leaves,
                // its status requests ask anyway (at least once a round
                // trip). Not restarting it here fired the probe timer every
                // millisecond between reports of a rate-paced sender on a
                // short path (27,660 firings in 30 s at 45 Mbit/s, 0 ms,
                // `Disabled`; most could not even leave, see `poll_control`).
                self.arm_timers(now, true);
            }
            if datagram_done {
                // An unacknowledged datagram ends with its last packet. No
                // answer will come and none is owed (the receiver never
                // probes a NOERR context), so the short linger suffices.
                self.close_with(Input::EndReceived, CloseReason::Graceful, now, ep, sink);
                self.linger_briefly(now, ep);
            }
            return Some(n);
        }
        self.poll_control(now, buf, sink)
    }

    /// Step 4 of [`Context::poll_packet`]: a FIRST without data (connect
    /// before write), a WCLOSE without data, probes and window updates — a
    /// control packet, not held by the rate bucket or the pacer.
    fn poll_control<S: Subscriber>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        sink: &mut Sink<'_, S>,
    ) -> Option<usize> {
        let header = Self::header;
        let first_needed = self.initiator && !self.established && self.stats.packets_sent == 0;
        let wclose = self.wclose_pending && self.send.fin == Some(self.send.nxt);
        if first_needed || wclose || self.need_probe {
            self.need_probe = false;
            self.data_since_sreq = 0;
            self.sreq_at = Some(now);
            let mut o = self.base_options() | Options::SREQ;
            self.bump_sync(now);
            if wclose {
                self.wclose_pending = false;
                o |= Options::WCLOSE;
            }
            if self.initiator && !self.established {
                let body = Body::First {
                    address: self.first_address(),
                    traffic: traffic(&self.cfg, self.maxdata),
                    btag: None,
                    data: &[],
                };
                let p = PacketRepr { header: header(self, o, PacketType::First, self.send.nxt), body };
                return self.emit(&p, buf, Some(0), sink);
            }
            let p = PacketRepr {
                header: header(self, o, PacketType::Cntl, self.send.nxt),
                body: Body::Cntl(self.control()),
            };
            return self.emit(&p, buf, None, sink);
        }
        if self.alloc_update_due() {
            self.last_alloc_sent = self.recv.alloc();
            let o = self.base_options() | self.rtt_probe(now);
            let p = PacketRepr {
                header: header(self, o, PacketType::Cntl, self.send.nxt),
                body: Body::Cntl(self.control()),
            };
            return self.emit(&p, buf, None, sink);
        }
        None
    }

    fn emit<S: Subscriber>(
        &mut self,
        p: &PacketRepr<'_>,
        buf: &mut [u8],
        data: Option<usize>,
        sink: &mut Sink<'_, S>,
    ) -> Option<usize> {
        // Under the anti-amplification cap (G27) `max_packet` is the budget
        // left: a packet over it is not sent (as if lost; retransmission and
        // probes recover once the peer has sent more or proved its address).
        if p.buffer_len() > self.max_packet {
            return None;
        }
        // Build and checksum as spans: the subscriber times them (the
        // engine reads no clock). The packet's own event sits inside the
        // build span, after the checksum.
        //
        // Untraced, the plain `emit` (xtp-wire's own out-of-line copy): the
        // observed one is generic, so monomorphised here it would call
        // xtp-wire's codec helpers across crates and cost ~7 % more
        // instructions per round trip with tracing off (callgrind, Session
        // 20 review). `S::ENABLED` is a constant; a subscriber compiled in
        // but not recording takes the plain path too.
        let traced = S::ENABLED && sink.subscriber.recording();
        let len = if traced { p.buffer_len() } else { 0 };
        sink.trace(|| Trace::Span { work: Work::Build, begin: true, len });
        let built = if traced {
            p.emit_observed(buf, |begin| {
                sink.trace(|| Trace::Span { work: Work::ChecksumCompute, begin, len })
            })
        } else {
            p.emit(buf)
        };
        if let Ok(n) = built {
            self.stats.packets_sent += 1;
            sink.trace(|| Trace::PacketSent {
                ctx: Some(self.id),
                flow: self.flow(true),
                ptype: p.body.ptype(),
                seq: p.header.seq,
                data: data.unwrap_or(0),
                len: n,
            });
        }
        sink.trace(|| Trace::Span { work: Work::Build, begin: false, len });
        built.ok()
    }

    pub(crate) fn after_send<S: Subscriber>(
        &mut self,
        now: Instant,
        ep: &EndpointConfig,
        sink: &mut Sink<'_, S>,
    ) {
        self.check_progress(now, ep, sink);
    }
}
