//! Wire codec throughput: a data packet with a 1200-byte payload, an ack with 8 ranges and
//! a packed packet of 16 ADUs of 40 bytes.
//!
//! Run: `cargo bench -p horde-proto --bench wire -- --warm-up-time 1 --measurement-time 3`.
//! Every benchmark handles one packet per iteration, so criterion reports packets/s
//! (`elem/s`).
//!
//! * `encode`: [`wire::encode`] into a reused buffer (capacity kept, as a driver's
//!   transmit buffer is).
//! * `decode`: [`wire::decode`] of a received datagram already held in `Bytes`.
//! * `encode_decode`: the path between two sessions: encode, copy the datagram into a
//!   pooled receive buffer and freeze it into `Bytes` (as a socket read into a `BytesMut`
//!   would), decode. No allocation per packet.
//! * `encode_alloc_decode`: the same, but each datagram is copied into a freshly allocated
//!   `Bytes` (`Bytes::copy_from_slice`). Shows what a per-datagram heap buffer costs: above
//!   1 KiB glibc's allocator leaves its thread cache, and that dominates.

use bytes::{Bytes, BytesMut};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use horde_proto::wire::{self, Ack, PackedAdu, PackedAdus, Packet};
use horde_proto::ChannelId;

const PAYLOAD: usize = 1200;
const ACK_RANGES: usize = 8;

fn data_packet() -> Packet {
    Packet::Data {
        conn: 0x0123_4567_89ab_cdef,
        channel: ChannelId::new(3),
        flags: wire::FLAG_ORDERED,
        seq: 1_000_000,
        send_ts: 123_456_789,
        stream: 7,
        stream_seq: 42_000,
        payload: Bytes::from((0..PAYLOAD).map(|i| i as u8).collect::<Vec<u8>>()),
    }
}

/// An ack of a channel with 8 holes below a run of 10 received packets.
fn ack_packet() -> Packet {
    Packet::Ack(Ack {
        conn: 0x0123_4567_89ab_cdef,
        channel: ChannelId::new(3),
        largest: 1_000_000,
        ack_delay_us: 850,
        echo_ts: 123_456_789,
        first_range: 9,
        ranges: (0..ACK_RANGES as u64).map(|k| (k % 3, 4 + k)).collect(),
    })
}

/// A packed packet of 16 speech-frame-sized ADUs (40 bytes each).
fn packed_packet() -> Packet {
    let adus: Vec<PackedAdu> = (0..16u64)
        .map(|k| PackedAdu {
            flags: wire::FLAG_ORDERED,
            stream: 2,
            stream_seq: 9_000 + k,
            payload: Bytes::from(vec![k as u8; 40]),
        })
        .collect();
    Packet::Packed {
        conn: 0x0123_4567_89ab_cdef,
        channel: ChannelId::new(3),
        seq: 1_000_000,
        send_ts: 123_456_789,
        adus: PackedAdus::new(&adus).expect("16 small ADUs pack"),
    }
}

fn bench_packet(c: &mut Criterion, name: &str, packet: &Packet) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    let mut buf = Vec::with_capacity(2048);

    group.bench_function("encode", |b| {
        b.iter(|| {
            buf.clear();
            wire::encode(black_box(packet), &mut buf);
            black_box(buf.len());
        })
    });

    buf.clear();
    wire::encode(packet, &mut buf);
    let datagram = Bytes::copy_from_slice(&buf);
    assert_eq!(&wire::decode(&datagram).expect("decodes"), packet);
    group.bench_function("decode", |b| {
        b.iter(|| black_box(wire::decode(black_box(&datagram)).expect("decodes")))
    });

    let mut rx = BytesMut::with_capacity(64 * 1024);
    group.bench_function("encode_decode", |b| {
        b.iter(|| {
            buf.clear();
            wire::encode(black_box(packet), &mut buf);
            // Reclaims the whole buffer once the previous datagram has been dropped.
            rx.reserve(buf.len());
            rx.extend_from_slice(&buf);
            let datagram = rx.split().freeze();
            black_box(wire::decode(&datagram).expect("decodes"))
        })
    });

    group.bench_function("encode_alloc_decode", |b| {
        b.iter(|| {
            buf.clear();
            wire::encode(black_box(packet), &mut buf);
            let datagram = Bytes::copy_from_slice(&buf);
            black_box(wire::decode(&datagram).expect("decodes"))
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    bench_packet(c, "data_1200", &data_packet());
    bench_packet(c, "ack_8_ranges", &ack_packet());
    bench_packet(c, "packed_16x40", &packed_packet());
}

criterion_group!(benches, bench);
criterion_main!(benches);
