"""The README and docs/ say what the code does: every command they give is exercised, every setting
the code reads is documented, every ``%agent`` subcommand and notebook is listed, links resolve, the
configuration and SQL snippets work as written, and the README's first screen stays one screen whose
words are the UI's."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_kernel.kernel.kernel import DshKernel
from dsh_kernel.kernel.magic.agent import HELP
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from tests.integration.store.conftest import record_rich_session
from tests.support.kernel import start_kernel

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"
CONFIGURATION = (DOCS / "configuration.md").read_text(encoding="utf-8")
GUIDE = (DOCS / "guide.md").read_text(encoding="utf-8")
TROUBLESHOOTING = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")

# Each shell command the README gives, and what runs it.
EXERCISED = {
    "make run": "tests/docs/test_make_run.py",
    "make test": ".ci/run",
    "pip install .": "tests/install/test_plain_install.py",
}


def fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_every_readme_command_is_exercised() -> None:
    commands = [
        line.split("#", 1)[0].strip()
        for block in fenced(README, "sh") + fenced(README, "bash") + fenced(README, "console")
        for line in block.splitlines()
        if line.split("#", 1)[0].strip()
    ]
    assert commands, "the README gives no commands"
    for command in commands:
        assert command in EXERCISED, f"README command {command!r} is exercised by nothing"
    for where in EXERCISED.values():
        assert (ROOT / where).exists()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nmake test\n" in ci
    # `make <target>` mentioned anywhere in the text is a real target (the Makefile's dry run).
    for target in set(re.findall(r"`make ([a-z-]+)`", README)):
        dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
        assert dry.returncode == 0, f"README mentions `make {target}`: {dry.stderr}"


def test_make_help_lists_every_target() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    [phony] = re.findall(r"^\.PHONY: (.+)$", makefile, flags=re.M)
    targets = phony.split()
    assert {"help", "test", "lint", "typecheck", "run"} <= set(targets)
    shown = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = {line.split(maxsplit=1)[0]: line for line in shown.stdout.splitlines() if line.strip()}
    for target in targets:
        assert target in lines, f"`make help` does not list {target}"
        assert len(lines[target].split()) > 1, f"`make help` gives {target} no description"
    assert set(lines) == set(targets), "`make help` lists a target that is not .PHONY"
    # Plain `make` is `make help`: it never sets anything up by surprise.
    plain = subprocess.run(
        ["make", "--no-print-directory"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert plain.stdout == shown.stdout


def test_ci_lints_and_typechecks_before_the_suite() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    steps = re.findall(r"^make ([a-z-]+)$", ci, flags=re.M)
    assert steps == ["lint", "typecheck", "test"]
    assert ci.index("rm -rf .venv") < ci.index("\nmake lint\n")


def test_every_agent_subcommand_is_in_the_guide() -> None:
    names = re.findall(r"^  %agent ([a-z]+)", HELP, flags=re.M)
    assert len(names) >= 15
    for name in names:
        assert f"`%agent {name}" in GUIDE, name
    # The README names the list and links the guide; what it names is real.
    assert "`%agent help`" in README and "](docs/guide.md)" in README
    for name in re.findall(r"`%agent ([a-z]+)", README):
        assert name in names, f"the README names `%agent {name}`, which does not exist"


def test_every_dsh_variable_the_code_reads_is_documented() -> None:
    found = {
        m
        for path in (ROOT / "dsh_kernel").rglob("*.py")
        for m in re.findall(r"\bDSH_[A-Z_]+\b", path.read_text(encoding="utf-8"))
    }
    assert {"DSH_PROVIDER", "DSH_STORE", "DSH_APPROVAL"} <= found
    for name in sorted(found):
        assert f"`{name}`" in CONFIGURATION, f"{name} is not in docs/configuration.md"
    # The README names the few a newcomer needs and links the full table; each it names is real.
    assert "](docs/configuration.md)" in README
    named = set(re.findall(r"\bDSH_[A-Z_]+\b", README))
    assert {"DSH_PROVIDER", "DSH_MODEL", "DSH_BASE_URL", "DSH_APPROVAL", "DSH_STORE"} <= named
    assert named <= found, f"the README names settings the code never reads: {named - found}"


def test_every_kernel_traitlet_is_documented() -> None:
    traits = [
        n for n, t in DshKernel.class_traits(config=True).items() if t.this_class is DshKernel
    ]
    assert "default_cell" in traits and "system_prompt" in traits
    for name in traits:
        assert f"`c.DshKernel.{name}`" in CONFIGURATION, name
    # The README's config example uses real traitlets (its test below runs it in a kernel).
    for name in re.findall(r"c\.DshKernel\.([a-z_]+)", README):
        assert name in traits, f"the README sets c.DshKernel.{name}, which is no traitlet"


def test_every_notebook_is_listed_and_tested() -> None:
    tests = (ROOT / "tests" / "notebooks" / "test_notebooks.py").read_text(encoding="utf-8")
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) == 6
    for nb in notebooks:
        assert f"`{nb.stem}`" in README, nb.name
        assert f'"{nb.name}"' in tests, f"{nb.name} is executed by no test"


@pytest.mark.parametrize(
    "doc",
    ["README.md", *(f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")))],
)
def test_relative_links_resolve(doc: str) -> None:
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{doc}: broken link {target}"


def status_with_profile(tmp_path: Path, config: str) -> str:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(config, encoding="utf-8")
    with start_kernel(tmp_path, "dsh", {"IPYTHONDIR": str(tmp_path / "ipython")}) as k:
        return k.execute("%agent status").stdout


def test_readme_jupyter_config_example_configures_the_kernel(tmp_path: Path) -> None:
    (snippet,) = [b for b in fenced(README, "py") if "c.DshKernel" in b]
    status = status_with_profile(tmp_path, snippet)
    assert (
        "provider: deepseek (https://api.deepseek.com, model deepseek-flash; configured)" in status
    )
    assert "approval: ask" in status


def test_configuration_doc_example_configures_a_local_server(tmp_path: Path) -> None:
    (snippet,) = [b for b in fenced(CONFIGURATION, "py") if "c.DshKernel" in b]
    status = status_with_profile(tmp_path, snippet)
    assert (
        "provider: openai-compatible (http://localhost:11434/v1, model llama3.2; configured)"
        in status
    )


def test_install_user_command_writes_both_kernelspecs(tmp_path: Path) -> None:
    (command,) = [b.strip() for b in fenced(CONFIGURATION, "sh") if "dsh_kernel install" in b]
    assert command == ".venv/bin/python -m dsh_kernel install --user"
    env = {"JUPYTER_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "dsh_kernel", "install", "--user"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.count("installed kernelspec") == 2
    for name in ("dsh", "dsh-python"):
        spec = json.loads((tmp_path / "data" / "kernels" / name / "kernel.json").read_text())
        assert spec["argv"][0] == sys.executable


def test_configuration_doc_price_example_prices_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (snippet,) = [b for b in fenced(CONFIGURATION, "py") if "set_price" in b]
    monkeypatch.setenv("DSH_STORE", str(tmp_path / "store"))
    exec(compile(snippet, "configuration.md", "exec"), {})
    result = run_query(Store.default(), "SELECT provider, model, output_per_mtok FROM prices")
    assert list(result.rows) == [("deepseek", "deepseek-flash", 1.20)]


async def test_troubleshooting_queries_run_and_find_the_retry(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    await record_rich_session(store)  # has a failed tool call and a rate-limited, retried request
    blocks = fenced(TROUBLESHOOTING, "sql")
    assert len(blocks) == 2
    results = [run_query(store, b.removeprefix("%%sql\n")) for b in blocks]
    assert len(results[0].rows) >= 1  # the errors view
    retries = list(results[1].rows)
    assert len(retries) == 1 and retries[0][1] == "RATE_LIMIT"


def test_the_local_servers_section_matches_what_the_kernel_asks_and_reads() -> None:
    """Each local server has its row; the lookups it names are the ones discovery makes, and the
    flags it gives are the right server's (``--jinja`` is llama-server's, not llama-cpp-python's)."""
    from dsh_kernel.llm.providers.discovery import lookup_urls
    from dsh_kernel.llm.providers.openai_compat.text_tools import __doc__ as text_tools_doc

    section = CONFIGURATION.split("#### Local servers", 1)[1].split("\n## ", 1)[0]
    rows = {
        r.split("|")[1].strip(): r
        for r in section.splitlines()
        if r.startswith("| ") and "---" not in r
    }
    servers = ["llama-cpp-python", "llama.cpp `llama-server", "Ollama", "vLLM", "LM Studio"]
    for server in servers:
        assert any(name.startswith(server) for name in rows), server
    row = {s: next(r for n, r in rows.items() if n.startswith(s)) for s in servers}
    props, show, models = (url.path for url in lookup_urls("http://127.0.0.1:8080/v1"))
    assert (
        f"`GET {props}`" in row["llama.cpp `llama-server"]
        and "--jinja" in row["llama.cpp `llama-server"]
    )
    assert f"`POST {show}`" in row["Ollama"]
    assert f"`GET {models}`" in row["vLLM"] and "--tool-call-parser" in row["vLLM"]
    llama_cpp_python = row["llama-cpp-python"]
    assert "does not exist" in llama_cpp_python.split("--jinja", 1)[1][:40]
    assert "make test-local" in llama_cpp_python  # the row the live tier exercises
    assert text_tools_doc and "tool_call" in text_tools_doc


