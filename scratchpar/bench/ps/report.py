"""The parameter-server benchmark's rows: bytes, step times, staleness, time to a loss."""

from __future__ import annotations

import math
import statistics

from ...parallel import SyncParameterServer
from ...parallel.description import Message, Shape
from ...parallel.ps.protocol import Header

HEADER_BYTES = Header.buffer().nbytes  # 10 float64s with every step and with the leave
LEVELS = (0.5, 0.8, 0.95)  # loss levels: this share of the way to the best final held-out loss


def protocol_bytes(k: int, itemsize: int, servers: int, workers: int, steps: int) -> list[int]:
    """Bytes each server receives and sends when every worker pushes and pulls every step:
    ``steps`` times its description's messages to the workers, then each worker's leave."""
    shape = Shape(k, itemsize, 0, k, 1)
    return [round(steps * sum(m.nbytes * m.count for m in SyncParameterServer.describe(
                shape, servers + workers, servers, server=s).sends if m.axis == "workers"))
            + workers * HEADER_BYTES for s in range(servers)]


def ring_formula(k: int, itemsize: int, p: int) -> float:
    """Bytes a rank sends and receives in a ring all-reduce of k elements, each way the
    all-reduce's wire bytes (:meth:`~scratchpar.parallel.description.Message.wire`)."""
    return 2 * Message("all-reduce", "dp", k * itemsize, 1).wire(p)


def bottleneck_rows(results: dict, steps: int) -> list[dict]:
    """Per job and server count: the busiest server's bytes beside the protocol's, and a rank's
    bytes in the ring all-reduce of the same K gradients over the same ranks."""
    rows = []
    for n, r in results.items():
        k, itemsize = r["parameters"], r["itemsize"]
        ring = max(x["sent"] + x["received"] for x in r["ring"])
        for s, family in r["family"].items():
            s, report = int(s), family["report"]
            measured, formula = report["bytes"], protocol_bytes(k, itemsize, int(s), n - s, steps)
            busiest = max(range(s), key=lambda i: measured[i])
            rows.append({"ranks": n, "servers": s, "workers": n - s, "parameters": k,
                         "server_bytes": measured[busiest], "protocol_bytes": formula[busiest],
                         "server_mb_step": measured[busiest] / steps / 1e6,
                         "protocol_mb_step": formula[busiest] / steps / 1e6,
                         "ring_bytes": ring, "ring_formula": round(ring_formula(k, itemsize, n)),
                         "ring_mb_step": ring / 1e6, "ratio": measured[busiest] / steps / ring,
                         "busy": max(report["busy"]), "pushes": report["pushes"],
                         "bytes": measured, "protocol": formula})
    return rows


def speed_rows(results: dict, steps: int) -> list[dict]:
    """Per job: ms per step of each contender in turns, and of the family's server at τ = 0
    back to back; × dp = DataParallel's time over the contender's."""
    rows = []
    for n, r in results.items():
        times = {name: t["median_s"] for name, t in r["timed"].items()}
        times.update({f"ssp τ=0 S={s}": f["seconds"] / steps for s, f in r["family"].items()})
        for name, seconds in times.items():
            s = int(name.rsplit("=", 1)[1]) if "S=" in name else 0
            rows.append({"ranks": n, "contender": name, "servers": s or None,
                         "workers": n - s, "ms": 1e3 * seconds, "steps_per_s": 1 / seconds,
                         "vs_dp": times["dp"] / seconds})
    return rows


def speed(rank: dict) -> float:
    """A worker's steps per second, from the aligned start to its last step."""
    return len(rank["ends_s"]) / rank["ends_s"][-1]


def staleness(report: dict) -> tuple[dict[int, int], float, int]:
    """Server 0's histogram {staleness: pushes}, its mean and its max."""
    hist = {int(s): n for s, n in report["staleness_histogram"].items()}
    return hist, sum(s * n for s, n in hist.items()) / max(sum(hist.values()), 1), \
        max(hist, default=0)


