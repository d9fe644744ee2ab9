"""Record the kernel's view of this namespace's links as JSON (for test_recorded_links.py).

    ip netns exec NS python tests/unit/data/record_links.py > tests/unit/data/links-NAME.json

Read-only: one netlink dump, nothing changed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import trio

from babbler.daemon.links.linux import open_linux_kernel


async def main() -> None:
    async with open_linux_kernel() as kernel:
        snapshot = await kernel.read_links()
    links = [
        {**asdict(link), "addresses": sorted(map(str, link.addresses))}
        for link in sorted(snapshot.values(), key=lambda ln: ln.index)
    ]
    json.dump(links, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    trio.run(main)
