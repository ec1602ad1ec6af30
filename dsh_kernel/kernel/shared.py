"""The kernel's link to the shared store (``DSH_SHARED_STORE``, traitlet ``shared_store``).

``SharedLink(target)`` starts a ``Shipper`` (``store.shared.shipper``) when a target is configured,
the driver is installed and the target is acceptable; otherwise it keeps the one line that says why
not (no psycopg: install ``dsh-kernel[shared]``; a password inside the URL), logs it once, and the
kernel goes on with its local store — a shared store is never a reason for a kernel not to start or a
cell to fail. ``follow`` adds each session journal the host attaches; ``text()`` is the ``shared:``
line of ``%agent status`` (``None`` when no shared store is configured); ``close()`` gives the
shipper a short last round at shutdown.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dsh_kernel.errors import StoreError

if TYPE_CHECKING:
    from dsh_kernel.agent.hooks import AgentHooks
    from dsh_kernel.store.journal import JournalWriter
    from dsh_kernel.store.shared.shipper import Shipper

__all__ = ["SharedLink", "check_at_start", "take_password"]

_log = logging.getLogger(__name__)


class SharedLink:
    """See the module docstring."""

    def __init__(self, target: str) -> None:
        self.shipper: Shipper | None = None
        self.problem: str | None = None
        """Why a configured shared store is off (one line), else ``None``."""
        if not target.strip():
            return
        from dsh_kernel.store.shared.connection import driver
        from dsh_kernel.store.shared.shipper import Shipper

        try:
            driver()
            self.shipper = Shipper(target)
        except StoreError as exc:
            self.problem = f"off: {exc.message}"
            _log.warning("dsh: the shared store is %s", self.problem)

    def follow(self, writer: JournalWriter, hooks: AgentHooks) -> None:
        """Ship ``writer``'s journal after each of ``hooks``' checkpoints."""
        if self.shipper is not None:
            self.shipper.follow(writer, hooks)

    def text(self) -> str | None:
        """The ``%agent status`` line (``None``: no shared store configured)."""
        if self.shipper is not None:
            return self.shipper.status().line()
        return self.problem

    def close(self) -> None:
        """A last, short round of shipping; then the shipper stops."""
        if self.shipper is not None:
            self.shipper.close()
            self.shipper = None


def check_at_start(
    target: str, log: logging.Logger | logging.LoggerAdapter[logging.Logger]
) -> None:
    """Say in the kernel log at start when a configured shared store is off (``%agent status`` says
    it again). A password in the target is refused, and ``PGPASSWORD`` learnt by the redactor,
    before anything logs. The shared store's loggers write to the kernel log's handlers from now on:
    without a handler of their own, Python's last-resort handler wrote their warnings to
    ``sys.stderr`` — the running cell's output, saved into the notebook."""
    base = log.logger if isinstance(log, logging.LoggerAdapter) else log
    for name in ("dsh_kernel.store.shared", "dsh_kernel.kernel.shared"):
        logger = logging.getLogger(name)
        for handler in base.handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)
        logger.propagate = not base.handlers
    if not target:
        return
    import os

    from dsh_kernel.llm.secrets import REDACTOR
    from dsh_kernel.store.shared.connection import check_target, driver

    REDACTOR.add_password(os.environ.get("PGPASSWORD"))
    try:
        check_target(target)
        driver()
    except StoreError as exc:
        log.warning("dsh: the shared store is off: %s", exc.message)


def take_password(log: logging.Logger | logging.LoggerAdapter[logging.Logger]) -> None:
    """Move ``PGPASSWORD`` out of ``os.environ`` into the key store, as the model API keys are (the
    read-only ``inspect`` tool returns ``os.environ``), after teaching the redactor it whatever its
    length; ``store.shared.connection.connect`` gives it to libpq explicitly."""
    import os

    from dsh_kernel.llm.keys import KEYS
    from dsh_kernel.llm.secrets import REDACTOR

    REDACTOR.add_password(os.environ.get("PGPASSWORD"))
    for warning in KEYS.take_environment(("PGPASSWORD",)):
        log.warning("dsh: %s", warning)
