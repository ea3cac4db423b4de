"""What the collectives benchmark concludes: bandwidths, α-β fits, the crossover, the targets."""

from __future__ import annotations

from ...comm.doubling import power_of_two
from ...jobs.harness import verdict
from ...parallel.description import Message
from ...plan.fit import alpha_beta

MIB = 1024 * 1024
MPI_OWN = ("mpi", "mpi-ring")
RATIO_TARGETS = [  # docs/collectives.md: (contender, limit on time / MPI's default, sizes)
    ("ring", 0.9, lambda size: size >= MIB, ">= 1 MiB"),
    ("auto", 1.3, lambda size: size <= 64 * 1024, "<= 64 KiB"),
]
BUSBW_OF_MEMCPY = 0.5


def algbw(nbytes: float, seconds: float) -> float:
    """Algorithmic bandwidth in bytes/s: the buffer's size over the time the all-reduce took."""
    return nbytes / seconds


def busbw(nbytes: float, seconds: float, p: int) -> float:
    """Bus bandwidth: what each link carries in an optimal all-reduce, algbw·2(p−1)/p (NCCL's
    convention, nccl-tests doc/PERFORMANCE.md), comparable across world sizes."""
    return ring_terms(nbytes, p)[1] / seconds


def ring_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of a ring all-reduce: t = 2(p−1)·α + 2(p−1)/p·N·β
    (Patarasuk & Yuan 2009, reduce-scatter then all-gather)."""
    return 2 * (p - 1), Message("all-reduce", "world", nbytes, 1).wire(p)


def doubling_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of recursive doubling: t = ⌈log₂p⌉(α + N·β) for p a power of two; other p
    add a fold and an unfold of the whole buffer (Thakur, Rabenseifner & Gropp 2005, §4.1)."""
    steps = (p.bit_length() - 1) + (0 if p & (p - 1) == 0 else 2)
    return steps, steps * nbytes


def rabenseifner_terms(nbytes: float, p: int) -> tuple[float, float]:
    """(messages, bytes) of Rabenseifner's all-reduce: t = 2·log₂p·α + 2(p−1)/p·N·β for p a power
    of two; other p add the fold and unfold (Thakur, Rabenseifner & Gropp 2005, §4.4)."""
    pof2 = power_of_two(p)
    folds = 0 if p == pof2 else 2
    return 2 * (pof2.bit_length() - 1) + folds, ring_terms(nbytes, pof2)[1] + folds * nbytes


MODELS = [("ring", ring_terms), ("recursive_doubling", doubling_terms),
          ("rabenseifner", rabenseifner_terms)]


def fits(results: dict, sizes: list[int]) -> list[dict]:
    """α and β of each hand-written algorithm's cost model, per world size; none from one size,
    which cannot tell the two apart."""
    if len(sizes) < 2:
        return []
    return [{"n": n, "model": name, **alpha_beta([terms(size, n) for size in sizes],
                                                 [res["times"][name][size] for size in sizes])}
            for n, res in results.items() for name, terms in MODELS]


def crossovers(results: dict, sizes: list[int]) -> list[dict]:
    """Per world size: the largest size where recursive doubling beats the ring, and the sizes
    where one of MPI's own all-reduces beats every hand-written one ("never": none)."""
    rows = []
    for n, res in results.items():
        t = res["times"]
        wins = [s for s in sizes if t["recursive_doubling"][s] < t["ring"][s]]
        mpi = [s for s in sizes if min(t[m][s] for m in MPI_OWN)
               < min(t[h][s] for h in t if h not in MPI_OWN)]
        rows.append({"n": n, "recursive doubling beats ring up to":
                     human(max(wins)) if wins else "never",
                     "MPI's own fastest at": ", ".join(map(human, mpi)) or "never"})
    return rows


def targets(results: dict, sizes: list[int], memcpy_bytes_per_s: float, device: str) -> list[dict]:
    """Per world size: the worst time / MPI's default over the sizes each ratio target covers,
    and the ring's bus bandwidth at the largest size over memcpy's; each with its verdict."""
    found = []  # (target, measured, at, met)
    for n, res in results.items():
        t, largest = res["times"], sizes[-1]
        for name, limit, covers, where in RATIO_TARGETS:
            ratios = {s: t[name][s] / t["mpi"][s] for s in sizes if covers(s)}
            worst = max(ratios, key=ratios.get, default=None)  # None: no size in range
            ratio = ratios.get(worst)
            found.append((f"n={n}: {name} <= {limit:.2f}x MPI default at {where}", ratio, worst,
                          None if ratio is None else ratio <= limit))
        share = busbw(largest, t["ring"][largest], n) / memcpy_bytes_per_s
        found.append((f"n={n}: ring bus bw >= {BUSBW_OF_MEMCPY:.2f}x memcpy bw", share, largest,
                      share >= BUSBW_OF_MEMCPY))
    missing = "n/a (double)" if device == "double" else "n/a (no size in range)"
    return [{"target": target, "measured": measured, "at": human(at),
             "verdict": verdict(device, met, missing)} for target, measured, at, met in found]


def human(nbytes: int | None) -> str:
    """4096 → '4 KiB', 67108864 → '64 MiB'; None → '-'."""
    if nbytes is None:
        return "-"
    for unit, scale in (("MiB", MIB), ("KiB", 1024)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"
