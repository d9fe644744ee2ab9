"""Real MLX jobs on a lab, started the way users start them: `babblerctl hostfile` on a
node, then `mlx.launch --hostfile FILE` (MLX's own launcher, which reaches each host by
`ssh HOST SCRIPT`). A lab's nodes are namespaces, not machines, so the one stand-in is
`ssh`: a program first on PATH that runs SCRIPT with bash in the namespace of the node
whose IPv4 node address (or name) is HOST. Everything else is MLX's: the hostfile parser,
the ports, the environment (MLX_RANK, MLX_HOSTFILE), the ring backend.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from babbler.client import ask
from babbler.lab import wait
from babbler.lab.node import Node
from babbler.lab.probe import exec_in
from babbler.lab.topology import LabError

SSH_STAND_IN = '''\
#!{python}
"""ssh for mlx.launch in a lab: run the command in the namespace of the host named."""
import os, sys
HOSTS = {hosts}
args = sys.argv[1:]
while args and args[0].startswith("-"):  # -tt, -o LogLevel=QUIET
    if args.pop(0) in ("-o", "-p", "-i", "-l"):
        args.pop(0)
if len(args) < 2 or args[0] not in HOSTS:
    sys.exit(f"ssh stand-in: no lab node {{args[:1]}} (known: {{sorted(HOSTS)}})")
os.execvp("ip", ["ip", "netns", "exec", HOSTS[args[0]], "/bin/bash", "-c", " ".join(args[1:])])
'''


def babblerctl(node: Node, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """babblerctl on a node, as a user there runs it."""
    command = [sys.executable, "-m", "babbler.ctl.main", "--socket", str(node.socket), *args]
    return exec_in(node, *command, timeout=timeout)


def ring_hostfile(node: Node, hosts: int, ips: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """`babblerctl hostfile --format mlx` on `node`, asked again (as a user would) until it
    has `hosts` hosts with `ips` addresses each: every node's info says its cables. Raises
    LabError with its last answer after `timeout` seconds."""
    said = [""]

    def complete() -> list[dict[str, Any]] | None:
        done = babblerctl(node, "hostfile", "--format", "mlx")
        said[0] = done.stderr or done.stdout
        if done.returncode != 0:
            return None
        file: list[dict[str, Any]] = json.loads(done.stdout)
        return file if len(file) == hosts and all(len(h["ips"]) == ips for h in file) else None

    file = wait.until(complete, timeout, every=0.2)
    if file is None:
        raise LabError(
            f"no mlx hostfile of {hosts} hosts with {ips} ip(s) each within {timeout:g} s;"
            f" last said: {said[0]}; {node.name} holds: {cables_held(node)}"
        )
    return file


def cables_held(node: Node) -> str:
    """What `node` knows of the cables, for a failure's message: its own cable addresses,
    and each other node's as its last node info said, how old, and why an ask failed."""
    try:
        status = ask(node.socket, "status")
    except Exception as error:  # the message is for a failure already raised
        return f"no status ({error})"
    own = [
        (e.get("interface"), e.get("address"), e.get("peer"))
        for e in status.get("addresses_v4") or []
    ]
    others = [
        (n.get("name") or n.get("node_id"), n.get("cables"), n.get("info_age_s"), n.get("error"))
        for n in status.get("nodes") or []
    ]
    return f"own {own}; others (name, cables, info_age_s, error) {others}"


def ssh_stand_in(directory: Path, hosts: Mapping[str, str]) -> Path:
    """Write `ssh` into `directory` for hosts (ssh name -> namespace); returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    program = directory / "ssh"
    program.write_text(SSH_STAND_IN.format(python=sys.executable, hosts=json.dumps(dict(hosts))))
    program.chmod(0o755)
    return directory


def mlx_launch(
    hostfile: Path,
    command: Sequence[str],
    hosts: Mapping[str, str],
    work: Path,
    timeout: float,
    launch_args: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """`mlx.launch --hostfile HOSTFILE ... -- COMMAND` with the ssh stand-in first on PATH;
    every process it started is ended when it overruns `timeout`. Raises LabError then."""
    launcher = Path(sys.executable).parent / "mlx.launch"
    if not launcher.exists():
        raise LabError(f"{launcher} not found (pip install mlx[cpu])")
    path = f"{ssh_stand_in(work / 'bin', hosts)}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    argv = [str(launcher), "--hostfile", str(hostfile), "--backend", "ring"]
    argv += ["--python", sys.executable, *launch_args, "--", *command]
    process = subprocess.Popen(
        argv,
        cwd=work,
        env={**os.environ, "PATH": path},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the ranks end with it
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise LabError(f"mlx.launch ran over {timeout} s:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(argv, process.returncode, out, err)
