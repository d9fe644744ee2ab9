"""How much of the machine a lab needs once converged, from docs/benchmarks.md "Scale".

Measured with no clients at hello 0.1 s: babblerd and babeld together cost 0.62, 0.59, 0.61,
0.68 and 0.77 % of a core per node on rings of 4, 8, 16, 32 and 64 nodes: nearly flat since
babblerd reads babeld's table with a dump a second while nobody watches (docs/design.md);
before, it grew with the mesh (1.4 % at 32). The hello rate drives babeld's own work, so a
lab of N nodes needs about N x 0.77 % x (0.1 s / hello) of a core, before the kernel's share
and more while it converges. The 64-ring at 0.1 s (0.49 cores by this) converged in 41 s
with daemons started 16 at a time (babbler-lab up), and with IPv4 on in 33-46 s in 5 runs
of 5 (0.67-0.89 % a node once converged: docs/benchmarks.md "The first minute").
"""

from __future__ import annotations

PER_NODE = 0.0077  # of a core: babblerd + babeld per node, 64-ring, hello 0.1 s
MEASURED_HELLO = 0.1
# The share of the machine's cores a converged lab was seen to need and still settle: the
# 64-ring at 0.1 s took 0.49 of 2 cores by the estimate. Beyond that nothing was measured,
# so there the lab says so (and still starts).
USABLE_SHARE = 0.25


def cores_needed(nodes: int, hello: float) -> float:
    """Cores a converged lab of `nodes` at `hello` seconds needs, by the measured rate."""
    return nodes * PER_NODE * (MEASURED_HELLO / hello)


def too_big(nodes: int, hello: float, cores: int) -> str | None:
    """Why this lab is not expected to converge on `cores` cores, or None."""
    needed = cores_needed(nodes, hello)
    if needed <= USABLE_SHARE * cores:
        return None
    fits = next(
        (h for h in (0.2, 0.4, 0.8, 1.6, 4.0) if cores_needed(nodes, h) <= USABLE_SHARE * cores),
        None,
    )
    hint = f"; --hello-interval {fits:g} needs {cores_needed(nodes, fits):.2f}" if fits else ""
    return (
        f"{nodes} nodes at hello {hello:g} s need about {needed:.1f} cores once converged "
        f"(more while converging), this machine has {cores}{hint} "
        '(docs/benchmarks.md "Scale")'
    )
