"""The code runtime: Python run in a live namespace (the notebook's), with captured output, typed
failures and a namespace diff (the agent's ``python`` and ``inspect`` tools over it are in
``kernel.toolbox.python``).

Images the code displays become image blocks of the ``python`` tool's result: reduced by
``image_reduce`` (Pillow, imported when an image is reduced), described from the live object by
``figures`` (matplotlib is only looked at when the code imported it), made into blocks by
``image_blocks``.

This package uses IPython only when a shell object is handed to it (and IPython's formatter when it
is importable); it never imports ipykernel, pandas, numpy or polars.
"""

from dsh_kernel.runtime.capture import OutputCapture
from dsh_kernel.runtime.describe import (
    NameNotFound,
    VariableRow,
    describe_value,
    list_variables,
    resolve_name,
)
from dsh_kernel.runtime.image_reduce import DEFAULT_IMAGE_CAPS, ImageCaps, reduce_image
from dsh_kernel.runtime.mime import format_value, summarize_output
from dsh_kernel.runtime.runner import CodeRunner
from dsh_kernel.runtime.types import (
    DEFAULT_CAPS,
    CodeRunFailure,
    CodeRunResult,
    FailureKind,
    OutputCaps,
)

__all__ = [
    "DEFAULT_CAPS",
    "DEFAULT_IMAGE_CAPS",
    "CodeRunFailure",
    "CodeRunResult",
    "CodeRunner",
    "FailureKind",
    "ImageCaps",
    "NameNotFound",
    "OutputCaps",
    "OutputCapture",
    "VariableRow",
    "describe_value",
    "format_value",
    "list_variables",
    "reduce_image",
    "resolve_name",
    "summarize_output",
]
