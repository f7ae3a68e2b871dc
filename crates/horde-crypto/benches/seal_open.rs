//! Seal and open throughput for 1200-byte packets (a typical Horde datagram payload), and
//! the raw AEADs `ring` offers for the transport (`aead/*`: seal + open in place, no
//! session), so the cipher choice can be re-checked on any machine.
//!
//! Run: `cargo bench -p horde-crypto --bench seal_open`. Criterion prints packets/s for the
//! `packets` group and bytes/s for the `bytes` group (multiply GiB/s by 8.59 for Gbit/s).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use horde_crypto::{Initiator, Keypair, Reply, Responder, Session};
use rand::rngs::StdRng;
use rand::SeedableRng;

const PACKET: usize = 1200;

fn sessions() -> (Session, Session) {
    let mut rng = StdRng::seed_from_u64(1);
    let client = Keypair::generate_with(&mut rng);
    let server = Keypair::generate_with(&mut rng);
    let mut responder = Responder::new(server, [*client.public()]);
    let mut init = Initiator::new(&client, responder.public(), 1, 1, &mut rng);
    let Ok(Reply::NewSession {
        response, session, ..
    }) = responder.respond(init.initiation(), 2, &mut rng)
    else {
        panic!("handshake failed")
    };
    (
        init.read_response(&response).expect("handshake failed"),
        *session,
    )
}

fn bench(c: &mut Criterion) {
    let plaintext = vec![0x5Au8; PACKET];
    for (group_name, throughput) in [
        ("packets", Throughput::Elements(1)),
        ("bytes", Throughput::Bytes(PACKET as u64)),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(throughput);

        let (mut tx, mut rx) = sessions();
        let (mut datagram, mut out) = (Vec::with_capacity(2048), Vec::with_capacity(2048));
        group.bench_function("seal_open_1200", |b| {
            b.iter(|| {
                tx.seal(3, black_box(&plaintext), &mut datagram)
                    .expect("seal");
                let (channel, pt) = rx.open(black_box(&datagram), &mut out).expect("open");
                black_box((channel, pt.len()));
            })
        });

        let (mut tx, _) = sessions();
        group.bench_function("seal_1200", |b| {
            b.iter(|| {
                tx.seal(3, black_box(&plaintext), &mut datagram)
                    .expect("seal");
                black_box(datagram.len());
            })
        });
        group.finish();
    }
}

/// Seal then open 1200 bytes in place with `ring`'s raw AEAD: the cipher's own cost.
fn raw_aead(c: &mut Criterion) {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305};
    let mut group = c.benchmark_group("aead");
    group.throughput(Throughput::Elements(1));
    for (name, alg) in [
        ("chacha20_poly1305_1200", &CHACHA20_POLY1305),
        ("aes_256_gcm_1200", &AES_256_GCM),
    ] {
        let key = LessSafeKey::new(UnboundKey::new(alg, &[7u8; 32]).expect("key"));
        let mut buf = vec![0x5Au8; PACKET];
        let mut counter = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| {
                counter += 1;
                let mut n = [0u8; 12];
                n[4..].copy_from_slice(&counter.to_le_bytes());
                let tag = key
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(n),
                        Aad::empty(),
                        &mut buf,
                    )
                    .expect("seal");
                key.open_in_place_separate_tag(
                    Nonce::assume_unique_for_key(n),
                    Aad::empty(),
                    tag,
                    &mut buf,
                    0..,
                )
                .expect("open");
                black_box(buf[0]);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, raw_aead);
criterion_main!(benches);
