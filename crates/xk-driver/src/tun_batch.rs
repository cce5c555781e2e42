//! Released packets written into a TUN device with `IFF_VNET_HDR`, coalesced
//! (tun-rs's GRO) only where that keeps what the link did.
//!
//! The netns emulator ([`crate::netns`]) holds released segments for a short
//! span and writes them together. tun-rs's GRO would merge *any* held
//! segments of one flow that fit together, which undoes impairments: it
//! prepends and appends to earlier items, so a reordered release (s2, s1,
//! s3) comes out in order, and it checks only the TCP/UDP checksum and
//! rebuilds the IP header, so a middle segment whose IP header was
//! corrupted is healed. And one `send_multiple` call makes one `write` per
//! GRO result, each running the receiving stack before the next starts, so
//! a single time stamp per call under-counts the later writes' release
//! error.
//!
//! So the held packets are cut here into *runs* that GRO coalesces into
//! exactly one super-packet — consecutive in release order, one flow,
//! sequence numbers rising and contiguous, no corrupted or duplicated copy
//! among them, at most 65,535 bytes once merged — and `send_multiple` is
//! called once per run, each call stamped as it starts. A corrupted or
//! duplicated packet, a reordered one, or anything GRO would not merge goes
//! in a run of its own, as it came: the receiver sees what the link did.
//! The rules mirror tun-rs 2.8's `tcp_packets_can_coalesce` /
//! `udp_packets_can_coalesce`; the tests below check them against its GRO.

use std::ops::Range;

use bytes::Bytes;
use tun_rs::{GROTable, SyncDevice, VIRTIO_NET_HDR_LEN};
use xk_netemu::Delivery;
use xk_time::Instant;

use crate::clock::Clock;

/// Largest IP packet GRO may build: its length goes in a 16-bit field.
pub const MAX_MERGED: usize = 65_535;

/// Most packets held for one write: a 65,535-byte super-packet of
/// 1,500-byte segments.
pub const MAX_BATCH: usize = 44;

/// Each buffer's capacity. tun-rs appends a run into its first packet's
/// buffer and refuses to grow one past its capacity minus twice the header
/// room; this lets a run reach [`MAX_MERGED`] and no further (a 65,536-byte
/// result would overflow tun-rs's 16-bit length arithmetic).
const BUF_CAPACITY: usize = 2 * VIRTIO_NET_HDR_LEN + MAX_MERGED;

/// Released packets waiting to leave together, and the GRO state that
/// coalesces them.
#[derive(Default)]
pub struct Batch {
    /// Packets due (and when the loop found each due).
    pub held: Vec<(Delivery<Bytes>, Instant)>,
    /// When each held packet's write started (filled by [`Batch::write`]).
    pub sent: Vec<Instant>,
    /// Writes the kernel refused in the last [`Batch::write`].
    pub refused: u64,
    /// `send_multiple` calls (normally one write each) in the last write.
    pub calls: usize,
    /// Each packet with the virtio-net header's room in front.
    bufs: Vec<Vec<u8>>,
    gro: GROTable,
}

impl Batch {
    /// Writes the held packets to `dev`, one `send_multiple` per run
    /// ([`runs`]), and stamps each packet with its run's start in `sent`;
    /// each call's length goes to `write_ns`. `udp` says whether the device
    /// takes UDP super-packets. Leaves `held` as it is (the caller accounts
    /// for each packet).
    pub fn write(&mut self, dev: &SyncDevice, clock: &Clock, udp: bool, write_ns: &mut Vec<u64>) {
        let n = self.held.len();
        self.sent.clear();
        self.refused = 0;
        self.calls = 0;
        let mut start = 0;
        while start < n {
            let end = start + run_len(&self.held[start..], udp);
            let len = end - start;
            if self.bufs.len() < len {
                self.bufs.resize_with(len, || Vec::with_capacity(BUF_CAPACITY));
            }
            for ((p, _), b) in self.held[start..end].iter().zip(&mut self.bufs) {
                b.clear();
                b.resize(VIRTIO_NET_HDR_LEN, 0);
                b.extend_from_slice(&p.packet);
            }
            let at = clock.now();
            // An error is the kernel refusing the write (tun-rs's GRO
            // passes a packet it cannot parse through unmerged; it errs
            // only on its own arguments): one refusal per call, which is
            // one write.
            if dev.send_multiple(&mut self.gro, &mut self.bufs[..len], VIRTIO_NET_HDR_LEN).is_err() {
                self.refused += 1;
            }
            write_ns.push(xk_time::duration_nanos(clock.now().saturating_since(at)));
            self.calls += 1;
            self.sent.extend(std::iter::repeat_n(at, len));
            start = end;
        }
    }
}

