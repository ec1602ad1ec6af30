"""A course's settings (issue 17, ``kernel.course.config``): the stricter of configuration and
environment wins, values that do not parse name their setting, and the header round-trips them."""

from __future__ import annotations

import os
import pwd

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.course.config import (
    account_name,
    course_settings,
    current_user,
    stricter,
)
from dsh_kernel.session.codec import header_from_json, header_to_json
from dsh_kernel.session.events import SessionHeader


def test_the_stricter_policy_wins_whichever_side_sets_it() -> None:
    assert course_settings(env={}).ai_policy == "full"
    assert (
        course_settings(ai_policy="explain", env={"DSH_AI_POLICY": "full"}).ai_policy == "explain"
    )
    got = course_settings(ai_policy="explain", env={"DSH_AI_POLICY": "off"})
    assert got.ai_policy == "off" and got.origin["ai_policy"] == "DSH_AI_POLICY"
    assert stricter("full", "off") == stricter("off", "explain") == "off"


def test_the_lower_budget_wins_and_says_where_it_came_from() -> None:
    got = course_settings(
        budget_tokens="50000",
        budget_usd="3",
        env={"DSH_BUDGET_TOKENS": "20,000", "DSH_BUDGET_USD": "$5"},
    )
    assert (got.budget_tokens, got.budget_usd) == (20_000, 3.0)
    assert got.origin == {
        "budget_tokens": "DSH_BUDGET_TOKENS",
        "budget_usd": "c.DshKernel.budget_usd",
    }
    assert course_settings(env={"DSH_BUDGET_TOKENS": "none"}).budget_tokens is None
    assert course_settings(env={"DSH_BUDGET_TOKENS": "0"}).budget_tokens == 0
    largest = course_settings(env={"DSH_BUDGET_TOKENS": "9,007,199,254,740,992"})
    assert largest.budget_tokens == 2**53  # the largest the log keeps exactly


@pytest.mark.parametrize(
    ("kw", "env", "named"),
    [
        ({}, {"DSH_AI_POLICY": "of"}, "DSH_AI_POLICY='of'"),
        ({"ai_policy": "strict"}, {}, "c.DshKernel.ai_policy = 'strict'"),
        ({}, {"DSH_BUDGET_TOKENS": "lots"}, "DSH_BUDGET_TOKENS='lots'"),
        ({}, {"DSH_BUDGET_TOKENS": "9007199254740993"}, "DSH_BUDGET_TOKENS='9007199254740993'"),
        ({"budget_tokens": str(2**60)}, {}, f"c.DshKernel.budget_tokens = '{2**60}'"),
        ({}, {"DSH_BUDGET_USD": "-1"}, "DSH_BUDGET_USD='-1'"),
        ({}, {"DSH_BUDGET_USD": "nan"}, "DSH_BUDGET_USD='nan'"),
    ],
)
def test_a_value_that_does_not_parse_names_its_setting(
    kw: dict[str, str], env: dict[str, str], named: str
) -> None:
    with pytest.raises(UsageError, match=named.replace("(", r"\(").replace(".", r"\.")):
        course_settings(**kw, env=env)


def test_the_user_is_jupyterhubs_else_the_login() -> None:
    assert current_user({"JUPYTERHUB_USER": "ada", "USER": "jovyan"}) == "ada"
    assert current_user({"USER": "jovyan"}) == "jovyan"
    account = pwd.getpwuid(os.getuid()).pw_name
    assert current_user({}) == account  # a container that sets neither variable
    assert current_user({"JUPYTERHUB_USER": " ", "USER": ""}) == account


def test_an_account_with_no_name_is_no_user_and_no_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = {e.pw_uid for e in pwd.getpwall()}
    monkeypatch.setattr(
        os, "getuid", lambda: next(u for u in range(70_000, 80_000) if u not in taken)
    )
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    account_name.cache_clear()
    try:
        assert current_user({}) is None
    finally:
        account_name.cache_clear()


def test_the_header_round_trips_user_and_policy() -> None:
    header = SessionHeader(id="s", created_at=1, user="ada", ai_policy="explain")
    encoded = header_to_json(header)
    assert encoded["user"] == "ada" and encoded["aiPolicy"] == "explain"
    assert header_from_json(encoded, where="t") == header
    assert "user" not in header_to_json(SessionHeader(id="s", created_at=1))