def first_screen() -> str:
    """The README down to its third section: what it is, the picture, Start and Test."""
    sections = README.split("\n## ")
    return "\n## ".join(sections[:3])


def test_the_readme_first_screen_fits_a_laptop_screen() -> None:
    """What it is, the picture, Start and Test stay within 45 rendered lines (24 px each: a 16 px
    font at line-height 1.5). The estimate, per block: a heading 3 lines, a code block its lines and
    2 of padding, the picture its shown height, a paragraph its source lines (wrapped at about the
    width Markdown renders) and 0.7 of margin. For the README of this test's commit it said 43.7,
    and Chromium, rendering the README in GitHub's proportions (830 px column), measured 43.0."""
    screen = first_screen()
    assert "```sh\nmake run\n```" in screen and "```sh\nmake test\n```" in screen
    images = re.findall(r'<img src="([^"]+)" width="(\d+)"', screen)
    assert len(images) == 1, "the first screen has exactly one picture"
    from PIL import Image

    lines = 0.0
    for block in re.split(r"\n\s*\n", screen.strip()):
        rows = block.splitlines()
        if block.startswith("#"):
            lines += 3
        elif block.startswith("```"):
            lines += len(rows)
        elif "<img" in block:
            ((src, width),) = re.findall(r'<img src="([^"]+)" width="(\d+)"', block)
            with Image.open(ROOT / src) as picture:
                lines += picture.height * int(width) / picture.width / 24 + 0.7
        else:
            assert max(len(r) for r in rows) <= 100, "prose lines wrap at 100 characters"
            lines += len(rows) + 0.7
    assert lines <= 45, f"the README's first screen is about {lines:.0f} lines"