/// Whether a packet could be the head of a GRO super-packet with packets
/// released after it, on a device that coalesces TCP (`tcp`) and/or UDP
/// (`udp`): holding any other one costs release error for no fewer writes.
pub fn coalescable(ip: &[u8], tcp: bool, udp: bool) -> bool {
    // A TCP segment with PSH set ends a super-packet: nothing joins it.
    View::of(ip, udp).is_some_and(|v| if v.tcp { tcp && !v.psh } else { udp })
}

/// How many of `held` (at least one) go in the first run: what tun-rs's
/// GRO merges into one super-packet, cut where merging would change what
/// the receiver sees.
pub fn run_len(held: &[(Delivery<Bytes>, Instant)], udp: bool) -> usize {
    let Some((first, _)) = held.first() else { return 0 };
    let alone = |d: &Delivery<Bytes>| d.corrupted || d.duplicate;
    let Some(head) = View::of(&first.packet, udp).filter(|_| !alone(first)) else { return 1 };
    let mut merged = first.packet.len();
    let (mut prev, mut prev_id) = (head, first.id);
    let mut n = 1;
    for (d, _) in &held[1..] {
        let Some(v) = View::of(&d.packet, udp) else { break };
        // Reordered (the link released it after a later one): left alone
        // so the receiver sees it out of order.
        if alone(d) || d.id <= prev_id || merged + v.payload > MAX_MERGED || !head.joins(&prev, &v) {
            break;
        }
        merged += v.payload;
        (prev, prev_id) = (v, d.id);
        n += 1;
    }
    n
}

/// What GRO looks at in one packet.
#[derive(Clone, Copy)]
struct View<'a> {
    ip: &'a [u8],
    v6: bool,
    /// IP header length; the transport header starts here.
    iph: usize,
    /// Transport header length.
    l4h: usize,
    payload: usize,
    tcp: bool,
    seq: u32,
    psh: bool,
}

const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;

impl<'a> View<'a> {
    /// The packet as GRO sees it; None if GRO never merges it (not TCP or
    /// UDP, a fragment, IPv6 extension headers, lengths that disagree, a
    /// TCP segment without data or with flags other than ACK and PSH, or
    /// UDP on a device without UDP segmentation).
    fn of(ip: &'a [u8], udp: bool) -> Option<View<'a>> {
        let (v6, iph, proto) = match ip.first()? >> 4 {
            4 if ip.len() >= 20 => {
                let iph = usize::from(ip[0] & 0x0f) * 4;
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                let fragment = ip[6] & 0x3f != 0 || ip[7] != 0;
                if iph < 20 || total != ip.len() || fragment {
                    return None;
                }
                (false, iph, ip[9])
            }
            6 if ip.len() >= 40 => {
                if usize::from(u16::from_be_bytes([ip[4], ip[5]])) != ip.len() - 40 {
                    return None;
                }
                (true, 40, ip[6])
            }
            _ => return None,
        };
        let l4 = ip.get(iph..)?;
        let (tcp, l4h, seq, psh) = match proto {
            6 if l4.len() >= 20 => {
                let l4h = usize::from(l4[12] >> 4) * 4;
                let flags = l4[13];
                if l4h < 20 || l4.len() < l4h || (flags != TCP_ACK && flags != TCP_ACK | TCP_PSH) {
                    return None;
                }
                (true, l4h, u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]), flags & TCP_PSH != 0)
            }
            17 if udp && l4.len() >= 8 => (false, 8, 0, false),
            _ => return None,
        };
        let payload = l4.len() - l4h;
        (payload > 0).then_some(View { ip, v6, iph, l4h, payload, tcp, seq, psh })
    }

    /// Whether `next`, released right after `prev`, joins the super-packet
    /// this packet heads (tun-rs appends it).
    fn joins(&self, prev: &View<'_>, next: &View<'_>) -> bool {
        let (a, b) = (self.ip, next.ip);
        let same_ip = if self.v6 {
            next.v6 && a[0] == b[0] && a[1] >> 4 == b[1] >> 4 && a[6..8] == b[6..8] && a[8..40] == b[8..40]
        } else {
            !next.v6
                && a[1] == b[1]
                && a[6] >> 5 == b[6] >> 5
                && a[8..10] == b[8..10]
                && a[12..20] == b[12..20]
        };
        let (la, lb) = (&a[self.iph..], &b[next.iph..]);
        // Same flow (ports); nothing after a shorter segment; none longer
        // than the first.
        if !same_ip || self.tcp != next.tcp || la[..4] != lb[..4] || prev.payload != self.payload {
            return false;
        }
        if next.payload > self.payload {
            return false;
        }
        if !self.tcp {
            return true;
        }
        // TCP: same ACK number and options, contiguous, not after a PSH.
        self.l4h == next.l4h
            && la[8..12] == lb[8..12]
            && la[20..self.l4h] == lb[20..next.l4h]
            && !prev.psh
            && next.seq == prev.seq.wrapping_add(prev.payload as u32)
    }
}

