//! The bandwidth allocator (`bwAllocator`, thesis §3.2.3, Fig. 3-2): min-max fair shares.
//!
//! The printed loop hands out one unit at a time and has two defects: it never ends when
//! every request is met and bandwidth is left over, and its last pass can over-allocate.
//! This is the same policy computed exactly by water-filling: repeatedly give every
//! unsatisfied stream an equal share of what is left, capping each at its request. It ends
//! after at most one pass per stream, never hands out more than `total`, and leaves
//! nothing idle while some stream still wants more.

/// What a stream asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Demand {
    /// At most this many bytes per second.
    MaxRate(f64),
    /// As much as it can get (thesis `elastic`).
    Elastic,
}

impl Demand {
    fn cap(self) -> f64 {
        match self {
            Demand::MaxRate(r) => r.max(0.0),
            Demand::Elastic => f64::INFINITY,
        }
    }
}

/// Min-max fair allocation of `total` bytes/s over `demands`. Returns one rate per demand.
pub fn allocate(total: f64, demands: &[Demand]) -> Vec<f64> {
    let mut alloc = Vec::new();
    Allocator::default().allocate_into(total, demands, &mut alloc);
    alloc
}

/// The allocator with its working space, for callers that allocate every scheduling
/// cycle: after the first call with a given number of demands it never touches the heap.
#[derive(Debug, Default, Clone)]
pub struct Allocator {
    /// Indices of demands not yet satisfied.
    open: Vec<usize>,
}

impl Allocator {
    /// [`allocate`] into `alloc` (cleared first), one rate per demand.
    pub fn allocate_into(&mut self, total: f64, demands: &[Demand], alloc: &mut Vec<f64>) {
        alloc.clear();
        alloc.resize(demands.len(), 0.0);
        self.open.clear();
        self.open.extend(0..demands.len());
        let mut left = total.max(0.0);
        while !self.open.is_empty() && left > 0.0 {
            let share = left / self.open.len() as f64;
            // Streams whose remaining need fits in an equal share are satisfied now;
            // the rest stay open, in order.
            let before = self.open.len();
            self.open.retain(|&i| {
                let need = demands[i].cap() - alloc[i];
                if need <= share {
                    left -= need;
                    alloc[i] = demands[i].cap();
                    false
                } else {
                    true
                }
            });
            if self.open.len() == before {
                for &i in &self.open {
                    alloc[i] += share;
                }
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn even_split_when_all_want_more() {
        let a = allocate(
            300.0,
            &[Demand::Elastic, Demand::MaxRate(500.0), Demand::Elastic],
        );
        for x in a {
            assert!((x - 100.0).abs() < 1e-9);
        }
    }

    #[test]
    fn small_demand_is_met_and_rest_is_shared() {
        let a = allocate(
            300.0,
            &[Demand::MaxRate(50.0), Demand::Elastic, Demand::Elastic],
        );
        assert_eq!(a[0], 50.0);
        assert!((a[1] - 125.0).abs() < 1e-9 && (a[2] - 125.0).abs() < 1e-9);
    }

    #[test]
    fn terminates_with_spare_bandwidth() {
        // The printed loop spins forever here.
        let a = allocate(1000.0, &[Demand::MaxRate(10.0), Demand::MaxRate(20.0)]);
        assert_eq!(a, vec![10.0, 20.0]);
    }

    fn demand() -> impl Strategy<Value = Demand> {
        prop_oneof![
            Just(Demand::Elastic),
            (0.0f64..1e6).prop_map(Demand::MaxRate),
        ]
    }

    proptest! {
        #[test]
        fn never_over_allocates_nor_idles(total in 0.0f64..1e7, ds in prop::collection::vec(demand(), 0..12)) {
            let a = allocate(total, &ds);
            let sum: f64 = a.iter().sum();
            let eps = 1e-6 * total.max(1.0);
            prop_assert!(sum <= total + eps, "over-allocated {sum} > {total}");
            for (x, d) in a.iter().zip(&ds) {
                prop_assert!(*x >= 0.0 && *x <= d.cap() + eps);
            }
            // If some stream wants more, nothing is left idle.
            let unmet = a.iter().zip(&ds).any(|(x, d)| *x + eps < d.cap());
            if unmet {
                prop_assert!(sum >= total - eps, "idle {} while demand unmet", total - sum);
            }
            // Max-min: an unmet stream gets at least as much as any other stream.
            for (x, d) in a.iter().zip(&ds) {
                if *x + eps < d.cap() {
                    for y in &a {
                        prop_assert!(*y <= *x + eps);
                    }
                }
            }
        }
    }
}
