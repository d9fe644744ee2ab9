"""Keeps the kernel's policy-routing rules as core/fence.py plans them (Linux): adds and
removes only the difference. The first call reads what is there, so rules a crashed
babblerd left (they are marked `proto babel` at babblerd's priorities) are taken over and
put right, and removed on stop."""

from __future__ import annotations

import structlog

from babbler.core.errors import KernelError
from babbler.core.fence import Rule
from babbler.daemon.links.kernel import Kernel

log = structlog.get_logger()


class FenceRules:
    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._have: set[Rule] | None = None  # None: not read yet
        self._failed: set[Rule] = set()  # said once each

    async def _read(self) -> set[Rule]:
        if self._have is None:
            self._have = await self._kernel.read_rules()
            if self._have:
                log.info("rules left by an earlier babblerd", rules=sorted(map(str, self._have)))
        return self._have

    async def add(self, wanted: frozenset[Rule]) -> None:
        """Add what is missing, remove nothing yet."""
        await self.apply(wanted | await self._read())

    async def apply(self, wanted: frozenset[Rule]) -> None:
        """Make the rules exactly `wanted`."""
        have = await self._read()
        for rule in sorted(have - wanted, reverse=True):  # the last resort goes first
            if await self._change("remove", rule):
                have.discard(rule)
        for rule in sorted(wanted - have):  # the mesh lookups go first
            if await self._change("add", rule):
                have.add(rule)

    async def _change(self, verb: str, rule: Rule) -> bool:
        """Add or remove one rule; a failure is said once per rule."""
        change = self._kernel.add_rule if verb == "add" else self._kernel.remove_rule
        try:
            await change(rule)
        except KernelError as error:
            if rule not in self._failed:
                log.warning(f"cannot {verb} rule", rule=str(rule), error=str(error))
            self._failed.add(rule)
            return False
        self._failed.discard(rule)
        return True