def staleness_rows(runs: dict, names: dict) -> list[dict]:
    """Per contender: updates, pushes applied and sent, their staleness from server 0's report,
    the server's busy fraction and the run's length."""
    rows = []
    for key, ranks in runs.items():
        report, seconds = ranks[0]["report"], max(r["ends_s"][-1] for r in ranks)
        hist, mean, most = staleness(report)
        rows.append({"contender": names[key], "key": key, "updates": report["version"],
                     "pushes": report["pushes"],
                     "sent": sum(len(r["ends_s"]) for r in ranks if r["worker"] is not None),
                     "mean": mean, "max": most,
                     "histogram": " ".join(f"{s}:{n}" for s, n in sorted(hist.items())),
                     "staleness_histogram": hist, "busy": max(report["busy"]), "seconds": seconds,
                     "updates_per_s": report["version"] / seconds})
    return rows


def worker_rows(runs: dict, names: dict) -> list[dict]:
    """Per contender and worker: steps per second, the mean wait per step for the pull
    (``wait_s``), and the share of its run spent waiting."""
    rows = []
    for key, ranks in runs.items():
        for r in (r for r in ranks if r["worker"] is not None):
            waits = r["metrics"].get("wait_s", [])
            rows.append({"contender": names[key], "worker": r["worker"], "rank": r["rank"],
                         "slowed": r["slowed"], "steps_per_s": speed(r),
                         "wait_ms": 1e3 * statistics.mean(waits) if waits else None,
                         "wait_share": sum(waits) / r["ends_s"][-1] if waits else None})
    return rows


def curve(run: dict, steps: int) -> list[tuple[float, float]]:
    """(seconds from the aligned start, held-out loss) at each of server 0's evaluations."""
    server = run["ranks"][0]
    return [(server["ends_s"][k] if k < steps else server["done_s"], loss)
            for k, loss in run["evals"]]


def training_curve(run: dict) -> list[tuple[float, float]]:
    """(seconds, server 0's loss of that clock over every worker's units) per step."""
    server = run["ranks"][0]
    return [(t, loss) for t, loss in zip(server["ends_s"], server["metrics"]["loss"])
            if not math.isnan(loss)]


def run_seconds(run: dict) -> float:
    """From the aligned start to the last worker's last step."""
    return max(r["ends_s"][-1] for r in run["ranks"] if r["worker"] is not None)


def fastest(runs: dict) -> dict:
    """Each contender's shortest run of its rounds: the one least disturbed by other load."""
    return {key: min(rounds, key=run_seconds) for key, rounds in runs.items()}


def loss_levels(runs: dict, initial: float, steps: int) -> list[float]:
    """The initial held-out loss minus each share in LEVELS of the best final drop."""
    best = min(curve(run, steps)[-1][1] for run in runs.values())
    return [initial - q * (initial - best) for q in LEVELS]


def loss_rows(runs: dict, levels: list[float], steps: int, names: dict) -> list[dict]:
    """Per contender's run: updates applied, its length, the final held-out loss, the seconds
    to each level, the staleness, each worker's steps/s."""
    rows = []
    for key, run in runs.items():
        points, report = curve(run, steps), run["ranks"][0]["report"]
        workers = [r for r in run["ranks"] if r["worker"] is not None]
        _, mean, most = staleness(report) if report else (None, None, None)
        rows.append({"contender": names[key], "updates": report["version"] if report else steps,
                     "seconds": run_seconds(run), "final": points[-1][1],
                     "stale_mean": mean, "stale_max": most,
                     "slowed_steps_per_s": next(speed(r) for r in workers if r["slowed"]),
                     "other_steps_per_s": statistics.mean(speed(r) for r in workers
                                                          if not r["slowed"]),
                     **{f"level{i}": next((t for t, loss in points if loss <= level), None)
                        for i, level in enumerate(levels)}})
    return rows
