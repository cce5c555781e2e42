//! Property tests: emit→parse is the identity on valid representations; parse,
//! the checked view and the pretty printer never panic on arbitrary bytes; a
//! single flipped bit in a checksummed packet is always rejected.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use xtp_wire::{
    Address, AddressSegment, Body, ControlSegment, DiagSegment, ErrorControlSegment, HeaderRepr, Options,
    Packet, PacketRepr, Pretty, Service, Span, Spans, TrafficControlSegment, TrafficSegment, TrafficSpec,
    Verify,
};

/// An owned body from which a borrowed `Body` is built.
#[derive(Clone, Debug)]
enum Owned {
    Data(Option<u64>, Vec<u8>),
    Cntl(ControlSegment),
    First(OwnedAddr, TrafficSegment, Option<u64>, Vec<u8>),
    Ecntl(ControlSegment, Vec<Span>),
    Tcntl(TrafficControlSegment, TrafficSegment),
    Jcntl(TrafficControlSegment, OwnedAddr, TrafficSegment),
    Diag(u32, u32, Vec<u8>),
}

#[derive(Clone, Debug)]
struct OwnedAddr {
    domain: u8,
    kind: u8,
    null: u32,
    v4: (Ipv4Addr, Ipv4Addr),
    v6: (Ipv6Addr, Ipv6Addr),
    ports: (u16, u16),
    other: (u8, Vec<u8>),
}

impl OwnedAddr {
    fn seg(&self) -> AddressSegment<'_> {
        let (dport, sport) = self.ports;
        let addr = match self.kind % 4 {
            0 => Address::Null(self.null),
            1 => Address::Ipv4 { dst: self.v4.0, src: self.v4.1, dport, sport },
            2 => Address::Ipv6 { dst: self.v6.0, src: self.v6.1, dport, sport },
            _ => Address::Other { format: self.other.0, body: &self.other.1 },
        };
        AddressSegment { domain: self.domain, addr }
    }
}

impl Owned {
    fn body(&self) -> Body<'_> {
        match self {
            Owned::Data(btag, d) => Body::Data { btag: *btag, data: d },
            Owned::Cntl(c) => Body::Cntl(*c),
            Owned::First(a, t, btag, d) => {
                Body::First { address: a.seg(), traffic: *t, btag: *btag, data: d }
            }
            Owned::Ecntl(c, s) => Body::Ecntl(ErrorControlSegment { control: *c, spans: Spans::List(s) }),
            Owned::Tcntl(c, t) => Body::Tcntl { control: *c, traffic: *t },
            Owned::Jcntl(c, a, t) => Body::Jcntl { control: *c, address: a.seg(), traffic: *t },
            Owned::Diag(code, value, text) => Body::Diag(DiagSegment { code: *code, value: *value, text }),
        }
    }
}

fn control() -> impl Strategy<Value = ControlSegment> {
    (any::<u64>(), any::<u64>(), any::<u32>()).prop_map(|(rseq, alloc, echo)| ControlSegment {
        rseq,
        alloc,
        echo,
    })
}

fn tcontrol() -> impl Strategy<Value = TrafficControlSegment> {
    (control(), any::<u32>(), any::<u64>()).prop_map(|(control, reserved, xkey)| TrafficControlSegment {
        control,
        reserved,
        xkey,
    })
}

fn traffic() -> impl Strategy<Value = TrafficSegment> {
    let spec = prop_oneof![
        any::<u32>().prop_map(TrafficSpec::Null),
        any::<[u32; 5]>().prop_map(|[maxdata, inrate, inburst, outrate, outburst]| {
            TrafficSpec::Explicit { maxdata, inrate, inburst, outrate, outburst }
        }),
    ];
    (any::<u8>(), spec).prop_map(|(s, spec)| TrafficSegment { service: Service::from_code(s), spec })
}

fn addr() -> impl Strategy<Value = OwnedAddr> {
    let other_format = prop_oneof![2u8..=5, 7u8..=255];
    (
        any::<u8>(),
        any::<u8>(),
        any::<u32>(),
        any::<([u8; 4], [u8; 4])>(),
        any::<([u8; 16], [u8; 16])>(),
        any::<(u16, u16)>(),
        (other_format, prop::collection::vec(any::<u8>(), 0..40)),
    )
        .prop_map(|(domain, kind, null, v4, v6, ports, other)| OwnedAddr {
            domain,
            kind,
            null,
            v4: (v4.0.into(), v4.1.into()),
            v6: (v6.0.into(), v6.1.into()),
            ports,
            other,
        })
}

fn data() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..300)
}

fn owned() -> impl Strategy<Value = Owned> {
    prop_oneof![
        (any::<Option<u64>>(), data()).prop_map(|(b, d)| Owned::Data(b, d)),
        control().prop_map(Owned::Cntl),
        (addr(), traffic(), any::<Option<u64>>(), data()).prop_map(|(a, t, b, d)| Owned::First(a, t, b, d)),
        (control(), prop::collection::vec(any::<(u64, u64)>(), 0..20)).prop_map(|(c, s)| Owned::Ecntl(
            c,
            s.into_iter().map(|(left, right)| Span { left, right }).collect()
        )),
        (tcontrol(), traffic()).prop_map(|(c, t)| Owned::Tcntl(c, t)),
        (tcontrol(), addr(), traffic()).prop_map(|(c, a, t)| Owned::Jcntl(c, a, t)),
        (any::<u32>(), any::<u32>(), data()).prop_map(|(c, v, t)| Owned::Diag(c, v, t)),
    ]
}

