"""A kernel that fails: what status shows, what is logged (each kind once, and the
recovery once), when a pass is tried again; and link snapshots that cannot be true."""

from __future__ import annotations

import errno

import pytest
import trio
import trio.testing

from babbler.core.errors import KernelError
from babbler.core.kernelhealth import PROBLEM_MAX, KernelHealth
from babbler.core.links import Link
from babbler.daemon.links.kernel import EVENTS_FALLBACK, Guarded, nonsense
from tests.fakes.kernel import FakeKernel

LINKS = "cannot read links: Cannot allocate memory"
SYSCTL = "cannot set net.inet6.ip6.forwarding=1: Operation not permitted"


def test_each_kind_is_said_once_until_a_clean_pass_and_the_retries_back_off() -> None:
    health = KernelHealth(first=0.5, cap=2.0)
    first = health.after_pass([LINKS])
    assert first.said == (LINKS,) and health.problem == LINKS
    again = health.after_pass(["cannot read links: no answer in 6 s", SYSCTL])
    assert again.said == (SYSCTL,)  # links: the same kind, said already
    assert health.problem == "cannot read links: no answer in 6 s"  # the latest pass's first
    later = health.after_pass([LINKS])
    delays = [first.retry_in, again.retry_in, later.retry_in]
    assert delays == [pytest.approx(b, rel=0.1) for b in (0.5, 1.0, 2.0)]  # 10 % jitter
    assert later.said == ()
    clean = health.after_pass([])
    assert clean.recovered == 3 and clean.retry_in is None and health.problem is None
    assert health.after_pass([]).recovered == 0  # said once
    back = health.after_pass([LINKS])
    assert back.said == (LINKS,) and back.retry_in == pytest.approx(0.5, rel=0.1)


def test_the_problem_shown_is_one_short_line() -> None:
    health = KernelHealth()
    health.after_pass(["cannot read links: ifconfig -l: " + "garbage\n" * 100])
    assert health.problem is not None and "\n" not in health.problem
    assert len(health.problem) == PROBLEM_MAX and health.problem.endswith("...")


def test_link_snapshots_that_cannot_be_true_are_told() -> None:
    good = {"v1": Link("v1", 2), "v2": Link("v2", 3)}
    assert nonsense(good) is None and nonsense({}) is None
    assert nonsense({"v1": Link("v2", 2)}) == "link 'v2' listed as 'v1'"
    assert nonsense({"v1": Link("v1", 0)}) == "link 'v1' has index 0"
    assert nonsense({"v1": Link("v1", 2), "v2": Link("v2", 2)}) == (
        "links 'v1' and 'v2' have one index, 2"
    )
    assert nonsense({"v1": "up"}) == "'v1' is not a link"
    assert nonsense(["v1"]) == "not a table of links but list"


async def test_the_guarded_kernel_bounds_every_call_and_says_which_read_failed() -> None:
    kernel = FakeKernel(Link("v1", 2))
    guarded = Guarded(kernel, deadline=0.2)
    assert await guarded.read_links() == kernel.links
    kernel.inject("read_routes_v4", "hang")
    with trio.fail_after(2), pytest.raises(KernelError) as hung:
        await guarded.read_routes_v4()
    assert str(hung.value) == "cannot read IPv4 routes: no answer in 0.2 s"
    assert hung.value.errno == errno.ETIMEDOUT and kernel.hanging == 0
    kernel.inject("read_links", "nonsense")
    with pytest.raises(KernelError, match=r"^cannot read links: nonsense \(link 'v1' listed"):
        await guarded.read_links()
    kernel.inject("read_rules", "fail")
    with pytest.raises(KernelError, match=r"^cannot read rules: read_rules: Cannot allocate"):
        await guarded.read_rules()
    assert await guarded.read_rules() == set()  # once


class DeafKernel(FakeKernel):
    """Its change events fail (a socket error other than ENOBUFS)."""

    async def wait_for_change(self) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")


async def test_failing_change_events_become_a_reread_every_two_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    guarded = Guarded(DeafKernel())
    start = trio.current_time()
    for _ in range(3):
        await guarded.wait_for_change()  # returns: a trigger, never an end of the daemon
    assert trio.current_time() - start == pytest.approx(3 * EVENTS_FALLBACK)


class RouteDeafKernel(FakeKernel):
    """Its route events fail."""

    routes_trigger = True

    async def wait_for_route_change(self) -> None:
        raise OSError(errno.EBADF, "Bad file descriptor")


async def test_failing_route_events_say_so_and_leave_the_table_dumped_every_second() -> None:
    """A route socket that fails is no end of the daemon: it waits for ever, and says it no
    longer triggers, so the mesh keeps dumping babeld's table every dump_interval."""
    guarded = Guarded(RouteDeafKernel())
    assert guarded.routes_trigger
    with trio.move_on_after(0.5) as waited:
        await guarded.wait_for_route_change()
    assert waited.cancelled_caught and not guarded.routes_trigger
