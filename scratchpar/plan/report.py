"""What calibration prints: each constant, the fit behind it and how well it fits."""

from __future__ import annotations


def table(profile, found: dict) -> str:
    """The profile's constants, one line each, with the sizes and residual of their fits."""
    lines = [f"{profile.name}", f"{profile.source}", ""]
    for name in ("node", "network"):
        fit = found[name]
        if fit is None:
            lines.append(f"{name:8} not measured: every rank is on one node")
            continue
        how = ("read off the ends (the fit gave a coefficient ≤ 0)" if fit.get("read_off_the_ends")
               else f"fitted, rms relative residual {100 * fit['rms_rel_residual']:.1f}%")
        lines.append(f"{name:8} rank 0 ↔ rank {fit['peer']}: α {1e6 * fit['alpha_s']:.2f} µs, "
                     f"β {1e9 * fit['beta_s_per_byte']:.4f} ns/B "
                     f"({1e-9 / fit['beta_s_per_byte']:.2f} GB/s), {len(fit['sizes'])} sizes "
                     f"{fit['sizes'][0]} B – {fit['sizes'][-1]:,} B; {how}")
    red, comp, kern = found["reduce"], found["compute"], found["kernels"]
    lines += [f"reduce   a += b: γ {1e12 * red['per_unit_s']:.1f} ps/B "
              f"({1e-9 / red['per_unit_s']:.2f} GB/s), rms relative residual "
              f"{100 * red['rms_rel_residual']:.1f}%",
              f"compute  {comp['n']}×{comp['n']} matrix product: "
              f"{comp['flops'] / 1e9:.1f} GFLOP/s; c = a + b over {comp['elements']:,} "
              f"elements: {comp['bytes_per_s'] / 1e9:.2f} GB/s",
              f"kernels  engine: η {kern['efficiency']:.3f}, n½ {kern['half_size']:.0f} fitted on "
              f"n×n products n = {kern['sizes'][0]}…{kern['sizes'][-1]}, rms relative residual "
              f"{100 * kern['rms_rel_residual']:.1f}%; an op {1e6 * kern['launch_s']:.2f} µs "
              "each way",
              f"engine   an all-reduce of 8 B among {found['engine']['ranks']} ranks: "
              f"{1e6 * found['engine']['seconds']:.1f} µs, {1e6 * profile.engine.call_s:.1f} µs "
              "a collective call beyond what α, β and γ price",
              f"         AdamW's step over {found['update']['arrays']} small arrays, every "
              f"rank at once: {1e6 * found['update']['seconds']:.1f} µs, "
              f"{1e6 * profile.engine.array_s:.2f} µs an array",
              f"memory   {profile.device.memory_bytes / 2**30:.1f} GiB a rank may hold, "
              f"{profile.engine.process_bytes / 2**20:.0f} MiB a process maps first"]
    return "\n".join(lines)
