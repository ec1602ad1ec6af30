"""Execute the teaching notebooks headless, the way a reader's Run All would, and read their outputs.

``run_notebook(name, tmp, env)`` copies ``notebooks/`` (the notebooks and their ``data/``) into
``tmp``, writes both kernelspecs there (``tests.support.kernel.kernelspecs``) — or uses the ones
installed in another environment (``jupyter_data`` + ``python``: a plain ``pip install`` in a fresh
virtualenv, as that environment's own Jupyter would run them) — and executes the notebook with
nbclient (``store_widget_state=True``, as JupyterLab saves it) on a kernel whose
environment has a private store (``DSH_STORE``), no provider keys, the dev invariants on, plus
``env``. The kernel's working directory is the copy's folder, as in JupyterLab.

``Executed`` finds cells by the start of their source and gives their outputs as text per MIME type;
``normalised()`` is the notebook's outputs with what legitimately changes between two runs — ids,
times, durations, paths of the temporary directory — replaced by placeholders; ``saved()`` is the
notebook as saved, byte for byte, less only what nbclient and ipywidgets themselves make different on
every run (see ``saved``): what a replayed notebook must keep identical from one Run All to the next.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from tests.support.kernel import kernelspecs

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PROVIDER_KEYS = (
    "DEEPSEEK_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DSH_API_KEY",
    "DSH_PROVIDER",
    "DSH_MODEL",
    "DSH_BASE_URL",
    "DEEPSEEK_BASE_URL",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "DSH_APPROVAL",
)


@dataclass
class Executed:
    nb: Any
    workdir: Path
    store: Path

    def cell(self, start: str) -> Any:
        """The first code cell whose source starts with ``start``."""
        for c in self.nb.cells:
            if c.cell_type == "code" and c.source.startswith(start):
                return c
        raise AssertionError(f"no code cell starts with {start!r}")

    def text(self, start: str, mime: str = "text/plain") -> str:
        """Everything a cell printed (streams) and displayed as ``mime``, joined."""
        parts: list[str] = []
        for o in self.cell(start).outputs:
            if o.output_type == "stream":
                parts.append(o.text)
            elif o.output_type in ("display_data", "execute_result"):
                value = o.data.get(mime)
                if value is not None:
                    parts.append(value if isinstance(value, str) else json.dumps(value))
            elif o.output_type == "error":
                parts.append(f"{o.ename}: {o.evalue}")
        return "".join(parts)

    def errors(self) -> list[str]:
        return [
            f"{c.source[:40]!r}: {o.ename}: {o.evalue}"
            for c in self.nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "error"
        ]

    def normalised(self) -> list[list[dict[str, Any]]]:
        """Every code cell's outputs with ids, times and temporary paths replaced."""
        text = json.dumps([c.outputs for c in self.nb.cells if c.cell_type == "code"])
        text = text.replace(str(self.workdir.parent), "<tmp>")
        for pattern, repl in NORMALISE:
            text = re.sub(pattern, repl, text)
        return json.loads(text)

    def saved(self) -> str:
        """The executed notebook as nbformat writes it, less only what the machinery — not the
        kernel — makes different on every run:

        * each cell's ``metadata.execution``: the iopub/shell timestamps nbclient records;
        * the widget *model ids* in the saved widget state: comm ids ipywidgets draws at random
          (every ``IPY_MODEL_<id>`` reference becomes ``IPY_MODEL_<id>``, and the models are listed
          sorted, as their order follows the ids);
        * how a stream was cut into messages: ipykernel flushes stdout on a timer, so a cell that
          prints over a while arrives in a varying number of pieces. Consecutive stream outputs of
          one name are joined, as JupyterLab's output area joins them before it saves.

        Everything else — every output's text and data, execution counts, the widgets' values — is
        kept as it is."""
        nb = copy.deepcopy(self.nb)
        for c in nb.cells:
            c.metadata.pop("execution", None)
            if c.cell_type == "code":
                c.outputs = _joined_streams(c.outputs)
        widgets = nb.metadata.get("widgets", {})
        state = widgets.get(WIDGET_STATE, {}).get("state")
        if state is not None:
            models = [
                re.sub(r"IPY_MODEL_[0-9a-f]{32}", "IPY_MODEL_<id>", json.dumps(m, sort_keys=True))
                for m in state.values()
            ]
            widgets[WIDGET_STATE]["state"] = sorted(models)
        return nbformat.writes(nb)


def _joined_streams(outputs: list[Any]) -> list[Any]:
    joined: list[Any] = []
    for o in outputs:
        last = joined[-1] if joined else None
        if (
            o.output_type == "stream"
            and last is not None
            and last.output_type == "stream"
            and last.name == o.name
        ):
            last.text += o.text
        else:
            joined.append(o)
    return joined


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

NORMALISE: tuple[tuple[str, str], ...] = (
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
    (r'"model_id": "[0-9a-f]{32}"', '"model_id": "<widget>"'),
    (r"session [0-9a-f]{8}\b", "session <id>"),
    (r"\b\d+(?:\.\d+)? ?(?:ms|s)\b", "<duration>"),
    (r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?", "<time>"),
    (r"journals/\d{4}-\d{2}-\d{2}/", "journals/<date>/"),
)


def run_notebook(
    name: str,
    tmp: Path,
    env: Mapping[str, str] | None = None,
    *,
    source: Path | None = None,
    timeout: float = 180,
    jupyter_data: Path | None = None,
    python: Path | None = None,
) -> Executed:
    """Execute ``name`` (from ``notebooks/``, or from ``source`` — e.g. an edited copy — next to
    ``notebooks/``'s data); nbclient's ``CellExecutionError`` propagates when a cell fails.

    ``jupyter_data`` is a Jupyter data dir whose kernelspecs to use instead of this interpreter's;
    ``python`` is the interpreter a kernelspec's bare ``python`` means (jupyter_client would
    otherwise substitute the *launching* process's own, as Jupyter does for its own environment)."""
    workdir = tmp / "notebooks"
    shutil.copytree(NOTEBOOKS, workdir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    if source is not None:
        shutil.copy(source / name, workdir / name)
    data = jupyter_data or kernelspecs(tmp)
    store = tmp / "store"
    kernel_env = {k: v for k, v in os.environ.items() if k not in PROVIDER_KEYS}
    kernel_env.update(
        {
            "JUPYTER_PATH": str(data),
            "DSH_STORE": str(store),
            "DSH_DEV_INVARIANTS": "1",
            "PYTHONUNBUFFERED": "1",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        }
    )
    kernel_env.update(env or {})
    nb = nbformat.read(workdir / name, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=nb.metadata["kernelspec"]["name"],
        store_widget_state=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    if python is not None:
        client.kernel_manager_class = _manager_for(python)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(data)  # nbclient looks the kernelspec up in this process
    try:
        client.execute(env=kernel_env)
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old
    return Executed(nb=nb, workdir=workdir, store=store)


def _manager_for(python: Path) -> type[AsyncKernelManager]:
    """A kernel manager that runs a kernelspec's bare ``python`` as ``python`` (an environment's own
    interpreter), where jupyter_client would put the launching process's ``sys.executable``."""

    class EnvironmentKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            cmd = super().format_kernel_cmd(extra_arguments)
            assert self.kernel_spec is not None
            if self.kernel_spec.argv and self.kernel_spec.argv[0] == "python":
                cmd[0] = str(python)
            return cmd

    return EnvironmentKernelManager
