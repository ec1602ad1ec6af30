"""``mcp.config``: where MCP servers are configured, the shapes an entry may take, and the secrets
an entry may refer to but never hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.mcp.config import (
    McpConfigError,
    ServerEntry,
    as_json,
    config_files,
    entry_from_text,
    load_servers,
    parse_entry,
    read_file,
    resolve,
)


def write(path: Path, servers: dict[str, JsonValue], key: str = "mcpServers") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({key: servers}), encoding="utf-8")
    return path


def entry(value: JsonValue, name: str = "srv", source: str = "test.json") -> ServerEntry:
    return parse_entry(name, value, source)


# -- discovery ------------------------------------------------------------------------------------


def test_files_are_found_nearest_first(tmp_path: Path) -> None:
    project = tmp_path / "project"
    notebook_dir = project / "analysis" / "week1"
    notebook_dir.mkdir(parents=True)
    here = write(notebook_dir / "mcp.json", {})
    parent = write(project / ".mcp.json", {})
    user, system = tmp_path / "user-jupyter", tmp_path / "etc-jupyter"
    user_file = write(user / "mcp.json", {})
    system_file = write(system / "mcp.json", {})
    explicit = write(tmp_path / "elsewhere" / "named.json", {})

    files = config_files(notebook_dir, [user, system], str(explicit))

    assert files == [explicit, here, parent, user_file, system_file]


def test_a_folder_with_both_names_gives_mcp_json_only(tmp_path: Path) -> None:
    plain = write(tmp_path / "mcp.json", {})
    write(tmp_path / ".mcp.json", {})
    assert config_files(tmp_path, []) == [plain]


def test_a_folder_with_only_the_dot_name_gives_it(tmp_path: Path) -> None:
    dotted = write(tmp_path / ".mcp.json", {})
    assert config_files(tmp_path, []) == [dotted]


def test_a_jupyter_dir_is_read_only_for_mcp_json(tmp_path: Path) -> None:
    jupyter = tmp_path / "jupyter"
    write(jupyter / ".mcp.json", {})
    notebook_dir = tmp_path / "nb"
    notebook_dir.mkdir()
    assert config_files(notebook_dir, [jupyter]) == []


def test_a_file_found_twice_is_listed_once(tmp_path: Path) -> None:
    here = write(tmp_path / "mcp.json", {})
    assert config_files(tmp_path, [tmp_path], str(here)) == [here]


def test_an_explicit_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError) as caught:
        config_files(tmp_path, [], str(tmp_path / "missing.json"))
    assert caught.value.code == "MCP_CONFIG"
    assert "missing.json" in caught.value.message
    assert "c.DshKernel.mcp_config" in caught.value.message


def test_the_nearer_file_wins_per_server(tmp_path: Path) -> None:
    near = write(
        tmp_path / "near.json",
        {"time": {"command": "near-time"}, "git": {"command": "near-git"}},
    )
    far = write(
        tmp_path / "far.json",
        {"time": {"command": "far-time", "args": ["--x"]}, "fetch": {"command": "far-fetch"}},
    )

    servers, problems = load_servers([near, far])

    assert problems == []
    assert sorted(servers) == ["fetch", "git", "time"]
    # the whole entry of the nearer file, not a merge of the two
    assert servers["time"].command == "near-time" and servers["time"].args == ()
    assert servers["time"].source == str(near)
    assert servers["fetch"].source == str(far)


def test_disabled_switches_a_farther_files_server_off(tmp_path: Path) -> None:
    near = write(tmp_path / "near.json", {"time": {"disabled": True}})
    far = write(tmp_path / "far.json", {"time": {"command": "t"}, "git": {"command": "g"}})
    servers, _ = load_servers([near, far])
    assert sorted(servers) == ["git"]


def test_vs_codes_servers_key_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.json",
        {"time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}},
        key="servers",
    )
    (time,) = read_file(path)
    assert time.transport == "stdio" and time.command == "uvx" and time.args == ("mcp-server-time",)


def test_a_file_that_is_not_json_is_one_problem_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"time": ', encoding="utf-8")
    good = write(tmp_path / "good.json", {"git": {"command": "g"}})

    servers, problems = load_servers([broken, good])

    assert list(servers) == ["git"]
    assert len(problems) == 1
    assert str(broken) in problems[0] and "not JSON" in problems[0]
    assert "\n" not in problems[0]


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ([1, 2], "expected an object"),
        ({"other": {}}, 'no "mcpServers"'),
        ({"mcpServers": [1]}, "must be an object"),
    ],
)
def test_a_file_of_the_wrong_shape_says_so(tmp_path: Path, doc: JsonValue, said: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _, problems = load_servers([path])
    assert len(problems) == 1 and said in problems[0] and str(path) in problems[0]


def test_a_bad_entry_spoils_only_itself(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mcp.json",
        {"good": {"command": "uvx"}, "bad": {"args": ["no command"]}, "worse": "a string"},
    )
    servers, problems = load_servers([path])
    assert problems == []
    assert servers["good"].problem is None and servers["good"].command == "uvx"
    bad, worse = servers["bad"].problem, servers["worse"].problem
    assert bad is not None and "'bad'" in bad and "give a command" in bad and str(path) in bad
    assert worse is not None and "expected an object" in worse


def test_sse_is_refused_with_its_line() -> None:
    got = entry({"type": "sse", "url": "https://example.org/sse"})
    assert got.problem is not None
    assert "SSE transport is deprecated" in got.problem and "type http" in got.problem


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"type": "websocket", "url": "wss://x"}, "is not stdio or http"),
        ({"command": "x", "trust": "always"}, "trust 'always'"),
        ({"command": "x", "timeout": 0}, "timeout must be a positive number"),
        ({"command": "x", "timeout": True}, "timeout must be a positive number"),
        ({"command": "x", "args": "--flag"}, "args must be a list of strings"),
        ({"url": "ftp://example.org"}, "url must be an http:// or https://"),
        ({"type": "http"}, "url must be an http:// or https://"),
        ({"command": "x", "env": {"A": 1}}, "env must be an object of strings"),
    ],
)
def test_entry_problems_name_the_key(value: JsonValue, said: str) -> None:
    got = entry(value)
    assert got.problem is not None and said in got.problem and "'srv'" in got.problem


def test_a_bad_server_name_is_refused() -> None:
    got = entry({"command": "x"}, name="my server")
    assert got.problem is not None and "server name" in got.problem


def test_http_entry_shapes() -> None:
    implied = entry({"url": "https://example.org/mcp", "headers": {"X-Team": "data"}})
    assert implied.transport == "http" and implied.headers == {"X-Team": "data"}
    for kind in ("http", "streamable-http", "streamableHttp"):
        assert entry({"type": kind, "url": "http://127.0.0.1:9/mcp"}).transport == "http"
    assert implied.describe() == "http: https://example.org/mcp"


def test_timeout_and_trust_are_kept() -> None:
    got = entry({"command": "x", "timeout": 600, "trust": "read-only-hints"})
    assert got.timeout_s == 600.0 and got.trust == "read-only-hints"
    assert entry({"command": "x"}).trust == "ask"


def test_other_clients_approval_keys_approve_nothing() -> None:
    got = entry({"command": "x", "autoApprove": ["write"], "alwaysAllow": ["write"]})
    assert got.problem is None and got.trust == "ask"


# -- secrets --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "key", "literal"),
    [
        ("headers", "Authorization", "Bearer abc"),
        ("headers", "X-Api-Key", "k-123"),
        ("env", "GITHUB_TOKEN", "ghp_abcdefghijklmnop"),
        ("env", "apiKey", "abc"),
        ("env", "DB_PASSWORD", "hunter2"),
    ],
)
def test_a_literal_secret_is_refused(where: str, key: str, literal: str) -> None:
    value: JsonValue = (
        {"url": "https://x.org/mcp", "headers": {key: literal}}
        if where == "headers"
        else {"command": "x", "env": {key: literal}}
    )
    got = entry(value)
    assert got.problem is not None
    assert f"{where}.{key} is written in the file" in got.problem
    assert "${" in got.problem  # it shows the reference to write instead
    assert literal not in got.problem  # and never repeats the value


def test_a_plain_setting_may_be_written() -> None:
    got = entry({"command": "git-server", "env": {"GIT_AUTHOR_NAME": "x", "LOG_LEVEL": "debug"}})
    assert got.problem is None and dict(got.env) == {"GIT_AUTHOR_NAME": "x", "LOG_LEVEL": "debug"}


def test_a_reference_under_a_credential_name_is_accepted() -> None:
    got = entry(
        {"url": "https://x.org/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}
    )
    assert got.problem is None


@pytest.mark.parametrize("variable", ["DSH_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"])
def test_a_reference_to_a_provider_key_is_refused(variable: str) -> None:
    for ref in (f"${{{variable}}}", f"${{env:{variable}}}"):
        got = entry({"command": "x", "env": {"MY_SETTING": f"prefix-{ref}"}})
        assert got.problem is not None
        assert (
            f"refers to {variable}" in got.problem
            and "never given the kernel's keys" in got.problem
        )


def test_references_are_resolved_from_the_environment() -> None:
    got = entry(
        {
            "url": "https://x.org/mcp",
            "headers": {"Authorization": "Bearer ${TEAM_TOKEN}", "X-Team": "${env:TEAM}-eu"},
        }
    )
    assert got.problem is None
    resolved = resolve(got, {"TEAM_TOKEN": "s3cret-value", "TEAM": "data"})
    assert dict(resolved.headers) == {"Authorization": "Bearer s3cret-value", "X-Team": "data-eu"}
    assert sorted(resolved.secrets) == ["data", "s3cret-value"]


def test_env_references_are_resolved_and_reported_as_secrets() -> None:
    got = entry({"command": "x", "env": {"GITHUB_TOKEN": "${GH}", "GIT_AUTHOR_NAME": "x"}})
    resolved = resolve(got, {"GH": "ghp_real"})
    assert dict(resolved.env) == {"GITHUB_TOKEN": "ghp_real", "GIT_AUTHOR_NAME": "x"}
    assert resolved.secrets == ("ghp_real",)


def test_a_missing_variable_is_a_line_naming_it() -> None:
    got = entry({"command": "x", "env": {"GITHUB_TOKEN": "${GH_TOKEN_FOR_MCP}"}})
    with pytest.raises(McpConfigError) as caught:
        resolve(got, {})
    message = caught.value.message
    assert "GH_TOKEN_FOR_MCP" in message and "env.GITHUB_TOKEN" in message
    assert "'srv'" in message and "test.json" in message


def test_resolution_defaults_to_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_TEST_MCP_VALUE", "from-os-environ")
    got = entry({"command": "x", "env": {"V": "${DSH_TEST_MCP_VALUE}"}})
    assert dict(resolve(got).env) == {"V": "from-os-environ"}


# -- cwd ------------------------------------------------------------------------------------------


def test_a_relative_cwd_is_the_files_folder(tmp_path: Path) -> None:
    path = write(tmp_path / "proj" / "mcp.json", {"s": {"command": "x", "cwd": "tools/server"}})
    (got,) = read_file(path)
    assert got.cwd is not None
    assert Path(got.cwd) == tmp_path / "proj" / "tools" / "server"


def test_an_absolute_cwd_is_kept(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", {"s": {"command": "x", "cwd": "/srv/mcp"}})
    (got,) = read_file(path)
    assert got.cwd == "/srv/mcp"


# -- %agent mcp add ------------------------------------------------------------------------------


def test_entry_from_a_command_line() -> None:
    got = entry_from_text("time", 'uvx mcp-server-time --local-timezone "Europe/Paris"')
    assert got.transport == "stdio" and got.command == "uvx"
    assert got.args == ("mcp-server-time", "--local-timezone", "Europe/Paris")
    assert got.source == "%agent mcp add"
    assert got.describe() == "stdio: uvx mcp-server-time --local-timezone Europe/Paris"


def test_entry_from_a_url() -> None:
    got = entry_from_text("remote", "https://example.org/mcp")
    assert got.transport == "http" and got.url == "https://example.org/mcp"


def test_entry_from_json() -> None:
    got = entry_from_text(
        "git",
        '{"command": "uvx", "args": ["mcp-server-git"], "trust": "read-only-hints", "timeout": 30}',
    )
    assert got.command == "uvx" and got.args == ("mcp-server-git",)
    assert got.trust == "read-only-hints" and got.timeout_s == 30.0
    assert as_json(got) == {
        "command": "uvx",
        "args": ["mcp-server-git"],
        "trust": "read-only-hints",
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "usage: %agent mcp add"),
        ("{not json", "not JSON"),
        ('{"command": "x", "env": {"API_TOKEN": "abc"}}', "is written in the file"),
        ('uvx "unclosed', "the command line for 'x'"),
    ],
)
def test_entry_from_bad_text_raises_one_line(text: str, said: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        entry_from_text("x", text)
    assert said in caught.value.message


def test_as_json_never_holds_a_resolved_value() -> None:
    got = entry({"url": "https://x.org/mcp", "headers": {"Authorization": "Bearer ${T}"}})
    assert as_json(got) == {
        "url": "https://x.org/mcp",
        "headers": {"Authorization": "Bearer ${T}"},
    }


def test_a_url_carrying_a_credential_is_refused() -> None:
    for url in ("https://h/mcp?api_key=sk-literal-123456", "https://u:secret-pass@h/mcp"):
        got = entry({"url": url})
        assert got.problem is not None and "carries a credential" in got.problem, got


def test_a_reference_to_a_provider_endpoint_is_refused() -> None:
    got = entry({"url": "https://h/mcp", "headers": {"X": "${DSH_BASE_URL}"}})
    assert got.problem is not None and "refers to DSH_BASE_URL" in got.problem
