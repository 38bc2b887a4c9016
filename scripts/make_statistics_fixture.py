#!/usr/bin/python3
"""Writes tests/fixtures/statistics.json: the statistics of src/eval/statistics.h computed independently,
in Python, for the C++ tests (tests/eval/test_statistics.cpp).

    /usr/bin/python3 scripts/make_statistics_fixture.py

The resampling tests draw from hnas's random number generator (src/base/rng.cpp: xoshiro256** seeded
through splitmix64 from (seed, stream), `below` by rejection), ported here, so a fixed seed gives the
same resamples on both sides and the p-values must agree exactly.
"""
import json
import math
import os

MASK = (1 << 64) - 1
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "statistics.json")


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class Rng:
    def __init__(self, seed, stream=0):
        x = seed ^ mix64(stream ^ 0xD1B54A32D192ED03)
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & MASK
            self.s.append(mix64(x))

    def next_u64(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, bound):
        limit = MASK - MASK % bound
        while True:
            x = self.next_u64()
            if x < limit:
                return x % bound


def summary(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return {"n": n, "mean": mean, "standard_error": sd / math.sqrt(n), "min": min(values), "max": max(values)}


def effect(d):
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1)) if len(d) > 1 else 0.0
    return mean, (mean / sd if sd > 0 else 0.0)


def permutation(a, b, samples, seed):
    d = [x - y for x, y in zip(a, b)]
    observed = abs(sum(d))
    reach = observed * (1 - 1e-12) - 1e-12
    if len(d) <= 20:
        patterns = [[-x if (signs >> i) & 1 else x for i, x in enumerate(d)] for signs in range(1 << len(d))]
    else:
        rng = Rng(seed)
        patterns = [[-x if rng.below(2) else x for x in d] for _ in range(samples)]
    extreme = sum(abs(sum(p)) >= reach for p in patterns)
    mean, d_z = effect(d)
    return {"pairs": len(d), "mean_difference": mean, "effect_size": d_z, "p_value": extreme / len(patterns),
            "resamples": len(patterns)}


def bootstrap(a, b, samples, seed):
    d = [x - y for x, y in zip(a, b)]
    mean, d_z = effect(d)
    rng = Rng(seed)
    other = 0
    for _ in range(samples):
        total = sum(d[rng.below(len(d))] for _ in d)
        other += (total <= 0) if mean > 0 else (total >= 0) if mean < 0 else 1
    return {"pairs": len(d), "mean_difference": mean, "effect_size": d_z,
            "p_value": min(1.0, 2 * other / samples), "resamples": samples}


def main():
    rng = Rng(20261124, 1)
    uniform = lambda: (rng.next_u64() >> 11) / float(1 << 53)
    # ROUGE-like per-seed scores of two settings, and per-example scores of two systems on one test set.
    seeds_a = [round(30 + 2 * uniform(), 4) for _ in range(6)]
    seeds_b = [round(x - 0.4 + uniform(), 4) for x in seeds_a]
    many_a = [round(uniform(), 4) for _ in range(25)]
    many_b = [round(x - 0.11 + 0.2 * uniform(), 4) for x in many_a]
    examples_a = [round(uniform(), 4) for _ in range(40)]
    examples_b = [round(x + 0.1 * uniform() - 0.045, 4) for x in examples_a]
    cases = {
        "summary": {"values": seeds_a, "expected": summary(seeds_a)},
        "permutation_exact": {"a": seeds_a, "b": seeds_b, "samples": 0, "seed": 1,
                              "expected": permutation(seeds_a, seeds_b, 0, 1)},
        "permutation_sampled": {"a": many_a, "b": many_b, "samples": 3000, "seed": 5,
                                "expected": permutation(many_a, many_b, 3000, 5)},
        "bootstrap": {"a": examples_a, "b": examples_b, "samples": 1000, "seed": 3,
                      "expected": bootstrap(examples_a, examples_b, 1000, 3)},
    }
    with open(FIXTURE, "w") as out:
        json.dump(cases, out, indent=1)
        out.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.relpath(FIXTURE)}")


if __name__ == "__main__":
    main()