def test_the_readme_says_what_the_ui_and_the_settings_say() -> None:
    from dsh_kernel.kernel.configuration import SETTINGS

    cards = (ROOT / "dsh_kernel" / "views" / "tool_card.py").read_text(encoding="utf-8")
    for label in ("Allow once", "Deny", "Always allow"):
        assert f'description="{label}"' in cards
        assert f"**{label}**" in README
    assert "**Allow**" not in README
    flat = " ".join(README.split())  # the words, whatever the line breaks
    defaults = {s.env: s.default for s in SETTINGS if s.env}
    assert defaults["DSH_HEADLESS_APPROVAL_TIMEOUT"] == "10"
    assert "waits 10 s (`DSH_HEADLESS_APPROVAL_TIMEOUT`)" in flat
    assert "then refuses the call" in flat and "`%agent approve auto`" in flat
    assert defaults["DSH_APPROVAL_TIMEOUT"] == "300"
    assert "denied after 300 s (`DSH_APPROVAL_TIMEOUT`)" in flat


def test_the_readme_names_the_packages_ci_installs_for_the_suite() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (packages,) = re.findall(r"^apt_packages=\(([^)]*)\)", ci, flags=re.M)
    (command,) = re.findall(r"`sudo apt-get install ([^`]+)`", README)
    assert command.split() == packages.split()
    assert command in (DOCS / "testing.md").read_text(encoding="utf-8")
    assert "chromium" in packages.split() and "postgresql" in packages.split()
