"""`babblerctl hostfile`: a node's status turned into the file or lines a job reads, and what
to say on stderr (core/hostfile.py, core/mlxfile.py and core/jobenv.py do the work)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from babbler.client.model import Status
from babbler.core import hostfile, jobenv, mlxfile
from babbler.core.cablegraph import CableGraph
from babbler.core.errors import BabblerError
from babbler.core.platform import PLATFORMS, RUNNING
from babbler.core.printable import escape
from babbler.ui import render

# each format in one line, for --help (the order --format lists them)
FORMATS = {
    "mlx": "MLX's hostfile for mlx.launch (no --backend: the ring's bare list)",
    "jaccl": "MLX's jaccl hostfile (RDMA, every two hosts cabled): = mlx --backend jaccl",
    "torch": "torch's rendezvous as shell lines: MASTER_ADDR, MASTER_PORT, ranks",
    "env": "this node's NAME=value lines for torch, gloo, TensorPipe, vLLM",
    "llama-rpc": "llama.cpp's --rpc list: every other node's rpc-server host:port",
    "hosts": "/etc/hosts lines for the node addresses",
}
HELP = (
    "Write what a job needs to run over the mesh's cables, in one of these formats:\n\n\b\n"
    + "\n".join(f"{name:<10} {line}" for name, line in FORMATS.items())
    + "\n\nRefuses with one line (exit 1) when the mesh cannot carry the job: a single node,"
    " no ring, a node without IPv4 or not answering. See docs/jobs.md."
)
JSON_FORMATS = ("mlx", "jaccl")


@dataclass
class Written:
    text: str  # for stdout or --output
    stderr: list[str]  # lines, escaped (they name other machines' nodes)


def build(
    value: Status,
    form: str,
    chosen: str | None,
    backend: str | None,
    allow_hops: bool,
    ssh_names: bool,
    port: int | None,
    this: bool,
    taken: Iterable[str],
) -> Written:
    if backend is not None and form != "mlx":
        raise BabblerError(f"--backend is for --format mlx, not --format {form}")
    graph = CableGraph.from_status(value.raw)
    ids = None
    if chosen is not None:
        names = [what.strip() for what in chosen.split(",") if what.strip()]
        ids = [render.node_id(value, what) for what in names]
    acts_as = PLATFORMS.get(value.platform or "") or RUNNING  # older babblerd: this system
    label = acts_as.node_address_label if acts_as is not None else None
    master = hostfile.TORCH_PORT if port is None else port  # --port 0 is refused, not this
    if form == "mlx":
        made = mlxfile.by_backend(backend, graph, ids, allow_hops, ssh_names)
    elif form == "jaccl":
        made = mlxfile.jaccl(graph, ids, ssh_names)
    elif form == "torch":
        made = hostfile.torch(graph, ids, master, this, label)
    elif form == "env":
        made = jobenv.env(graph, ids, master, label)
    elif form == "llama-rpc":
        made = jobenv.llama_rpc(graph, ids, jobenv.LLAMA_RPC_PORT if port is None else port)
    else:
        made = hostfile.hosts_lines(graph, taken, ids)
    stderr = [escape(f"babblerctl: warning: {warning}") for warning in made.warnings]
    stderr += [escape(f"babblerctl: {note}") for note in made.notes]
    body = made.value
    text = json.dumps(body, indent=2) if form in JSON_FORMATS else "\n".join(body)
    return Written(text + "\n", stderr)
