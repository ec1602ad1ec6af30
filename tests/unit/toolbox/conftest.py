"""The built-in tools' tests share the runtime tests' real IPython shell."""

from tests.unit.runtime.conftest import shell

__all__ = ["shell"]
