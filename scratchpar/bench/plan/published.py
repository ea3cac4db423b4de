"""``bench plan --published``: the planner's step of each published run (plan/published.py)
beside its paper's, on the shipped profiles' kernel constants, fitted on one row."""

from __future__ import annotations

from ...jobs.harness import judge
from ...plan import published
from ...plan.__main__ import PROFILES
from ...plan.profile import load
from ...table import table

TARGETS = {"median": 0.10, "worst": 0.20}  # |error| over the rows not fitted on


def rows() -> list[dict]:
    """Every published run, predicted on its profile; its error, predicted / given − 1."""
    profiles, found = {}, []
    for run in published.runs():
        profile = profiles.setdefault(run.profile, load(PROFILES / f"{run.profile}.toml"))
        seconds = published.predicted(run, profile)
        found.append({"source": run.source, "run": run.name, "GPUs": run.gpus,
                      "profile": run.profile, "given": run.given, "step s": run.seconds,
                      "predicted s": seconds, "error": seconds / run.seconds - 1,
                      "fitted": "n½ fitted here" if run.name == published.FITTED else ""})
    return found


def measure(args) -> dict:
    found = rows()
    kernels = {name: load(PROFILES / f"{name}.toml").kernels for name in ("dgx-a100",
                                                                          "dgx-h100")}
    constants = "; ".join(f"{name}: {k.kind}, η {k.efficiency:g}, n½ {k.half_size:g}, launch "
                          f"{k.launch_s * 1e6:g} µs" for name, k in kernels.items())
    print(table(f"published runs, each predicted from its flags ({constants})", found,
                formats={"step s": ".2f", "predicted s": ".2f", "error": "+.1%"}))
    summary = published.errors(found, published.FITTED)
    verdicts = [{"target": f"{key} |error| ≤ {bound:.0%}", "measured": summary[key],
                 "verdict": judge(args.device, summary[key], at_most=bound)}
                for key, bound in TARGETS.items()]
    print(table(f"errors over the {summary['rows']} rows not fitted on", verdicts,
                formats={"measured": ".1%"}))
    return {"rows": found, "summary": summary, "fitted": published.FITTED,
            "kernels": {name: vars(k) for name, k in kernels.items()}}
