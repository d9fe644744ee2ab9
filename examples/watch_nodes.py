"""Print the mesh's machines as they come and go: a short asyncio program on babbler.client.

    python examples/watch_nodes.py                  # the system babblerd
    python examples/watch_nodes.py --socket PATH    # another one (a lab node's)

The first lines are the machines already known (`up`); then one line per change. A machine
that loses its route is first told `changed` with "no route", while babblerd holds it for
the down hold (a route may come back), then `down` if none came. When babblerd restarts,
the client reconnects by itself and tells only what changed meanwhile. No root needed:
babblerd's socket is world-readable. Ctrl-C ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from babbler.client import AsyncClient, ClientError, Node


def where(node: Node) -> str:
    """How this node reaches it: a route, none for now (the down hold), or unreachable."""
    if not node.reachable:
        return "unreachable"
    if node.metric is None:  # reachable but no route: babblerd's down hold
        return "no route now: down unless one comes back within the down hold"
    return f"metric {node.metric} via {node.interface}"


async def follow(socket: str | None) -> None:
    async for event in AsyncClient(socket).watch_nodes():
        node = event.node
        print(f"{event.action:8} {node.label:16} {node.node_address}  {where(node)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--socket", help="babblerd's socket (default: $BABBLER_SOCKET or the system's)"
    )
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(follow(args.socket))
        except ClientError as error:  # e.g. permission denied: not worth retrying
            raise SystemExit(f"watch_nodes: {error}") from None


if __name__ == "__main__":
    main()
