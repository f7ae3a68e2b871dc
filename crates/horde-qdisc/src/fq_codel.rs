//! fq_codel (RFC 8290): flows hashed into queues, served by deficit round robin with a
//! list of new flows served ahead of the old ones, CoDel on each queue, and on overflow a
//! drop from the head of the queue holding the most bytes.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use crate::codel::{Codel, CodelParams};
use crate::heap::{IndexedHeap, Order};
use crate::{FlowKey, Limit, Packet, Qdisc, QdiscError};

/// fq_codel configuration; the defaults are RFC 8290's (and Linux's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// Capacity (10,240 packets and 32 MiB).
    pub limit: Limit,
    /// Number of flow queues flows are hashed into (1024).
    pub flows: usize,
    /// Bytes a queue may send per round (1514).
    pub quantum: u32,
    /// CoDel on each queue (5 ms, 100 ms).
    pub codel: CodelParams,
    /// Perturbs the flow hash.
    pub hash_seed: u64,
}

impl Default for FqCodelConfig {
    fn default() -> FqCodelConfig {
        FqCodelConfig {
            limit: Limit {
                packets: Some(10_240),
                bytes: Some(32 << 20),
            },
            flows: 1024,
            quantum: 1514,
            codel: CodelParams::default(),
            hash_seed: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    New,
    Old,
}

#[derive(Debug)]
struct FlowQueue<T> {
    queue: VecDeque<Packet<T>>,
    bytes: u64,
    deficit: i64,
    list: Option<List>,
    codel: Codel,
}

/// The fq_codel queue discipline.
#[derive(Debug)]
pub struct FqCodel<T> {
    config: FqCodelConfig,
    queues: Vec<FlowQueue<T>>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    /// Non-empty queues by bytes, largest on top: the overflow victim without a scan.
    fattest: IndexedHeap,
    len: usize,
    bytes: u64,
}

impl<T> FqCodel<T> {
    /// An fq_codel queue per `config`.
    pub fn new(config: FqCodelConfig) -> Result<FqCodel<T>, QdiscError> {
        config.limit.validate("fq_codel limit", 1)?;
        config.codel.validate()?;
        if config.flows == 0 || config.flows > 1 << 20 {
            return Err(QdiscError::invalid(
                "fq_codel flows",
                "between 1 and 1048576",
                config.flows,
            ));
        }
        if config.quantum == 0 {
            return Err(QdiscError::invalid("fq_codel quantum", "positive", 0));
        }
        let queues = (0..config.flows)
            .map(|_| FlowQueue {
                queue: VecDeque::new(),
                bytes: 0,
                deficit: 0,
                list: None,
                codel: Codel::default(),
            })
            .collect();
        Ok(FqCodel {
            config,
            queues,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            fattest: IndexedHeap::new(Order::Max),
            len: 0,
            bytes: 0,
        })
    }

    /// The queue `flow` is hashed into.
    pub fn queue_of(&self, flow: &FlowKey) -> usize {
        let mut h = DefaultHasher::new();
        self.config.hash_seed.hash(&mut h);
        flow.hash(&mut h);
        (h.finish() % self.config.flows as u64) as usize
    }

    /// Puts queue `q`'s byte count back into the fattest-queue heap after a change.
    fn track_size(&mut self, q: u32) {
        let bytes = self.queues[q as usize].bytes;
        if bytes == 0 {
            self.fattest.remove(q);
        } else if self.fattest.contains(q) {
            self.fattest.update(q, i128::from(bytes));
        } else {
            self.fattest.push(i128::from(bytes), u64::from(q), q);
        }
    }

    fn drop_from_fattest(&mut self, drops: &mut Vec<Packet<T>>) {
        let Some(q) = self.fattest.peek().map(|e| e.slot) else {
            return;
        };
        let fq = &mut self.queues[q as usize];
        let packet = fq.queue.pop_front().expect("a non-empty queue");
        fq.bytes -= u64::from(packet.len);
        self.len -= 1;
        self.bytes -= u64::from(packet.len);
        drops.push(packet);
        self.track_size(q);
    }

    fn pop_list(&mut self, list: List) {
        match list {
            List::New => self.new_flows.pop_front(),
            List::Old => self.old_flows.pop_front(),
        };
    }
}

impl<T> Qdisc<T> for FqCodel<T> {
    fn enqueue(&mut self, packet: Packet<T>, drops: &mut Vec<Packet<T>>) {
        let q = self.queue_of(&packet.flow) as u32;
        let len = u64::from(packet.len);
        let fq = &mut self.queues[q as usize];
        fq.queue.push_back(packet);
        fq.bytes += len;
        if fq.list.is_none() {
            fq.list = Some(List::New);
            fq.deficit = i64::from(self.config.quantum);
            self.new_flows.push_back(q);
        }
        self.len += 1;
        self.bytes += len;
        self.track_size(q);
        while self.len > 0 && !self.config.limit.holds(self.len, self.bytes) {
            self.drop_from_fattest(drops);
        }
    }

    fn dequeue(&mut self, now: Duration, drops: &mut Vec<Packet<T>>) -> Option<Packet<T>> {
        loop {
            let (q, list) = if let Some(&q) = self.new_flows.front() {
                (q, List::New)
            } else if let Some(&q) = self.old_flows.front() {
                (q, List::Old)
            } else {
                return None;
            };
            let fq = &mut self.queues[q as usize];
            if fq.deficit <= 0 {
                fq.deficit += i64::from(self.config.quantum);
                fq.list = Some(List::Old);
                self.pop_list(list);
                self.old_flows.push_back(q);
                continue;
            }
            let dropped_before = drops.len();
            let packet =
                fq.codel
                    .dequeue(&self.config.codel, &mut fq.queue, &mut fq.bytes, now, drops);
            for d in &drops[dropped_before..] {
                self.len -= 1;
                self.bytes -= u64::from(d.len);
            }
            match packet {
                None => {
                    // An empty new queue goes behind the old ones (so it cannot jump the
                    // line again at once); an empty old queue leaves the schedule.
                    self.pop_list(list);
                    let fq = &mut self.queues[q as usize];
                    if list == List::New && !self.old_flows.is_empty() {
                        fq.list = Some(List::Old);
                        self.old_flows.push_back(q);
                    } else {
                        fq.list = None;
                    }
                    self.track_size(q);
                }
                Some(packet) => {
                    fq.deficit -= i64::from(packet.len);
                    self.len -= 1;
                    self.bytes -= u64::from(packet.len);
                    self.track_size(q);
                    return Some(packet);
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }
}
