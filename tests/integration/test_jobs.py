"""From the mesh to a job, the way users run one: `babblerctl hostfile --format mlx` on a
node, then MLX's own launcher with that file (mlx[cpu], pinned), ranks in the lab's
namespaces (babbler/lab/jobs.py: only `ssh` is a stand-in). The ring runs over the cables,
parallel cables carry their share, and the other formats are what their programs read."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from babbler.lab import Lab, Node, netns
from babbler.lab.jobs import babblerctl, mlx_launch, ring_hostfile
from tests import needs
from tests.integration.helpers import LabFactory, until

pytestmark = pytest.mark.integration

JOB = Path(__file__).with_name("mlx_job.py")
JOB_TIMEOUT = 180.0  # s: four ranks importing MLX on 2 cores take ~10 s; generous


def hostfile(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return babblerctl(node, "hostfile", *args)


def wait_for_all(node: Node, count: int) -> None:
    """Until `node` knows the info of all `count` nodes (a torch hostfile is written as soon
    as two are known, so its exit code alone is not enough)."""
    until(
        lambda: f"WORLD_SIZE={count}" in hostfile(node, "--format", "torch").stdout,
        what=f"the info of all {count} nodes",
    )


def namespaces(lab: Lab) -> dict[str, str]:
    """ssh name (IPv4 node address) -> namespace, for the ssh stand-in."""
    return {str(lab.status(n)["node_address_v4"]): n.netns for n in lab.nodes}


def run_job(lab: Lab, work: Path, file: Any, *job: str) -> list[dict[str, Any]]:
    """`file`: the bare list or the schema (`{"backend", "envs", "hosts"}`)."""
    hosts = file["hosts"] if isinstance(file, dict) else file
    work.mkdir(exist_ok=True)
    (work / "hosts.json").write_text(json.dumps(file))
    out = work / "out"
    out.mkdir(exist_ok=True)
    done = mlx_launch(
        work / "hosts.json", [str(JOB), str(out), *job], namespaces(lab), work, JOB_TIMEOUT
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(len(hosts))]


def test_an_mlx_ring_job_runs_over_the_cables_of_a_four_ring(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    needs.mlx()
    lab = make_lab(4, "ring")
    n1, n3 = lab.nodes[0], lab.nodes[2]
    file = ring_hostfile(n1, 4, 1)
    # the same file on every node, each host listening on its cable to the previous one
    assert ring_hostfile(n3, 4, 1) == file
    cables = {a["address"] for n in lab.nodes for a in lab.status(n)["addresses_v4"]}
    assert all(h["ips"][0] in cables for h in file), file
    # --backend auto: no RDMA here, so the ring, in mlx.launch's current schema, saying why
    auto = hostfile(n3, "--format", "mlx", "--backend", "auto")
    assert auto.returncode == 0 and json.loads(auto.stdout) == {
        "backend": "ring", "envs": [], "hosts": file
    }, auto.stdout  # fmt: skip
    assert auto.stderr.startswith("babblerctl: backend ring: RDMA readiness unknown"), auto.stderr
    results = run_job(lab, tmp_path / "ring", json.loads(auto.stdout))
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    for r in results:
        assert r["size"] == 4 and r["all_sum_ok"], r
        assert r["all_gather"] == [[i] * 4 for i in range(4)] or r["all_gather"] == [
            i for i in range(4) for _ in range(4)
        ], r


def carried(lab: Lab, node: Node, link: str) -> int:
    """Bytes through `link` at `node`, both ways."""
    path = f"/sys/class/net/{link}/statistics"
    return sum(int(lab.exec(node, "cat", f"{path}/{d}_bytes").stdout) for d in ("rx", "tx"))


def test_an_mlx_ring_job_keeps_running_through_a_pulled_cable(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    """A 4-ring's MLX ring job, all_sums of 1 MiB every 50 ms for about 12 s; 1 s in, the
    cable n1-n2 (a step of the ring) is pulled out at both ends for 4 s. The job goes on
    through the mesh (each end's cable address held on its loopback: DESIGN.md "IPv4"),
    every round right, none stalled 2 s, and its bytes are back on the cable within 2 s
    of its return."""
    needs.mlx()
    lab = make_lab(4, "ring")
    n1 = lab.nodes[0]
    file = ring_hostfile(n1, 4, 1)
    work = tmp_path / "pull"
    box: dict[str, Any] = {}
    job = threading.Thread(target=lambda: box.update(results=run_job(lab, work, file, "0", "220")))
    job.start()
    try:
        until(lambda: (work / "out" / "steady").exists(), what="the job's steady rounds begun")
        time.sleep(1)
        lab.plug(1, 2, up=False)
        pulled = time.time()
        time.sleep(4)
        lab.plug(1, 2)
        back = time.time()
        time.sleep(2)
        before = carried(lab, n1, "v1x2")
        time.sleep(1)
        on_cable = carried(lab, n1, "v1x2") - before  # 2-3 s after the cable's return
    finally:
        job.join(JOB_TIMEOUT)
    results = box["results"]
    assert all(r["steady_ok"] and len(r["steady"]) == 220 for r in results), results
    rounds = sorted(round_ for r in results for round_ in r["steady"])
    longest = max(length for _, length in rounds)

    def median(start: float, end: float) -> float:
        lengths = sorted(length for at, length in rounds if start <= at < end)
        return lengths[len(lengths) // 2] if lengths else float("nan")

    print(
        f"longest round {longest:.3f} s; median round before the pull "
        f"{median(0, pulled):.4f} s, on the detour {median(pulled + 1, back):.4f} s, "
        f"back on the cable {median(back + 1, 2 * back):.4f} s; {on_cable} bytes on v1x2 "
        "2-3 s after its return"
        f" (n1 v1x4: {carried(lab, n1, 'v1x4')} bytes in all)"
    )
    assert longest < 2.0, longest  # without the detour the job waits for the cable (4 s)
    assert on_cable > 2**20, on_cable  # the job's MiB rounds, not only babeld's hellos


def test_the_hostfile_is_complete_soon_after_a_ring_boots_one_by_one(
    make_lab: LabFactory,
) -> None:
    """As a cluster boots: babblerds start 2 s apart, so early answers predate later
    neighbours. Within 10 s of the last start every node writes the same complete ring."""
    lab = make_lab(4, "ring", False)
    for node in lab.nodes:
        lab.start(node)
        time.sleep(2)
    files = [json.loads(hostfile(n, "--format", "mlx").stdout or "[]") for n in lab.nodes]
    deadline = time.monotonic() + 8  # 2 s already passed since the last start
    while time.monotonic() < deadline and not (
        all(len(f) == 4 for f in files) and all(f == files[0] for f in files)
    ):
        time.sleep(0.5)
        files = [json.loads(hostfile(n, "--format", "mlx").stdout or "[]") for n in lab.nodes]
    assert all(len(f) == 4 for f in files) and all(f == files[0] for f in files), files


def tx_bytes(lab: Lab, node: Node, link: str) -> int:
    return int(lab.exec(node, "cat", f"/sys/class/net/{link}/statistics/tx_bytes").stdout)


def test_two_nodes_with_two_cables_run_a_job_over_both(
    make_lab: LabFactory, tmp_path: Path
) -> None:
    needs.mlx()
    lab = make_lab(2, "line", False)
    n1, n2 = lab.nodes
    netns.add_link(1, n1.netns, 2, n2.netns, prefix="vb")  # a second cable: vb1x2 <-> vb2x1
    lab.start_all()
    file = ring_hostfile(n1, 2, 2)
    links = ("v1x2", "vb1x2")
    before = [tx_bytes(lab, n1, link) for link in links]
    results = run_job(lab, tmp_path / "two", file, "64")  # 64 MiB from each rank
    assert all(r["all_sum_ok"] and r["large_ok"] for r in results), results
    sent = [tx_bytes(lab, n1, link) - b for link, b in zip(links, before, strict=True)]
    print("bytes n1 sent per cable:", sent)
    assert sum(sent) >= 64 * 2**20, sent  # n1's 64 MiB left over the cables
    assert min(sent) >= 0.2 * sum(sent), f"one cable carried too little: {sent}"


def test_hostfile_refusals_are_one_line_and_exit_1(make_lab: LabFactory) -> None:
    lab = make_lab(3, "line")  # n1 - n2 - n3: no ring
    n1 = lab.nodes[0]
    wait_for_all(n1, 3)
    no_ring = hostfile(n1, "--format", "mlx")
    assert no_ring.returncode == 1 and no_ring.stdout == ""
    (line,) = no_ring.stderr.strip().splitlines()  # one line, nodes in node-id order
    assert line.startswith("babblerctl: no ring through the cables: "), line
    assert "n1 has a cable to n2 only" in line and "n3 has a cable to n2 only" in line, line
    assert line.endswith("; --allow-hops uses node addresses instead"), line
    hops = hostfile(n1, "--format", "mlx", "--allow-hops")
    assert hops.returncode == 0 and "warning" in hops.stderr
    assert len(json.loads(hops.stdout)) == 3
    unknown = hostfile(n1, "--format", "mlx", "--nodes", "n1,nosuch")
    assert unknown.returncode == 1 and "no node 'nosuch'" in unknown.stderr
    single = hostfile(n1, "--format", "mlx", "--nodes", "n2")
    assert single.returncode == 1 and "a job needs two nodes or more" in single.stderr
    for backend in ("jaccl-ring", "auto"):  # auto: no RDMA here, so the ring's refusal
        refused = hostfile(n1, "--format", "mlx", "--backend", backend)
        assert refused.returncode == 1 and refused.stdout == "", refused
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith("babblerctl: no ring through the cables: "), line
        assert "n1 has a cable to n2 only" in line and "n3 has a cable to n2 only" in line, line
    wrong = hostfile(n1, "--format", "torch", "--backend", "ring")
    assert wrong.returncode == 1 and "--backend is for --format mlx" in wrong.stderr
    jaccl = hostfile(n1, "--format", "jaccl")
    assert jaccl.returncode == 1 and (
        "not cabled: n1-n3" in jaccl.stderr or "not cabled: n3-n1" in jaccl.stderr
    ), jaccl.stderr
    pair = hostfile(n1, "--format", "jaccl", "--nodes", "n2,n1")
    assert pair.returncode == 0, pair.stderr
    v4 = {lab.status(n)["node_address_v4"]: n.name for n in lab.nodes}
    hosts = json.loads(pair.stdout)["hosts"]
    assert all(h["rdma"][i] is None for i, h in enumerate(hosts))  # null for itself
    rdma = {v4[h["ssh"]]: h["rdma"] for h in hosts}  # the interface facing the other
    assert {name: [d for d in row if d] for name, row in rdma.items()} == {
        "n1": ["rdma_v1x2"],
        "n2": ["rdma_v2x1"],
    }


def test_hosts_lines_and_ip_of_another_node(make_lab: LabFactory, tmp_path: Path) -> None:
    """Names as nodes say them, hostile ones too: only valid host names that shadow nothing
    reach a hosts line or an `ssh` field; the others are written as node-<id>."""
    lab = make_lab(3, "line", False)
    n1, n2, n3 = lab.nodes
    lab.start(n1)
    lab.start(n2, ["--name", "my box #2"])  # a space and a comment sign
    lab.start(n3, ["--name", "localhost"])  # a name every host already has
    wait_for_all(n1, 3)
    ids = {n.name: lab.status(n)["node_id"] for n in lab.nodes}
    v4 = {n.name: lab.status(n)["node_address_v4"] for n in lab.nodes}
    assert babblerctl(n1, "ip", "localhost", "-4").stdout.split() == [v4["n3"]]  # its name
    assert babblerctl(n1, "ip", ids["n3"]).stdout.split() == [lab.status(n3)["node_address"]]
    assert babblerctl(n1, "ip", v4["n2"], "-6").stdout.split() == [lab.status(n2)["node_address"]]
    assert babblerctl(n1, "ip", "my box #2", "-4").stdout.split() == [v4["n2"]]
    assert babblerctl(n1, "ip", "nosuch").returncode == 1
    answer = json.loads(babblerctl(n1, "ip", ids["n2"], "--json").stdout or "{}")
    assert answer["node_address_v4"] == v4["n2"] and answer["node_id"] == ids["n2"], answer
    assert {c["interface"] for c in answer["cables"]} == {"v2x1", "v2x3"}
    target = tmp_path / "hosts"
    done = hostfile(n1, "--format", "hosts", "-o", str(target))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    lines = [line.split() for line in target.read_text().splitlines() if not line.startswith("#")]
    written = {"n1": "n1", "n2": f"node-{ids['n2']}", "n3": f"node-{ids['n3']}"}
    assert sorted(lines) == sorted(
        [[v4[n.name], written[n.name]] for n in lab.nodes]
        + [[lab.status(n)["node_address"], written[n.name]] for n in lab.nodes]
    )
    until(lambda: babblerctl(n1, "hostfile", "--format", "mlx", "--allow-hops").returncode == 0)
    named = babblerctl(n1, "hostfile", "--format", "mlx", "--allow-hops", "--ssh-names")
    assert {h["ssh"] for h in json.loads(named.stdout)} == set(written.values()), named.stdout
    wait_for_all(n2, 3)  # n1 knew all three; n2 may have been a moment behind
    torch_said = hostfile(n2, "--format", "torch", "--this", "--port", "29600")
    assert torch_said.returncode == 0, torch_said.stderr
    torch = torch_said.stdout.splitlines()
    first = min(ids, key=ids.__getitem__)
    assert torch[:3] == [f"MASTER_ADDR={v4[first]}", "MASTER_PORT=29600", "WORLD_SIZE=3"]
    assert f"NODE_RANK={sorted(ids.values()).index(ids['n2'])}" in torch, torch
    assert torch[-1] == "GLOO_SOCKET_IFNAME=lo:babbler"
    # --format env: this node's variables, the same rendezvous as torch's
    env = dict(line.split("=", 1) for line in hostfile(n2, "--format", "env").stdout.split())
    assert env == {
        "MASTER_ADDR": v4[first], "MASTER_PORT": "29500", "WORLD_SIZE": "3",
        "NODE_RANK": str(sorted(ids.values()).index(ids["n2"])),
        "GLOO_SOCKET_IFNAME": "lo:babbler", "TP_SOCKET_IFNAME": "lo:babbler",
        "VLLM_HOST_IP": v4["n2"],
    }  # fmt: skip
    rpc = hostfile(n1, "--format", "llama-rpc")
    others = sorted(["n2", "n3"], key=ids.__getitem__)  # node-id order, this node not
    assert rpc.stdout == ",".join(f"{v4[n]}:50052" for n in others) + "\n", rpc.stdout
    assert "rpc-server --host" in rpc.stderr
    # --format hosts --nodes: only those nodes' lines
    two = hostfile(n1, "--format", "hosts", "--nodes", "my box #2,n1").stdout.splitlines()[1:]
    assert sorted(line.split()[1] for line in two) == sorted(
        [written["n1"], written["n1"], written["n2"], written["n2"]]
    ), two


TORCH_JOB = Path(__file__).with_name("torch_job.py")


def test_a_torch_gloo_job_runs_over_node_addresses(make_lab: LabFactory, tmp_path: Path) -> None:
    """docs/jobs.md's recipe on each node: `eval "$(babblerctl hostfile --format torch
    --this)"`, `export GLOO_SOCKET_IFNAME`, torchrun on n1, and on n2 and n3 `export
    $(babblerctl hostfile --format env)` instead (two of them, so one listens for the other:
    a wrong interface there fails the job): gloo binds the IPv4 node address by its label and
    the all_reduce crosses a hop (n1 - n2 - n3). With Debian's torch, whose
    torchrun (1.13) fails on Python 3.11 before it starts anything, each rank is started
    with the environment torchrun would give it instead."""
    python, torchrun = needs.torch()
    lab = make_lab(3, "line")
    until(
        lambda: all(hostfile(n, "--format", "torch").returncode == 0 for n in lab.nodes),
        what="every node has every node's info",
    )
    out = tmp_path / "out"
    out.mkdir()
    job = f"{shlex.quote(str(TORCH_JOB))} {shlex.quote(str(out))}"
    if torchrun is not None:
        start = f"{torchrun} --nnodes=$WORLD_SIZE --node_rank=$NODE_RANK --nproc_per_node=1"
        start += f" --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT {job}"
    else:
        start = "RANK=$NODE_RANK LOCAL_RANK=0 WORLD_SIZE=$WORLD_SIZE MASTER_ADDR=$MASTER_ADDR"
        start += f" MASTER_PORT=$MASTER_PORT {python} {job}"
    ranks = []
    for node in lab.nodes:
        ctl = f"{sys.executable} -m babbler.ctl.main --socket {node.socket}"
        script = f'eval "$({ctl} hostfile --format torch --this)"; export GLOO_SOCKET_IFNAME;'
        if node is not lab.nodes[0]:  # docs/jobs.md's --format env recipe: the same job
            script = f"export $({ctl} hostfile --format env);"
        command = ["ip", "netns", "exec", node.netns, "bash", "-c", f"{script} {start}"]
        ranks.append(subprocess.Popen(command, stderr=subprocess.PIPE, text=True))
    try:
        errors = [rank.communicate(timeout=JOB_TIMEOUT)[1][-2000:] for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
            rank.wait()
    assert [rank.returncode for rank in ranks] == [0, 0, 0], errors
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(3)]
    assert all(r["ok"] for r in results), results
    label = lab.exec(lab.nodes[0], "ip", "-4", "-o", "addr", "show", "label", "lo:babbler")
    assert lab.status(lab.nodes[0])["node_address_v4"] + "/32" in label.stdout, label.stdout
