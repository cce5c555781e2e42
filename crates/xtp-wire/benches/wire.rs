//! Wire costs: checksum throughput (word-at-a-time vs the naive 16-bit loop),
//! parse + verify of a full 1,472-byte DATA packet (a 1,500-byte IPv4 MTU minus
//! IP and UDP headers), and emit of a DATA header and of a full packet.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use xtp_wire::checksum::{checksum, checksum_naive};
use xtp_wire::{Body, HeaderRepr, Options, PacketRepr, PacketType};

const FULL: usize = 1472;

fn data_repr(data: &[u8]) -> PacketRepr<'_> {
    PacketRepr {
        header: HeaderRepr {
            key: 0x8000_0000_1234_5678,
            options: Options::SREQ,
            ptype: PacketType::Data,
            sort: 0,
            sync: 7,
            seq: 1 << 20,
        },
        body: Body::Data { btag: None, data },
    }
}

fn checksums(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for size in [64usize, FULL, 65_536] {
        let buf: Vec<u8> = (0..size).map(|i| (i * 131 + 7) as u8).collect();
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("fast", size), &buf, |b, buf| {
            b.iter(|| checksum(black_box(buf)))
        });
        group.bench_with_input(BenchmarkId::new("naive", size), &buf, |b, buf| {
            b.iter(|| checksum_naive(black_box(buf)))
        });
    }
    group.finish();
}

fn packets(c: &mut Criterion) {
    let payload = vec![0x5au8; FULL - 32];
    let repr = data_repr(&payload);
    let mut packet = vec![0u8; repr.buffer_len()];
    repr.emit(&mut packet).unwrap();
    assert_eq!(packet.len(), FULL);
    let mut group = c.benchmark_group("packet");
    group.throughput(Throughput::Bytes(FULL as u64));
    group.bench_function("parse+verify/1472", |b| {
        b.iter(|| match PacketRepr::parse(black_box(&packet)) {
            Ok(PacketRepr { body: Body::Data { data, .. }, .. }) => data.len(),
            _ => unreachable!(),
        })
    });
    let mut out = vec![0u8; FULL];
    group.bench_function("emit/1472", |b| b.iter(|| black_box(&repr).emit(&mut out)));
    group.throughput(Throughput::Elements(1));
    let header_only = data_repr(&[]);
    group.bench_function("emit-header/32", |b| b.iter(|| black_box(&header_only).emit(&mut out)));
    group.finish();
}

criterion_group!(benches, checksums, packets);
criterion_main!(benches);
