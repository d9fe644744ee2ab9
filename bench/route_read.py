"""The IPv4 clash check's route read: every IPv4 route of the host, babeld's left out.

In a namespace of its own (made here, removed after), a veth with one host route and N
routes of protocol babel (42), as a node of an N-node mesh holds; then, in one run, the
same dump read with every message parsed by pyroute2 (as before nlfilter.py) and with
babeld's routes dropped before parsing (what `LinuxKernel.read_routes_v4` does). CPU per
read, median of --rounds rounds of --reads reads.

    sudo .venv/bin/python bench/route_read.py [--routes 16 64 256] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

NETNS = "bbl-route-read"


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


def setup(routes: int) -> None:
    sh("ip", "netns", "add", NETNS)
    sh("ip", "-n", NETNS, "link", "add", "r0", "type", "veth", "peer", "name", "r1")
    for name in ("r0", "r1"):
        sh("ip", "-n", NETNS, "link", "set", name, "up")
    sh("ip", "-n", NETNS, "addr", "add", "10.77.200.0/31", "dev", "r0")
    sh("ip", "-n", NETNS, "route", "add", "192.168.5.0/24", "dev", "r0")
    batch = "".join(
        f"route add 10.77.{i // 250}.{i % 250 + 1}/32 dev r0 proto 42\n" for i in range(routes)
    )
    subprocess.run(["ip", "-n", NETNS, "-batch", "-"], input=batch, text=True, check=True)


def measure(reads: int, rounds: int) -> dict[str, float]:
    """Runs inside the namespace: ms of CPU per read, both ways."""
    import trio

    from babbler.daemon.links.linux import LinuxKernel
    from babbler.daemon.links.nlfilter import host_route

    async def main() -> dict[str, float]:
        kernel = LinuxKernel()
        out: dict[str, list[float]] = {"parsed": [], "filtered": []}
        for _ in range(rounds):
            for label, keep in (("parsed", None), ("filtered", host_route)):
                start = time.process_time()
                for _ in range(reads):
                    await kernel._routes(socket.AF_INET, keep)
                out[label].append((time.process_time() - start) / reads * 1000)
        assert len(await kernel.read_routes_v4()) >= 1  # the host route is still read
        kernel.close()
        return {label: statistics.median(values) for label, values in out.items()}

    return trio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        print(json.dumps(measure(args.reads, args.rounds)))
        return
    rows = []
    for routes in args.routes:
        try:
            setup(routes)
            inside = ["--inside", "--reads", str(args.reads), "--rounds", str(args.rounds)]
            done = subprocess.run(
                ["ip", "netns", "exec", NETNS, sys.executable, __file__, *inside],
                check=True,
                capture_output=True,
                text=True,
            )
        finally:
            subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)
        ms = json.loads(done.stdout)
        rows.append({"babel_routes": routes, **{f"{k}_ms": round(v, 3) for k, v in ms.items()}})
        print(
            f"{routes:5} babel routes: {ms['parsed']:.3f} ms parsed, {ms['filtered']:.3f} ms "
            f"filtered ({ms['parsed'] / ms['filtered']:.1f}x)"
        )
    if args.out:
        args.out.write_text(json.dumps({"benchmark": "route_read", "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