/// The packets of `held` in their runs, as index ranges (for tests and
/// logs).
pub fn runs(held: &[(Delivery<Bytes>, Instant)], udp: bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < held.len() {
        let end = start + run_len(&held[start..], udp);
        out.push(start..end);
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP segment of flow `port` with `len` bytes of data at `seq`
    /// (ACK only), checksums valid.
    fn tcp(port: u16, seq: u32, len: usize) -> Vec<u8> {
        let total = 40 + len;
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 200, 0, 1, 10, 200, 0, 2];
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&port.to_be_bytes());
        t[2..4].copy_from_slice(&5201u16.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&7u32.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = TCP_ACK;
        t[14] = 0xff;
        p.extend_from_slice(&t);
        p.extend((0..len).map(|i| (seq as usize + i) as u8));
        checksums(&mut p);
        p
    }

    /// An IPv4 UDP datagram of flow `port` with `len` bytes of data.
    fn udp(port: u16, len: usize) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 200, 0, 1, 10, 200, 0, 2];
        p[2..4].copy_from_slice(&((28 + len) as u16).to_be_bytes());
        p.extend_from_slice(&port.to_be_bytes());
        p.extend_from_slice(&9000u16.to_be_bytes());
        p.extend_from_slice(&((8 + len) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend((0..len).map(|i| i as u8));
        checksums(&mut p);
        p
    }

    /// Fills in the IPv4 header and TCP/UDP checksums.
    fn checksums(p: &mut [u8]) {
        fn sum(data: &[u8], mut acc: u32) -> u32 {
            for c in data.chunks(2) {
                acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
            acc
        }
        fn fold(mut acc: u32) -> u16 {
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            !(acc as u16)
        }
        let at = if p[9] == 6 { 16 } else { 6 };
        p[10..12].fill(0);
        p[20 + at..22 + at].fill(0);
        let c = fold(sum(&p[..20], 0));
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let l4len = p.len() - 20;
        let mut pseudo = p[12..20].to_vec();
        pseudo.extend_from_slice(&[0, p[9]]);
        pseudo.extend_from_slice(&(l4len as u16).to_be_bytes());
        let c = fold(sum(&p[20..], sum(&pseudo, 0)));
        p[20 + at..22 + at].copy_from_slice(&c.to_be_bytes());
    }

    fn held(pkts: &[(Vec<u8>, u64)]) -> Vec<(Delivery<Bytes>, Instant)> {
        pkts.iter()
            .map(|(p, id)| {
                let d = Delivery {
                    at: Instant::ZERO,
                    id: *id,
                    packet: Bytes::from(p.clone()),
                    corrupted: false,
                    duplicate: false,
                };
                (d, Instant::ZERO)
            })
            .collect()
    }

    /// Runs tun-rs's GRO over one run and returns its first buffer's IP
    /// packet: the super-packet the run became.
    fn gro(run: &[(Delivery<Bytes>, Instant)], udp: bool) -> Vec<u8> {
        let mut bufs: Vec<Vec<u8>> = run
            .iter()
            .map(|(d, _)| {
                let mut b = Vec::with_capacity(BUF_CAPACITY);
                b.resize(VIRTIO_NET_HDR_LEN, 0);
                b.extend_from_slice(&d.packet);
                b
            })
            .collect();
        let mut table = GROTable::new();
        table.apply_gro(&mut bufs, VIRTIO_NET_HDR_LEN, udp).expect("GRO takes well-formed packets");
        // What a run merges into is its first buffer, grown by the rest.
        bufs[0][VIRTIO_NET_HDR_LEN..].to_vec()
    }

    #[test]
    fn a_run_of_contiguous_segments_is_one_super_packet() {
        let segs: Vec<_> = (0..5).map(|i| (tcp(40000, 1000 + 1448 * i, 1448), u64::from(i))).collect();
        let h = held(&segs);
        assert_eq!(runs(&h, true), vec![0..5]);
        let out = gro(&h, true);
        assert_eq!(out.len(), 40 + 5 * 1448, "GRO made one super-packet of the run");
    }

    #[test]
    fn reordered_corrupted_and_duplicated_packets_are_written_alone() {
        let s = |i: u32| tcp(40000, 1000 + 1448 * i, 1448);
        // Released s2, s1, s3, s4: GRO would prepend s1 to s2 (healing the
        // reordering); here s1 starts a new run.
        let h = held(&[(s(2), 2), (s(1), 1), (s(3), 3), (s(4), 4)]);
        let whole = gro(&h, true);
        assert_eq!(whole[24..28], (1000 + 1448u32).to_be_bytes(), "GRO over the batch starts at s1: healed");
        assert_eq!(runs(&h, true), vec![0..1, 1..2, 2..4]);
        for r in runs(&h, true) {
            let out = gro(&h[r.clone()], true);
            assert_eq!(out[24..28], h[r.start].0.packet[24..28], "each run leaves as released");
        }
        // A corrupted middle segment stays alone (GRO would rebuild its IP
        // header); so does a duplicate.
        let mut h = held(&[(s(0), 0), (s(1), 1), (s(2), 2), (s(3), 3)]);
        h[1].0.corrupted = true;
        h[3].0.duplicate = true;
        assert_eq!(runs(&h, true), vec![0..1, 1..2, 2..3, 3..4]);
        // A gap (a lost segment), another flow, a PSH end, UDP on a device
        // without UDP segmentation.
        let mut psh = s(1);
        psh[33] |= TCP_PSH;
        checksums(&mut psh);
        let h = held(&[(s(0), 0), (s(2), 2), (tcp(40001, 5, 1448), 3), (s(3), 4), (psh, 5), (s(4), 6)]);
        assert_eq!(runs(&h, true), vec![0..1, 1..2, 2..3, 3..4, 4..5, 5..6]);
        let h = held(&[(udp(1, 1200), 0), (udp(1, 1200), 1)]);
        assert_eq!(runs(&h, false), vec![0..1, 1..2]);
        assert_eq!(runs(&h, true), vec![0..2]);
        // Nothing follows a shorter datagram.
        let h = held(&[(udp(1, 1200), 0), (udp(1, 800), 1), (udp(1, 800), 2)]);
        assert_eq!(runs(&h, true), vec![0..2, 2..3]);
    }

    #[test]
    fn no_run_merges_past_65535_bytes() {
        // 24 segments of 2,729 bytes after a 40-byte header: 65,536 bytes
        // merged (MTU 2,769; with timestamps, 36 x 1,819 at MTU 1,871), one
        // more than an IP length holds.
        let segs: Vec<_> = (0..24).map(|i| (tcp(40000, 2729 * i, 2729), u64::from(i))).collect();
        let h = held(&segs);
        let r = runs(&h, true);
        assert_eq!(r, vec![0..23, 23..24]);
        for range in r {
            let out = gro(&h[range.clone()], true);
            let whole: usize = 40 + range.len() * 2729;
            assert_eq!(out.len(), whole, "the run became one super-packet");
            assert!(out.len() <= MAX_MERGED);
            let len = u16::from_be_bytes([out[2], out[3]]);
            assert_eq!(usize::from(len), out.len(), "IP length field matches the merged packet");
        }
    }

    #[test]
    fn only_packets_that_can_head_a_super_packet_are_held() {
        assert!(!coalescable(&tcp(1, 0, 0), true, true), "a pure ACK leaves at once");
        let data = tcp(1, 0, 100);
        assert!(coalescable(&data, true, true), "TCP with data can be coalesced");
        assert!(!coalescable(&data, false, false), "not on a device without TCP segmentation");
        for flags in [0x01 | TCP_ACK, 0x02 | TCP_ACK, 0x80 | TCP_ACK, TCP_PSH | TCP_ACK] {
            let mut p = data.clone();
            p[33] = flags;
            assert!(!coalescable(&p, true, true), "flags {flags:#x}: tun-rs never appends to it");
        }
        assert!(coalescable(&udp(1, 9), true, true), "UDP with data can be coalesced");
        assert!(!coalescable(&udp(1, 9), true, false), "not without UDP segmentation");
        let mut xtp = udp(1, 100);
        xtp[9] = 36;
        assert!(!coalescable(&xtp, true, true), "XTP over IP 36 has no GSO");
        let mut v6 = vec![0x60, 0, 0, 0, 0, 21, 6, 64];
        v6.extend_from_slice(&[0; 32]);
        let mut seg = vec![0u8; 20];
        seg[12] = 5 << 4;
        seg[13] = TCP_ACK;
        seg.push(1);
        v6.extend_from_slice(&seg);
        assert!(coalescable(&v6, true, true), "IPv6 TCP with data can be coalesced");
        // Malformed: never a panic.
        for bad in [&[][..], &[0x45, 0, 0][..], &tcp(1, 0, 5)[..30], &[0x60; 39][..]] {
            assert!(!coalescable(bad, true, true));
        }
    }
}
