"""docs/mcp.md says what the MCP client does: its examples are configurations the kernel accepts,
every failure code the client reports has its troubleshooting entry, and the figures it gives are
the code's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.kernel.configuration import SETTINGS
from dsh_kernel.mcp import server as server_module
from dsh_kernel.mcp import tools as tools_module
from dsh_kernel.mcp.config import McpConfigError, entry_from_text, parse_document

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
FLAT = " ".join(DOC.split())


def test_the_json_examples_are_accepted_as_written() -> None:
    blocks = re.findall(r"```json\n(.*?)```", DOC, flags=re.S)
    assert len(blocks) == 2
    entries = [e for b in blocks for e in parse_document(json.loads(b), "mcp.md")]
    assert [e.name for e in entries] == ["time", "git", "tracker"]
    assert all(e.problem is None for e in entries), [e.problem for e in entries]
    by_name = {e.name: e for e in entries}
    assert by_name["tracker"].transport == "http"
    assert by_name["time"].trust == "read-only-hints" and by_name["git"].timeout_s == 600


def test_the_add_examples_are_accepted_as_written() -> None:
    examples = re.findall(r"`%agent mcp add ([a-z][\w.-]*) ([^`]+)`", DOC)
    assert [name for name, _ in examples] == ["time", "git"]
    time, git = (entry_from_text(name, text) for name, text in examples)
    assert time.command == "uvx" and time.args == ("mcp-server-time",)
    assert git.args == ("mcp-server-git",) and git.trust == "read-only-hints"


def test_a_windows_path_on_the_add_line_is_as_the_doc_says() -> None:
    assert "`C:\\tools\\server.exe` would become `C:toolsserver.exe`" in DOC
    assert entry_from_text("s", r"C:\tools\server.exe").command == "C:toolsserver.exe"
    assert entry_from_text("s", "C:/tools/server.exe").command == "C:/tools/server.exe"
    as_json = '{"command": "C:\\\\tools\\\\server.exe"}'
    assert entry_from_text("s", as_json).command == r"C:\tools\server.exe"


def test_the_secret_rules_hold_as_the_doc_says() -> None:
    for key in ("GITHUB_TOKEN", "X-Api-Key", "apiKey", "Authorization"):
        assert f"`{key}`" in DOC
        doc: JsonValue = {
            "mcpServers": {"s": {"url": "https://x.org/mcp", "headers": {key: "literal"}}}
        }
        (entry,) = parse_document(doc, "t")
        assert entry.problem is not None and "written in the file" in entry.problem
    from dsh_kernel.llm.secrets import KEY_VARIABLES

    for variable in KEY_VARIABLES.values():
        assert f"`{variable}`" in DOC
        try:
            entry_from_text("s", json.dumps({"command": "x", "env": {"V": f"${{{variable}}}"}}))
        except McpConfigError as exc:
            assert "API key" in exc.message
        else:
            raise AssertionError(f"a reference to {variable} was accepted")


def test_every_failure_code_has_its_troubleshooting_entry() -> None:
    source = "".join(
        (ROOT / "dsh_kernel" / "mcp" / name).read_text(encoding="utf-8")
        for name in ("config.py", "server.py", "tools.py", "servers.py")
    )
    raised = set(re.findall(r'code(?: =|=)\s*"([A-Z_]+)"', source)) - {"MCP_CALL_FAILED"}
    assert {"MCP_CONFIG", "MCP_SERVER_UNAVAILABLE", "MCP_TIMEOUT", "MCP_SERVER_CRASHED"} <= raised
    troubleshooting = DOC.split("\n## Troubleshooting\n", 1)[1]
    entries = set(re.findall(r"^#### `([A-Z_]+)`$", troubleshooting, flags=re.M))
    assert raised | {"INVALID_ARGS"} <= entries, raised - entries
    # and the two failures that are lines, not codes
    missing = "the MCP client is not installed: pip install 'dsh-kernel[mcp]'"
    assert missing in FLAT and missing in source
    assert "*command not found: uvx*" in DOC and '"command not found: ' in source


def test_the_figures_are_the_codes() -> None:
    defaults = {s.name: s.default for s in SETTINGS}
    assert defaults["mcp_wait"] == "5" and "default 5)" in FLAT
    assert defaults["mcp_idle_timeout"] == "120" and "default 120)" in FLAT
    for setting in ("mcp_config", "mcp_trusted", "mcp_wait", "mcp_idle_timeout"):
        assert f"`c.DshKernel.{setting}`" in DOC
    assert server_module.CONNECT_TIMEOUT_S == 60 and "may take 60 s" in FLAT
    assert tools_module.CallLimits().deadline_s == 3600 and "an hour in all" in FLAT
    assert tools_module.MAX_DESCRIPTION == 2_000 and "(2,000 characters)" in FLAT
    assert tools_module.MAX_RESOURCE_TEXT == 4_000 and "cut to 4,000 characters" in FLAT
    assert tools_module.MAX_STRUCTURED_BYTES == 32_000 and "up to 32,000 bytes" in FLAT
    assert tools_module.MAX_NAME == 64 and "64 characters" in FLAT


def test_the_servers_environment_is_the_sdks_safe_set() -> None:
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

    listed = re.search(r"safe set — (.*?) \(on Windows", FLAT)
    assert listed is not None
    names = re.findall(r"`([A-Z_]+)`", listed.group(1))
    assert sorted(names) == sorted(DEFAULT_INHERITED_ENV_VARS)


def test_the_doc_is_linked_from_where_users_look() -> None:
    for page in ("guide.md", "troubleshooting.md", "security.md", "install.md", "course.md"):
        assert "](mcp.md" in (ROOT / "docs" / page).read_text(encoding="utf-8"), page
