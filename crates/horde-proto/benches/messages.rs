//! Scheduling cost of the message layer with 10,000 messages queued over 8 priority levels.
//!
//! Run: `cargo bench -p horde-proto --bench messages -- --warm-up-time 1 --measurement-time 3`.
//!
//! * `pick`: one [`MessageScheduler::poll_piece`] (choose the message, cut a piece, move it
//!   in its level's EDF order). The 10,000 messages are 100 MB each, so none finishes and
//!   the queue stays at 10,000 for the whole run.
//! * `lifecycle`: one message's whole way with 10,000 others queued: submit (admission
//!   walks every queued message), its one piece, and the delivery confirmation. The
//!   queued messages have no deadline, the measured one has.
//! * `admit_deadline`: a submit with a deadline that admission refuses only after walking
//!   all 10,000 messages with deadlines, the worst case of the check.
//!
//! Besides criterion's report, each benchmark prints ns per message from a plain timed
//! loop.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use horde_proto::message::{
    ChannelEstimate, MessageConfig, MessageScheduler, MessageSpec, PRIORITY_LEVELS,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const QUEUED: usize = 10_000;

fn scheduler(size: u64, with_deadlines: bool) -> MessageScheduler {
    let now = Duration::ZERO;
    let mut sender = MessageScheduler::new(MessageConfig::default()).unwrap();
    sender
        .set_channels(
            now,
            &[ChannelEstimate {
                rate: 1e12,
                delay: Duration::from_millis(10),
                startup: None,
            }],
        )
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..QUEUED {
        let mut spec = MessageSpec::new(rng.gen_range(0..PRIORITY_LEVELS), size);
        if with_deadlines {
            spec.deadline = Some(Duration::from_secs(rng.gen_range(3600..7200)));
        }
        sender.submit(now, spec).expect("ample capacity");
    }
    sender
}

fn report(name: &str, iterations: u32, mut op: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..iterations {
        op();
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(iterations);
    println!("messages/{name}: {ns:.0} ns per message with {QUEUED} queued over {PRIORITY_LEVELS} levels");
}

fn bench(c: &mut Criterion) {
    let now = Duration::ZERO;
    let mut group = c.benchmark_group("messages");
    group.throughput(Throughput::Elements(1));

    let mut sender = scheduler(100_000_000, true);
    group.bench_function("pick", |b| {
        b.iter(|| black_box(sender.poll_piece(now, 0).unwrap()))
    });
    report("pick", 200_000, || {
        black_box(sender.poll_piece(now, 0).unwrap());
    });

    let mut sender = scheduler(100_000_000, false);
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut lifecycle = move || {
        // Level 0 with a deadline sorts before the bulk of level 0: it is the next piece out.
        let spec = MessageSpec::new(0, 1000).with_deadline(Duration::from_secs(3600));
        let id = sender.submit(now, spec).unwrap();
        let piece = sender.poll_piece(now, 0).unwrap().unwrap();
        assert_eq!(piece.message, id);
        sender.confirm_delivered(now, id).unwrap();
        while sender.poll_event().is_some() {}
        black_box(rng.gen::<u8>());
    };
    group.bench_function("lifecycle", |b| b.iter(&mut lifecycle));
    report("lifecycle", 2_000, &mut lifecycle);

    let mut sender = scheduler(1_000, true);
    let spec = MessageSpec::new(PRIORITY_LEVELS - 1, 1000).with_deadline(Duration::from_millis(1));
    group.bench_function("admit_deadline", |b| {
        b.iter(|| black_box(sender.submit(now, spec).is_err()))
    });
    report("admit_deadline", 2_000, || {
        black_box(sender.submit(now, spec).is_err());
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
