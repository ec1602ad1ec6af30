"""The private ipykernel hook ``kernel.host.busy`` relies on, pinned: if a future ipykernel stops calling
``comm._reply_subshell_for`` on its shell channel thread, Stop and the steer box would silently wait
for the agent's code to end again. This test says so first."""

from __future__ import annotations

import inspect

from ipykernel.comm.comm import BaseComm
from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel

from dsh_kernel.kernel.host import busy


def test_ipykernel_calls_the_comm_hook_on_its_shell_channel_thread() -> None:
    source = inspect.getsource(Kernel.shell_channel_thread_main)
    assert busy.HOOK in source, (
        "ipykernel no longer calls comm._reply_subshell_for: see kernel/host/busy.py"
    )
    assert "comm_msg" in source
    assert callable(getattr(BaseComm, busy.HOOK, None))
    assert "ShellChannelThread" in inspect.getsource(IPKernelApp), "no shell channel thread"


def test_without_a_shell_channel_thread_nothing_is_installed() -> None:
    class OldKernel:
        shell_channel_thread = None

    assert not busy.available(OldKernel())
    assert not busy.available(object())
