"""The vision setting through a real kernel: ``c.DshKernel.vision`` in the Jupyter config reaches
``%agent status``, and a bad ``DSH_VISION`` fails each cell with one line naming the accepted values
— the kernel stays up, Python cells still run, and nothing reaches the model."""

from __future__ import annotations

from pathlib import Path

from tests.kernel.conftest import provider_env
from tests.support.kernel import start_kernel
from tests.support.sse_server import SseServer


def test_the_traitlet_sends_images_to_a_compatible_server(tmp_path: Path) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(
        "c.DshKernel.vision = 'on'\n", encoding="utf-8"
    )
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, DSH_MODEL="llava")) as k,
    ):
        ex = k.execute("%agent status")
        assert ex.status == "ok", ex.content
        assert "images:   sent to the model (configured: vision on)" in ex.stdout, ex.stdout
        assert k.python("print(get_ipython().kernel.host.agent.images)").strip() == "True"


def test_a_bad_value_is_one_line_naming_on_off_and_auto(tmp_path: Path) -> None:
    with (
        SseServer() as server,
        start_kernel(tmp_path, "dsh", env=provider_env(server, tmp_path, DSH_VISION="maybe")) as k,
    ):
        expected = (
            "DSH_VISION='maybe' is not a vision setting: use on (images go to the model), off "
            "(their text descriptions do) or auto (as the model catalogue says)"
        )
        chat = k.execute("Describe the plot.", timeout=60)
        assert chat.status == "error" and chat.content["ename"] == "USAGE", chat.content
        assert expected in chat.content["evalue"] and "\n" not in chat.content["evalue"]
        status = k.execute("%agent status")
        assert status.status == "error" and expected in status.content["evalue"], status.content
        assert k.python("print(1 + 1)").strip() == "2"  # the kernel is alive
        assert server.requests == []