fn header_fields() -> impl Strategy<Value = (u64, u32, u16, u32, u64)> {
    (any::<u64>(), 0u32..0x100_0000, any::<u16>(), any::<u32>(), any::<u64>())
}

fn repr<'a>(h: (u64, u32, u16, u32, u64), body: Body<'a>) -> PacketRepr<'a> {
    let (key, opts, sort, sync, seq) = h;
    let mut options = Options::from_bits(opts);
    let btag = matches!(body, Body::Data { btag: Some(_), .. } | Body::First { btag: Some(_), .. });
    options.set(Options::BTAG, btag);
    PacketRepr { header: HeaderRepr { key, options, ptype: body.ptype(), sort, sync, seq }, body }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4_000, ..ProptestConfig::default() })]

    #[test]
    fn emit_then_parse_is_identity(h in header_fields(), o in owned()) {
        let r = repr(h, o.body());
        let mut buf = vec![0u8; r.buffer_len()];
        prop_assert_eq!(r.emit(&mut buf), Ok(buf.len()));
        let back = PacketRepr::parse(&buf);
        prop_assert_eq!(back, Ok(r));
        // The pretty printer handles every valid packet.
        prop_assert!(!Pretty(&buf).to_string().starts_with("MALFORMED"));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = PacketRepr::parse(&bytes);
        let _ = PacketRepr::parse_with(&bytes, Verify::Skip);
        let _ = Pretty(&bytes).to_string();
        if let Ok(p) = Packet::new_checked(&bytes[..]) {
            let _ = (p.key(), p.options(), p.dlen(), p.seq(), p.payload().len(), p.verify_checksum());
        }
    }

    /// Valid headers with random bodies reach the segment parsers (random
    /// bytes alone rarely get past version and dlen checks).
    #[test]
    fn random_bodies_behind_valid_headers_never_panic(
        h in header_fields(), ptype in 0u8..32, body in prop::collection::vec(any::<u8>(), 0..200)
    ) {
        let mut buf = vec![0u8; 32 + body.len()];
        buf[32..].copy_from_slice(&body);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_key(h.0);
        let cmd = (h.1 << 8) | (1 << 5) | u32::from(ptype);
        p.set_dlen(body.len() as u32);
        p.set_seq(h.4);
        buf[8..12].copy_from_slice(&cmd.to_be_bytes());
        Packet::new_unchecked(&mut buf[..]).fill_checksum();
        let _ = PacketRepr::parse(&buf);
        let _ = Pretty(&buf).to_string();
    }

    #[test]
    fn one_flipped_bit_is_always_rejected(h in header_fields(), o in owned(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut r = repr(h, o.body());
        r.header.options.set(Options::NOCHECK, false);
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        let i = at.index(buf.len());
        buf[i] ^= 1 << bit;
        prop_assert!(PacketRepr::parse(&buf).is_err(), "flip at byte {} bit {} accepted", i, bit);
    }
}

#[test]
fn short_buffers_and_bad_fields_name_the_problem() {
    use xtp_wire::ParseError;
    assert!(matches!(PacketRepr::parse(&[0u8; 10]), Err(ParseError::Truncated { what: "header", .. })));
    let r = repr((1, 0, 0, 0, 0), Body::Cntl(ControlSegment::default()));
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut buf).unwrap();
    let mut bad = buf.clone();
    bad[11] = (2 << 5) | 1; // version 2
    assert_eq!(PacketRepr::parse(&bad), Err(ParseError::BadVersion(2)));
    assert!(matches!(
        PacketRepr::parse(&buf[..40]),
        Err(ParseError::DlenMismatch { dlen: 20, available: 8 })
    ));
    let mut bad = buf.clone();
    bad[11] = (1 << 5) | 6; // JOIN
    Packet::new_unchecked(&mut bad[..]).fill_checksum();
    assert_eq!(PacketRepr::parse(&bad), Err(ParseError::UnknownPacketType(6)));
    // Up to 7 trailing pad bytes beyond dlen are ignored (digest G3); 8 are not.
    let mut padded = buf.clone();
    padded.extend_from_slice(&[0; 7]);
    assert!(PacketRepr::parse(&padded).is_ok());
    padded.push(0);
    assert!(matches!(PacketRepr::parse(&padded), Err(ParseError::DlenMismatch { .. })));
    // A 24-byte CNTL body is accepted (G3), 21 is not.
    let mut long = buf.clone();
    long.extend_from_slice(&[0; 4]);
    Packet::new_unchecked(&mut long[..]).set_dlen(24);
    Packet::new_unchecked(&mut long[..]).fill_checksum();
    assert!(PacketRepr::parse(&long).is_ok());
    let mut odd = buf.clone();
    odd.push(0);
    Packet::new_unchecked(&mut odd[..]).set_dlen(21);
    Packet::new_unchecked(&mut odd[..]).fill_checksum();
    assert!(matches!(PacketRepr::parse(&odd), Err(ParseError::SegmentLength { segment: "control", .. })));
    let mut small = [0u8; 8];
    assert!(matches!(
        r.emit(&mut small),
        Err(xtp_wire::EmitError::BufferTooSmall { needed: 52, available: 8 })
    ));
}
