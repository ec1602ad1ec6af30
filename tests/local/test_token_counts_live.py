"""Calibrated counts against a real llama-cpp-python server (``llm.calibration``; ``make test-local``).

llama-cpp-python reports no usage on a stream, so what the kernel knows of its counts comes from
the server's tokenizer (``/extras/tokenize/count``) and from probing its chat template once (two
one-token answers, without and with a small tool). After a couple of turns the count ``%agent
status`` shows for the next request must be within 5 % of the ``prompt_tokens`` the server itself
reports for that request — sent by the test, unstreamed, one token — for both models: Qwen2.5's
template, which adds a tool preamble, and SmolLM2's, which leaves the tools out. Asserted on the
requests and the log, never on what the model said."""

from __future__ import annotations

import http.client
import json
import re
from typing import Any

import pytest

from tests.local.conftest import TEMPLATE_PROBE_POSTS, KernelFactory, chat_posts, sql
from tests.local.server import LlamaServer

pytestmark = [pytest.mark.local, pytest.mark.timeout(900)]

PROMPTS = (
    "Reply with only the word OK.",
    "Write a Python function add(a, b) that returns a + b. Only the code.",
)
NEXT_BODY = r"""
import json as _j
from dsh_kernel.agent.request.envelope import generate_request
from dsh_kernel.session.derive import last_request_header
from dsh_kernel.llm.providers.openai_compat.serialize import serialize_request
_a = get_ipython().kernel.host.agent
_h = last_request_header(list(_a.session.events))
_r = generate_request(_h, tuple(_a.session.derive_messages()), _a.session.id)
print(_j.dumps(serialize_request(_r, _a.provider.profile, _a.provider._defaults)))
"""


def reported_prompt(server: LlamaServer, body: dict[str, Any]) -> int:
    """The server's own ``prompt_tokens`` for ``body``, sent unstreamed for one token."""
    body = {**body, "stream": False, "max_tokens": 1}
    body.pop("stream_options", None)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    try:
        conn.request(
            "POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"}
        )
        raw = conn.getresponse().read()
    finally:
        conn.close()
    return int(json.loads(raw)["usage"]["prompt_tokens"])


@pytest.mark.parametrize("model", ["qwen", "smollm"])
def test_the_next_requests_count_is_within_5_percent_of_the_servers(
    kernel_at: KernelFactory, model: str, request: pytest.FixtureRequest
) -> None:
    server: LlamaServer = request.getfixturevalue(model)
    with kernel_at(server) as k:
        for prompt in PROMPTS:
            ex = k.execute(prompt, timeout=600)
            assert ex.status == "ok", ex.content
        streamed = chat_posts(server)
        contexts = [e["data"] for e in k.events() if e["type"] == "request/context"]
        assert contexts and contexts[-1]["tokenCalibration"] == "tokenizer", contexts
        status = k.execute("%agent status").stdout
        found = re.search(r"~([\d,]+) tokens \(estimated; estimates calibrated ×", status)
        assert found, status
        counted = int(found.group(1).replace(",", ""))
        body = json.loads(k.python(NEXT_BODY).strip().splitlines()[-1])
        real = reported_prompt(server, body)
        assert abs(counted - real) <= 0.05 * real, (counted, real, status)
        # the template was probed once: two one-token answers beside the turns' own requests
        [sent] = sql(k, "SELECT count(*) AS n FROM requests")
        assert streamed == sent["n"] + TEMPLATE_PROBE_POSTS, (streamed, sent)
