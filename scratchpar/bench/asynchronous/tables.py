"""The asynchronous benchmark's printed tables, each titled with what it measured and how."""

from __future__ import annotations

from ..harness import judged
from ..table import table
from . import report


def digits(rows: list[dict], places: dict[str, int]) -> list[dict]:
    """``rows`` with the numbers under ``places``'s keys as text of that many decimals (the
    tables' default is two, too few for a loss near its floor or a rare collision)."""
    return [{**r, **{k: None if r[k] is None else f"{r[k]:.{n}f}" for k, n in places.items()}}
            for r in rows]


def print_hogwild(rows: dict, cfg: dict, device: str) -> None:
    rates = ", ".join(f"{p} η = {c['lr']}" for p, c in cfg["problems"].items())
    print(table(f"1. Hogwild against serial SGD: {cfg['updates']} updates of b = {cfg['batch']} "
                "samples, the same samples for every contender (at P processes worker r makes "
                "updates r, r + P, …; every update a plain SGD step γ = η on its samples); "
                f"{rates}; each contender's median round of {cfg['rounds']} by seconds (rounds "
                "in alternating order; spread = its rounds' fastest–slowest); ranks s = each "
                "process's own seconds in that round; × 1 proc = Hogwild "
                "×1's seconds / the contender's in the same round, the median over rounds "
                "(Hogwild at 1 process is serial SGD, bit for bit, with sparse reads and "
                "writes), × serial loop likewise against the plain loop (dense SGD steps, no "
                f"shared memory); target = initial held-out loss − {report.LEVEL:.0%} of "
                "serial SGD's drop, s to target = the first copy of θ at or below it (rank 0 "
                f"copies θ {cfg['snapshots']} times a run), × 1 proc there likewise",
                digits(rows["hogwild"], {"final": 4, "level": 4}),
                {"problem": "problem", "contender": "contender", "P": "processes",
                 "updates": "updates", "run s": "seconds", "spread": "spread",
                 "ranks s": "per_rank",
                 "updates/s": "updates_per_s", "samples/s": "samples_per_s",
                 "× 1 proc": "vs_one", "× serial loop": "vs_loop", "final held-out": "final",
                 "target": "level", "s to target": "to_level",
                 "× 1 proc to target": "level_vs_one"}))
    v = rows["verdict"]
    speedups = ", ".join(f"{p} {s:.2f}×" for p, s in v["speedups"].items())
    loop = ", ".join(f"{p} {s:.2f}×" for p, s in v["over_loop"].items())
    met = f"{'met' if v['met'] else 'not met'} ({speedups}; over the plain serial loop {loop})"
    print(f"\ntarget (docs/hogwild.md): Hogwild ×2 ≥ {v['target']}× Hogwild ×1 (serial SGD) on "
          f"a sparse problem: {judged(device, met)}")


def print_collisions(rows: dict) -> None:
    print(table("2. colliding writes of lock-free Hogwild (instrumented, untimed, the same "
                "samples): a row is an index of a parameter's first axis (a feature's weight, "
                "a user's or item's factors, a layer's input row), the unit a write touches; a "
                "write collides if, for at least one row it writes, another worker finished a "
                "write to that row after this worker read the row and before it began its own "
                "write (so its step was computed on overwritten values, and two unlocked "
                "read–modify–writes may interleave and lose one); colliding writes = their "
                "share of all writes; coordinates = parameters written per write; colliding "
                "coordinates = the share of them in colliding rows, over all and per parameter",
                digits(rows["collisions"], {"colliding": 3, "colliding_coordinates": 3}),
                {"problem": "problem", "P": "processes", "writes": "writes",
                 "colliding writes": "colliding", "coordinates/write": "coordinates",
                 "colliding coordinates": "colliding_coordinates",
                 "per parameter": "parameters"}))


def print_tau(rows: dict, cfg: dict, parts: dict) -> None:
    w = cfg["workers"]
    print(table(f"3. asynchronous EASGD against Downpour as the communication period τ grows: "
                f"1 master + {w} workers, {cfg['steps']} steps each on b = {cfg['batch']} "
                f"samples of the dense MLP's problem, plain SGD at η = {cfg['lr']} for both; "
                f"EASGD exchanges every τ steps with α = ηρ = β/{w}, β = {cfg['beta']} "
                "(Zhang et al. 2015, §5); Downpour pushes its summed gradients and fetches "
                "every τ steps (n_push = n_fetch = τ, Dean et al. 2012); held-out loss of the "
                "master's parameters (EASGD's centre, Downpour's server) after the shutdown; "
                "peak = the highest after the start; stable = finite and never above the "
                "initial loss; exchanges / pushes = those the master served",
                digits(rows["tau"], {f"{m}_{k}": 3 for m in ("easgd", "downpour")
                                     for k in ("final", "peak")}),
                {"τ": "tau", "EASGD final": "easgd_final", "EASGD peak": "easgd_peak",
                 "EASGD stable": "easgd_stable", "exchanges": "easgd_exchanges",
                 "Downpour final": "downpour_final", "Downpour peak": "downpour_peak",
                 "Downpour stable": "downpour_stable", "pushes": "downpour_exchanges",
                 "Downpour / EASGD": "ratio"}))
    initial = parts["runs"][f"easgd {cfg['taus'][0]}"]["curve"][0][1]
    print(f"\nstability: initial held-out loss {initial:.3f}; from τ = {cfg['taus'][0]} to τ = "
          f"{cfg['taus'][-1]} EASGD's final loss changes ×{report.drift(rows['tau'], 'easgd'):.2f}"
          f", Downpour's ×{report.drift(rows['tau'], 'downpour'):.2f}")


def print_round_robin(rows: dict, cfg: dict) -> None:
    p = cfg["problem"]
    print(table(f"4. round-robin EASGD's master as the workers G grow: {cfg['steps']} steps, "
                f"each worker t mod G's on b = {cfg['batch']} samples of the MLP "
                f"{'→'.join(map(str, [p['n_features'], *p['hidden'], p['n_classes']]))}; compute "
                "real (the MLP) or stand-in (a sleep of its calibrated time); the master's wall "
                "time from a barrier to its last step, split into pack (samples and centre to "
                "host arrays, posted), wait (until the worker's weights and report are in: its "
                "compute and the messages), update (eq. 4 with one worker) and other (its "
                "loop); busy = pack + update", rows["round_robin"],
                {"G": "workers", "compute": "compute", "ranks": "ranks", "steps": "steps",
                 "steps/s": "steps_per_s", "ms/step": "ms", "busy": "busy", "pack": "pack",
                 "update": "update", "wait": "wait", "other": "other"}))


def print_tables(rows: dict, cfgs: dict, parts: dict, device: str) -> None:
    print_hogwild(rows, cfgs["hogwild"], device)
    print_collisions(rows)
    print_tau(rows, cfgs["tau"], parts["tau"])
    print_round_robin(rows, cfgs["round_robin"])
