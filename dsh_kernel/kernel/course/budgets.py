"""The course's daily budgets in the kernel: the agent's spending gate, its prices, and what
``%agent status`` and the chat cell's footer say is left.

The budgets themselves are ``CourseSettings.budget_tokens`` / ``budget_usd`` (``kernel.course.config``:
the administrator's traitlets and the environment as the kernel started, the lower winning). This
module turns them into the engine's ``SpendGate`` (``agent.request.spend``) for every agent the host builds
(a new session, a resumed or forked one), over one ``DailyLedger`` per kernel
(``store.ledger``: this user's usage today across all the store's sessions, so ``%agent new`` and a
restart reset nothing). The refusal names the setting in force (``CourseSettings.origin``) and says
it is set by the course's administrator: nothing in the notebook raises it (there is no ``%agent``
command for it; the environment is read once, at start).

**Prices.** A dollar budget counts each route at its *list* price (the provider's catalogue entry)
— or at the price set with ``dsh_kernel.store.set_price`` where that is *higher*, field by field: a
price the user sets can make the budget count more (a proxy's markup), never less, so it cannot be
used to dodge the budget. A route with no list price is unpriced for the budget whatever
``set_price`` says (a student could set it to zero): under a dollar budget it is refused
(``BUDGET_UNPRICED``); a course running a local or proxied model sets a token budget instead.

The offline demo model and replay send nothing to anyone: they are neither gated nor counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from dsh_kernel.agent.request.spend import Budget, SpendGate, catalogue_price
from dsh_kernel.kernel.course.config import CourseSettings
from dsh_kernel.llm.types import ModelInfo
from dsh_kernel.store.ledger import DailyLedger
from dsh_kernel.store.prices import UserPrice

if TYPE_CHECKING:
    from dsh_kernel.agent.agent import Agent
    from dsh_kernel.store.layout import Store

FREE_PROVIDERS: Final = frozenset({"offline", "replay"})
"""Providers that send nothing anywhere: no budget applies to them."""
OWNER: Final = "your course's administrator"


def course_budget(course: CourseSettings) -> Budget:
    """The engine's ``Budget`` of a course's settings, naming the setting in force."""
    return Budget(
        tokens=course.budget_tokens,
        usd=course.budget_usd,
        tokens_setting=course.origin.get("budget_tokens", "DSH_BUDGET_TOKENS"),
        usd_setting=course.origin.get("budget_usd", "DSH_BUDGET_USD"),
        owner=OWNER,
    )


def _higher(a: float | None, b: float | None) -> float | None:
    return a if b is None or (a is not None and a >= b) else b


def budget_price(listed: ModelInfo | None, user: UserPrice | None) -> ModelInfo | None:
    """What the budget counts a route at: the list price, raised field by field where the user's
    price is higher; ``None`` without a list price (module docstring)."""
    if (
        listed is None
        or listed.input_price_per_mtok is None
        or listed.output_price_per_mtok is None
    ):
        return None
    if user is None:
        return listed
    # an unset cache price is billed as input, on either side: compare like with like
    listed_in, user_in = listed.input_price_per_mtok, user.input_per_mtok

    def cache(a: float | None, b: float | None) -> float | None:
        return _higher(a if a is not None else listed_in, b if b is not None else user_in)

    return replace(
        listed,
        input_price_per_mtok=_higher(listed_in, user_in),
        cached_input_price_per_mtok=cache(
            listed.cached_input_price_per_mtok, user.cached_input_per_mtok
        ),
        cache_write_price_per_mtok=cache(
            listed.cache_write_price_per_mtok, user.cache_write_per_mtok
        ),
        output_price_per_mtok=_higher(listed.output_price_per_mtok, user.output_per_mtok),
    )


class KernelBudgets:
    """The budgets of one kernel (module docstring). ``user_price`` is the store's ``prices``
    table (``AgentHost.user_price``)."""

    def __init__(
        self,
        course: CourseSettings,
        store: Store | None,
        user_price: Callable[[str, str], UserPrice | None],
    ) -> None:
        self.budget = course_budget(course)
        self.ledger = DailyLedger(store, course.user)
        self._user_price = user_price
        self._agent: Agent | None = None

    def gate(self, agent: Agent) -> SpendGate | None:
        """The spending gate of ``agent`` (the host's current agent); ``None`` without a budget."""
        self._agent = agent
        if not self.budget.limited:
            return None
        return SpendGate(
            self.budget,
            usage=lambda: self.ledger.usage(agent.session),
            price=lambda provider, model: self._price(agent, provider, model),
            free=FREE_PROVIDERS,
        )

    def _price(self, agent: Agent, provider: str, model: str) -> ModelInfo | None:
        p = agent.providers.get(provider)
        listed = p.model_info(model) if p is not None else catalogue_price(provider, model)
        return budget_price(listed, self._user_price(provider, model))

    def status_text(self) -> str | None:
        """The ``%agent status`` line: what is used and left today, or ``None`` without a budget."""
        agent = self._agent
        spend = agent.spend if agent is not None else None
        if spend is None:
            return None
        text = f"{spend.reading().describe()}; set by {OWNER}"
        if agent is not None and agent.provider.id in FREE_PROVIDERS:
            text += f" ({agent.provider.id} sends nothing and spends none of it)"
        return text

    def footer_text(self, fresh: bool) -> str | None:
        """The footer's part: what is left today (``fresh``: read now, at the turn's end; else the
        gate's latest reading, while the turn streams); ``None`` without a budget or on a free
        route."""
        agent = self._agent
        spend = agent.spend if agent is not None else None
        if spend is None or agent is None or agent.provider.id in FREE_PROVIDERS:
            return None
        reading = spend.reading() if fresh or spend.last is None else spend.last
        return reading.left() or None
