//! Cost of loss recovery per packet, 1200-byte ADUs.
//!
//! Run: `cargo bench -p horde-proto --bench recovery -- --warm-up-time 1 --measurement-time 3`.
//! Every benchmark handles one packet per iteration, so criterion's `elem/s` is packets/s.
//!
//! * `frame_data`: number and frame one data ADU (the sender's cost on every ADU).
//! * `oec_encode`: one OEC coded ADU from a window of 64 sent ADUs at r = 0.95 (degree
//!   19): random choice, XOR of 19 payloads, framing.
//! * `oec_decode`: the receiver takes that coded ADU with exactly one constituent missing
//!   and rebuilds it (the other 18 already in its store).
//! * `data_receive`: the receiver takes one data ADU (store, dedup, reorder cache).
//! * `rs_encode_block16`: Reed-Solomon parity for a block of 16 ADUs, 16 parities; per
//!   data ADU of the block.
//! * `rs_decode_block16`: rebuild 3 lost ADUs of such a block from 3 parities; per
//!   block.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use horde_proto::recovery::decoder::Decoder;
use horde_proto::recovery::header::{self, Frame};
use horde_proto::recovery::reorder::ReorderCache;
use horde_proto::recovery::sender::{Kind, Sender};
use horde_proto::recovery::{block, RecoveryMode};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const PAYLOAD: usize = 1200;
const WINDOW: u64 = 64;

fn payload(i: u64) -> Bytes {
    Bytes::from(
        (0..PAYLOAD)
            .map(|k| (k as u64 ^ i) as u8)
            .collect::<Vec<u8>>(),
    )
}

/// A sender whose window holds `WINDOW` transmitted ADUs on a 5% loss path.
fn loaded_sender() -> (Sender, Vec<Bytes>) {
    let mut s = Sender::new(RecoveryMode::Oec);
    let mut frames = Vec::new();
    let mut out = Vec::new();
    for i in 0..WINDOW {
        let (seq, f) = s.frame_data(Duration::ZERO, payload(i));
        s.on_transmit(Kind::Data(seq), 0.05, &mut out);
        frames.push(f);
    }
    (s, frames)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("recovery");
    g.throughput(Throughput::Elements(1));

    let mut s = Sender::new(RecoveryMode::Oec);
    let p = payload(1);
    g.bench_function("frame_data", |b| {
        b.iter(|| black_box(s.frame_data(Duration::ZERO, black_box(p.clone()))))
    });

    let (s, frames) = loaded_sender();
    assert_eq!(
        horde_proto::recovery::window::degree(s.window().r()),
        19,
        "r = {}",
        s.window().r()
    );
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    g.bench_function("oec_encode", |b| {
        b.iter(|| {
            let c = s.window().code(&mut rng).expect("window holds data");
            black_box(header::encode_xor(&c.seqs, c.len_xor, &c.payload))
        })
    });

    let coded = s.window().code(&mut rng).expect("window holds data");
    let coded_frame = header::encode_xor(&coded.seqs, coded.len_xor, &coded.payload);
    let gone = coded.seqs[7];
    g.bench_function("oec_decode", |b| {
        b.iter_batched(
            || {
                let mut d = Decoder::default();
                for &seq in coded.seqs.iter().filter(|&&x| x != gone) {
                    d.on_frame(
                        Duration::ZERO,
                        header::decode(&frames[seq as usize]).unwrap(),
                    );
                }
                d
            },
            |mut d| {
                let f = header::decode(&coded_frame).unwrap();
                let out = d.on_frame(Duration::ZERO, f);
                assert_eq!(out.new.len(), 1);
                out
            },
            BatchSize::SmallInput,
        )
    });

    g.bench_function("data_receive", |b| {
        let mut d = Decoder::default();
        let mut cache = ReorderCache::new(Duration::from_millis(50));
        let mut released = Vec::new();
        let mut seq = 0u64;
        let p = payload(3);
        b.iter(|| {
            let now = Duration::from_micros(seq * 100);
            let f = Frame::Data {
                seq,
                payload: p.clone(),
            };
            for (s, p, _) in d.on_frame(now, f).new {
                cache.push(now, s, p, &mut released);
            }
            released.clear();
            seq += 1;
        })
    });

    let block_payloads: Vec<Bytes> = (0..16).map(payload).collect();
    let refs: Vec<&[u8]> = block_payloads.iter().map(|p| &p[..]).collect();
    g.throughput(Throughput::Elements(16));
    g.bench_function("rs_encode_block16", |b| {
        b.iter(|| black_box(block::encode(black_box(&refs), 16).unwrap()))
    });
    let parity = block::encode(&refs, 16).unwrap();
    let shards: std::collections::BTreeMap<u8, Bytes> = [2u8, 5, 11]
        .iter()
        .map(|&i| (i, Bytes::from(parity[usize::from(i)].clone())))
        .collect();
    let present: Vec<(usize, &Bytes)> = block_payloads
        .iter()
        .enumerate()
        .filter(|(i, _)| ![1, 8, 9].contains(i))
        .collect();
    g.throughput(Throughput::Elements(1));
    g.bench_function("rs_decode_block16", |b| {
        b.iter(|| {
            let got = block::decode(0, 16, 16, black_box(&present), &shards).unwrap();
            assert_eq!(got.len(), 3);
            got
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
