"""babbler/service/plan.py: the config file install writes from the flags, a hand-edited one
told apart and what differs said, the unit's drop-ins, and the program root's alone."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from babbler.core.config import merge
from babbler.core.ipv4 import DEFAULT_PREFIX, parse_prefix
from babbler.daemon.keyfile import CREDENTIAL
from babbler.service import plan, program
from babbler.service.plan import Chain, PathFacts, Request

ROOT = Path(__file__).resolve().parents[2]

names = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=20
).filter(lambda s: s.strip() and s.isprintable())
globs = st.from_regex(r"[a-z][a-z0-9*]{0,8}", fullmatch=True)
flag_values: dict[str, st.SearchStrategy[Any]] = {
    "mode": st.sampled_from(["always", "on-demand"]),
    "linger": st.sampled_from(["0", "5", "2.5", "60"]),
    "exclude": st.lists(globs, min_size=1, max_size=3).map(tuple),
    "interface": st.lists(globs, min_size=1, max_size=3).map(tuple),
    "hello-interval": st.sampled_from(["0.1", "0.5", "4"]),
    "node-id": st.from_regex(r"[0-9a-f]{11}[1-9a-e]", fullmatch=True),  # not reserved ones
    "mtu": st.sampled_from(["auto", "9000", "1500"]),
    "name": names,
    "cost": st.lists(st.tuples(globs, st.integers(1, 500)), min_size=1, max_size=2).map(
        lambda pairs: tuple(f"{g}={n}" for g, n in pairs)
    ),
    "ipv4-prefix": st.sampled_from(["off", "10.88.0.0/16", "192.168.64.0/22"]),
    "info-port": st.sampled_from(["0", "6698", "7000"]),
    "skip-kernel-setup": st.just(True),
    "log-level": st.sampled_from(["debug", "info"]),
}
flag_sets = st.dictionaries(st.sampled_from(sorted(flag_values)), st.none()).flatmap(
    lambda keys: st.fixed_dictionaries({key: flag_values[key] for key in keys})
)


@given(flag_sets)
def test_the_file_holds_exactly_the_flags(flags: dict[str, Any]) -> None:
    """What babblerd reads from the file install wrote is what the flags said, and install
    knows the file for its own."""
    text = plan.config_text(flags)
    assert merge(plan.parse_config(text), {}) == merge({}, flags)
    assert plan.written_by_install(text)
    assert plan.plan_config(text, Request(flags)).action == "keep"


@given(flag_sets)
def test_a_hand_edit_is_told_apart(flags: dict[str, Any]) -> None:
    """Any line a person adds (a comment too) makes the file theirs."""
    assert not plan.written_by_install(plan.config_text(flags) + "# eth8 is the uplink\n")
    if "exclude" not in flags:  # TOML refuses a key given twice
        text = plan.config_text(flags) + 'exclude = ["eth8"]  # the uplink\n'
        assert not plan.written_by_install(text)
    assert not plan.written_by_install(plan.config_text(flags).replace(plan.HEADER, "# mine"))


def test_flags_the_service_fixes_stay_out_of_the_file() -> None:
    text = plan.config_text({"key-file": "/etc/babbler/mesh.key", "mode": "on-demand"})
    assert "key-file" not in text and 'mode = "on-demand"' in text


@pytest.mark.parametrize(
    ("there", "flags", "force", "action"),
    [
        (None, {}, False, "none"),  # nothing there, nothing to write
        (None, {}, True, "none"),
        (None, {"mode": "on-demand"}, False, "write"),
        ('exclude = ["eth0"]\n', {}, False, "keep"),  # a person's file, no flags: kept
        ('exclude = ["eth0"]\n', {}, True, "keep"),  # --force is about flags that differ
        ('exclude = ["eth0"]\n', {"mode": "on-demand"}, False, "refuse"),
        ('exclude = ["eth0"]\n', {"mode": "on-demand"}, True, "write"),
        (plan.config_text({"mode": "always"}), {"mode": "on-demand"}, False, "write"),
        (plan.config_text({"mode": "always"}), {"mode": "always"}, False, "keep"),
        (plan.config_text({"mode": "always"}), {"key-file": "/k"}, False, "keep"),
        ("not toml [", {"mode": "always"}, False, "refuse"),
    ],
)
def test_what_install_does_with_the_config_file(
    there: str | None, flags: dict[str, Any], force: bool, action: str
) -> None:
    done = plan.plan_config(there, Request(flags, force=force))
    assert done.action == action
    if action == "write":
        assert done.text == plan.config_text(flags)


def test_a_refusal_says_what_differs_and_how_to_go_on() -> None:
    there = 'exclude = ["eth8"]\nmode = "always"\nhello-interval = 0.5\n'
    flags = {"exclude": ("eth9",), "mode": "always", "ipv4-prefix": "10.88.0.0/16"}
    lines = plan.plan_config(there, Request(flags)).lines
    assert lines[0] == f"{plan.CONFIG_FILE} was edited by hand and differs from the flags:"
    assert lines[1:-1] == (
        "  exclude: the file sets ['eth8'], the flags ['eth9']",
        "  hello-interval: the file sets 0.5, the flags do not",
        "  ipv4-prefix: the flags set '10.88.0.0/16', the file does not",
    )
    assert "--force" in lines[-1]


def test_the_same_settings_written_otherwise_are_said_so() -> None:
    there = "# my notes\nmode = 'always'\n"
    lines = plan.plan_config(there, Request({"mode": "always"})).lines
    assert lines[1] == "  the same settings, written differently (comments or layout)"


@pytest.mark.parametrize(
    ("prefix", "has_allow"),
    [("10.77.0.0/16", False), ("off", False), ("10.88.0.0/16", True), ("192.168.4.0/22", True)],
)
def test_the_sandbox_allows_another_ipv4_prefix(prefix: str, has_allow: bool) -> None:
    files = plan.dropins(
        Path("/usr/local/lib/babbler/bin/babblerd"), None, parse_prefix("p", prefix)
    )
    assert ("ipv4-prefix.conf" in files) == has_allow
    if has_allow:
        assert f"IPAddressAllow={prefix}\n" in files["ipv4-prefix.conf"]
    assert "ExecStart=\nExecStart=/usr/local/lib/babbler/bin/babblerd\n" in files["program.conf"]
    assert "key.conf" not in files


def test_the_unit_allows_the_default_prefix_itself() -> None:
    unit = (plan.FILES / "babblerd.service").read_text()
    assert f" {DEFAULT_PREFIX}\n" in unit and plan.UNIT_IPV4_PREFIX == DEFAULT_PREFIX


def test_the_key_is_the_credential_babblerd_reads() -> None:
    files = plan.dropins(Path("/p/babblerd"), Path("/etc/babbler/mesh.key"), None)
    assert plan.CREDENTIAL == CREDENTIAL
    assert "LoadCredential=mesh.key:/etc/babbler/mesh.key\n" in files["key.conf"]


def _chain(*steps: tuple[str, int, int]) -> Chain:
    facts = tuple(PathFacts(Path(p), uid, stat.S_IFDIR | mode) for p, uid, mode in steps)
    return Chain(facts[-1].path, facts)


ROOTS = (("/", 0, 0o755), ("/usr", 0, 0o755), ("/usr/local", 0, 0o755))


@pytest.mark.parametrize(
    ("last", "problem"),
    [
        (("/usr/local/lib", 0, 0o755), None),
        (("/usr/local/lib", 0, 0o775), "/usr/local/lib (writable by its group)"),
        (("/usr/local/lib", 0, 0o757), "/usr/local/lib (writable by others)"),
        (("/usr/local/lib", 1000, 0o755), "/usr/local/lib (owned by uid 1000)"),
        (("/usr/local/lib", 0, 0o1777), "/usr/local/lib (writable by others)"),
    ],
)
def test_the_program_must_be_roots_alone(last: tuple[str, int, int], problem: str | None) -> None:
    said = plan.untrusted([_chain(*ROOTS), _chain(*ROOTS, last)])
    if problem is None:
        assert said is None
    else:
        assert said is not None and said.startswith(problem)
        assert "would let a user run code as root" in said and plan.ROOT_INSTALL in said


@pytest.mark.parametrize(
    ("below", "problem"),
    [
        (("/tmp/src", 0, 0o755), None),
        (("/tmp/src", 1000, 0o755), "/tmp/src (owned by uid 1000)"),
        (("/tmp/src", 0, 0o777), "/tmp/src (writable by others)"),
    ],
)
def test_a_sticky_directory_of_roots_is_passed_only_to_roots_own(
    below: tuple[str, int, int], problem: str | None
) -> None:
    tmp = ("/tmp", 0, 0o1777)
    said = plan.untrusted([_chain(("/", 0, 0o755), tmp, below)])
    if problem is None:
        assert said is None
    else:
        assert said is not None and said.startswith(problem)
    not_sticky = plan.untrusted([_chain(("/", 0, 0o755), ("/tmp", 0, 0o777), below)])
    assert not_sticky is not None and not_sticky.startswith("/tmp (writable by others)")


def test_a_program_in_a_home_is_refused_as_unseen() -> None:
    chain = _chain(("/", 0, 0o755), ("/home", 0, 0o755))
    said = plan.untrusted([Chain(Path("/home/ann/.venv/bin/babblerd"), chain.steps)])
    assert said is not None and "which the service cannot see" in said


def test_status_for_people_and_programs() -> None:
    running = plan.Status("linux", True, True, "/etc/x.service", "/p/babblerd", "0.1.0")
    assert running.lines() == [
        "installed: /etc/x.service",
        "program: /p/babblerd",
        "running, version 0.1.0",
    ]
    assert running.as_json()["running"] is True
    assert plan.Status("linux", False, False).lines()[0].startswith("not installed")


def test_babblerd_routes_the_subcommands_without_the_daemon() -> None:
    """The lean path: `babblerd system-daemon-status` imports nothing of the daemon's
    runtime (trio, structlog, pyroute2, the daemon's rooms)."""
    probe = (
        "import sys; sys.argv = ['babblerd', 'system-daemon-status', '--json']\n"
        "from babbler.daemon import cli\n"
        "try:\n    cli.run()\nexcept SystemExit as e:\n    code = e.code\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('trio', 'structlog', 'pyroute2')"
        " or m in ('babbler.daemon.serve', 'babbler.daemon.lifecycle')]\n"
        "print('HEAVY', heavy, 'EXIT', code, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    # installed or not is this host's (exit 0 where babblerd is installed and running)
    assert re.search(r"HEAVY \[\] EXIT [01]$", done.stderr, re.MULTILINE), done.stderr
    assert isinstance(json.loads(done.stdout)["installed"], bool)


def test_install_refuses_unknown_and_fixed_flags_with_one_line() -> None:
    for args, said in (
        (["--state-dir", "/x"], "--state-dir: a service keeps babblerd's default directories"),
        (["--mode", "sometimes"], "Invalid value for '--mode'"),
        (["--hello-interval", "0"], "hello-interval: must be between"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "babbler.daemon.cli", "install-system-daemon", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
        )
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr, (args, done.stderr)


ROOT = Path(__file__).resolve().parents[2]
PYPI_BABBLER = re.compile(r"pip install (--upgrade )?babbler($|[\s&`;)])", re.MULTILINE)


def test_the_way_out_never_installs_pypis_babbler() -> None:
    """`babbler` on PyPI is someone else's project: root must install the checkout."""
    for text in (plan.ROOT_INSTALL, plan.ROOT_INSTALL_MACOS):
        assert not PYPI_BABBLER.search(text), text
    for doc in ("README.md", "docs/operations.md", "docs/macos.md"):
        assert not PYPI_BABBLER.search((ROOT / doc).read_text()), doc
    assert "pip install /path/to/babbler-checkout" in plan.ROOT_INSTALL


# Any text a flag may carry but lone surrogates (not text in a UTF-8 file): controls,
# format characters and characters above U+FFFF among them.
any_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=12)


@given(st.lists(any_text, min_size=1, max_size=3))
def test_any_text_reads_back_as_written(values: list[str]) -> None:
    text = plan.config_text({"interface": tuple(values)})
    assert plan.parse_config(text)["interface"] == values
    assert plan.written_by_install(text)


def test_a_character_above_the_bmp_reads_back_whole() -> None:
    text = plan.config_text({"interface": ("a\U000e0001b",)})
    assert plan.parse_config(text)["interface"] == ["a\U000e0001b"]


def test_the_chain_is_every_path_from_the_root_as_lstat_sees_it(tmp_path: Path) -> None:
    """A venv directory a user owns shows in the chain to a program reached through a
    link, and makes it refused, naming that directory."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "babblerd"
    script.write_text("#!/bin/sh\n")
    if os.geteuid() == 0:
        os.chown(venv, 65534, 65534)
    owner = venv.stat().st_uid  # nobody's; a user's own when not run as root
    link = tmp_path / "babblerd"
    link.symlink_to(script)
    found = program.chain(link)
    assert found.target == script.resolve()
    steps = {step.path: step for step in found.steps}
    assert steps[Path("/")].uid == 0 and steps[venv].uid == owner != 0
    assert [step.path for step in found.steps] == [*reversed(script.parents), script]
    said = plan.untrusted([Chain(found.target, (steps[venv],))])
    assert said is not None and said.startswith(f"{venv} (owned by uid {owner})")


def test_what_the_service_would_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter, the babbler package and every import directory there is."""
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "gone"), ""])
    found = program.imported_from()
    assert found == [Path(sys.executable), Path(plan.__file__).parents[1], tmp_path]
