"""The variables frameworks read to find each other over the mesh, for the node this runs on,
and llama.cpp's `--rpc` list (pure; docs/jobs.md cites each framework).

`env` prints `NAME=value` lines and nothing else (no comments, no quotes, no spaces), so
`export $(...)`, `env $(...) CMD` and `eval "$(...)"` all take them. The interface-name
variables name the node address's own label (Linux: `lo:babbler`, the one interface name
that holds the node address and nothing else); where there is none (macOS) they are left
out and a note says why. NCCL_SOCKET_IFNAME is always left out, with a note: NCCL cannot
name a label (NO_NCCL).
"""

from __future__ import annotations

from collections.abc import Sequence

from babbler.core.cablegraph import CableGraph
from babbler.core.errors import BabblerError
from babbler.core.hostfile import Hostfile, members

# llama.cpp's rpc-server listens on 127.0.0.1:50052 unless told (tools/rpc/rpc-server.cpp,
# struct rpc_server_params)
LLAMA_RPC_PORT = 50052

NO_LABEL = (
    "no interface name holds the node address alone here (macOS: lo0 holds 127.0.0.1 too),"
    " so GLOO_SOCKET_IFNAME and TP_SOCKET_IFNAME are left out: see docs/jobs.md"
)

# NCCL's parseStringList (nccl src/misc/utils.cc) ends a name at its first ':' and reads the
# rest as a port, so `=lo:babbler` is the exact name `lo` (127.0.0.1) and `lo:babbler` the
# prefix `lo`: no value names a label, which always holds a ':'.
NO_NCCL = (
    "NCCL_SOCKET_IFNAME is left out: NCCL reads 'lo:babbler' as interface 'lo' port"
    " 'babbler' and would bind 127.0.0.1; set it to a cable's interface yourself, see"
    " docs/jobs.md"
)


def env(graph: CableGraph, chosen: Sequence[str] | None, port: int, label: str | None) -> Hostfile:
    """For this node: the rendezvous (MASTER_ADDR: the first host's IPv4 node address), its
    rank, and the interface and address each framework binds."""
    hosts, warnings = members(graph, chosen)
    rank = next((r for r, h in enumerate(hosts) if h.me), None)
    if rank is None:
        raise BabblerError("this node is not one of --nodes (--format env is for this node)")
    lines = [
        f"MASTER_ADDR={hosts[0].node_address_v4}",
        f"MASTER_PORT={port}",
        f"WORLD_SIZE={len(hosts)}",
        f"NODE_RANK={rank}",
    ]
    notes = []
    if label is None:
        notes.append(NO_LABEL)
    else:
        lines += [f"GLOO_SOCKET_IFNAME={label}", f"TP_SOCKET_IFNAME={label}"]
    notes.append(NO_NCCL)
    lines.append(f"VLLM_HOST_IP={hosts[rank].node_address_v4}")
    return Hostfile(lines, warnings, notes)


def llama_rpc(graph: CableGraph, chosen: Sequence[str] | None, port: int) -> Hostfile:
    """llama.cpp's `--rpc host:port,...`: every host's IPv4 node address but this node's
    (llama-cli or llama-server runs here and uses this machine's devices itself)."""
    hosts, warnings = members(graph, chosen)
    servers = [h for h in hosts if not h.me]
    line = ",".join(f"{h.node_address_v4}:{port}" for h in servers)
    note = (
        f"start on each of them: rpc-server --host <its IPv4 node address> --port {port}"
        " (rpc-server listens on 127.0.0.1 unless told)"
    )
    return Hostfile([line], warnings, [note])
