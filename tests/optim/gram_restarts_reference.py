"""The Gram Newton-Schulz restart analysis of optim/muon.h (gram_restarts), written again in plain
Python from its description, independently of src/optim/ns_schedule.cpp: the expected restart sets
of tests/optim/ns_forms_test.cpp come from running this file.

    /usr/bin/python3 tests/optim/gram_restarts_reference.py

The model (Dao-AILab's analysis, docs/optimizers.md): one singular value x of the normalised
input, its Gram eigenvalue x^2 shifted by a spurious -u (u: 2^-8 for bf16 products, 2^-24 for
fp32); per iteration z = a + b r + c r^2, q <- q z, r <- r z^2; a restart sets x <- q x,
r <- x^2 - u, q <- 1. x runs over 2000 log-spaced points from 1 down to 1e-10. Chosen: the fewest
restarts (at least one from 3 iterations on) whose best positions keep u max |q| <= 1/8 (the
rounding error Q carries into X = Q X), the first best combination in lexicographic order; none
when no count up to steps - 1 does.
"""
import itertools
import math

SETS = {
    "simple": [(3.4445, -4.7750, 2.0315)],
    "quintic": [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
                (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)],
    "polar_express": [(8.2051, -22.9019, 16.4607), (4.0664, -2.8612, 0.5184),
                      (3.9096, -2.8234, 0.5250), (3.2856, -2.4153, 0.4853),
                      (2.2779, -1.6198, 0.3985), (1.8726, -1.2307, 0.3585),
                      (1.8564, -1.2132, 0.3568), (1.8750, -1.2500, 0.3750)],
}


def f32(v):  # the tables are float in C++; the analysis widens them to double
    import struct
    return struct.unpack("f", struct.pack("f", v))[0]


GRID = [10.0 ** (-10.0 * k / 1999) for k in range(2000)]


def max_q(triples, steps, delta, restarts):
    worst = 0.0
    for x0 in GRID:
        x, q, r = x0, 1.0, x0 * x0 - delta
        for i in range(steps):
            if i in restarts:
                x = q * x
                r = x * x - delta
                q = 1.0
            a, b, c = (f32(v) for v in triples[min(i, len(triples) - 1)])
            z = c * r * r + b * r + a
            q *= z
            r *= z * z
            if not math.isfinite(q) or abs(q) > 1e300 or not math.isfinite(r):
                return math.inf
            worst = max(worst, abs(q))
    return worst


def restarts_for(name, steps, dtype):
    triples = SETS[name]
    delta = 2.0 ** -8 if dtype == "bf16" else 2.0 ** -24
    bound = 0.125 / delta  # Q's rounding error, u max |q|, at most 1/8
    for count in range(1 if steps >= 3 else 0, steps):
        best = None
        for combo in itertools.combinations(range(1, steps), count):
            m = max_q(triples, steps, delta, set(combo))
            if best is None or m < best[0]:
                best = (m, list(combo))
        if best[0] <= bound:
            return best[1]
    return None


if __name__ == "__main__":
    for name, steps in [("simple", 5), ("quintic", 5), ("polar_express", 8), ("simple", 3),
                        ("simple", 2), ("simple", 8)]:
        for dtype in ("fp32", "bf16"):
            print(f"{name} x {steps} {dtype}: {restarts_for(name, steps, dtype)}")
