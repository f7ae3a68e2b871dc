#!/usr/bin/env python3
"""Fit a per-packet Gilbert-Elliott chain (loss-free good state) to the PluriBus paper's
loss statistics: the fraction of 5 s intervals of 100 ms probes with any loss, with more
than 10% loss, and the mean loss (docs/pluribus.md, "Loss").

  python3 scripts/pluribus_loss_fit.py fit LOSSY OVER10 MEAN     # e.g. fit 0.5 0.15 0.05
  python3 scripts/pluribus_loss_fit.py check P_GB P_BG LOSS_IN_BAD
"""
import random
import sys

PROBES_PER_INTERVAL = 50  # 5 s of 100 ms probes
INTERVALS = 3000


def interval_stats(p_gb, p_bg, loss_in_bad, seed=1):
    """(lossy intervals, intervals above 10%, mean loss) of the chain, simulated."""
    rng = random.Random(seed)
    bad = rng.random() < p_gb / (p_gb + p_bg)
    lossy = over = lost = 0
    for _ in range(INTERVALS):
        n = 0
        for _ in range(PROBES_PER_INTERVAL):
            bad = rng.random() >= p_bg if bad else rng.random() < p_gb
            if bad and rng.random() < loss_in_bad:
                n += 1
        lost += n
        lossy += n > 0
        over += n > 0.1 * PROBES_PER_INTERVAL
    return lossy / INTERVALS, over / INTERVALS, lost / (INTERVALS * PROBES_PER_INTERVAL)


def fit(lossy, over, mean):
    """Grid over p(bad->good) and bad-state loss; p(good->bad) gives the mean."""
    rows = []
    for p_bg in [0.25, 0.1, 0.05, 0.04, 0.03, 0.02, 0.015, 0.01]:
        for lb in [0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8]:
            pi_bad = mean / lb
            if pi_bad >= 1:
                continue
            p_gb = pi_bad * p_bg / (1 - pi_bad)
            a, o, m = interval_stats(p_gb, p_bg, lb)
            err = abs(a - lossy) / lossy + abs(o - over) / over + abs(m - mean) / mean
            rows.append((err, p_gb, p_bg, lb, a, o, m))
    rows.sort()
    print("error  p_gb     p_bg   loss_in_bad  lossy  over10  mean")
    for r in rows[:5]:
        print("%.3f  %.5f  %.3f  %.2f         %.3f  %.3f   %.4f" % r)


def main(argv):
    if len(argv) == 5 and argv[1] in ("fit", "check"):
        args = [float(x) for x in argv[2:]]
        if argv[1] == "fit":
            fit(*args)
        else:
            a, o, m = interval_stats(*args)
            pi = args[0] / (args[0] + args[1])
            print("lossy %.3f  over10 %.3f  mean %.4f (stationary %.4f)" % (a, o, m, pi * args[2]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
