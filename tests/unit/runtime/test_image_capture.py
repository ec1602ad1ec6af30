"""Images from the ``python`` tool: matplotlib figures left open or shown, ``display(Image)``, a PIL
image as the last value — each an image block of the tool result (bytes logged once as
``image/data``), with a description built from the live object; figures closed after capture; the
per-call limit and the bad inputs (SVG, corrupt data, a 50-megapixel image, 100 figures), each a
one-line note."""

from __future__ import annotations

import base64
import hashlib
import io
import sys
from collections.abc import Iterator

import matplotlib
import matplotlib.pyplot as plt
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.pylabtools import select_figure_formats
from PIL import Image

from dsh_kernel import Agent
from dsh_kernel.kernel.toolbox.python import python_tool
from dsh_kernel.llm.types import ContentBlock, ImageBlock, TextBlock
from dsh_kernel.runtime import CodeRunner, CodeRunResult
from dsh_kernel.runtime.figures import DESCRIPTION_KEY
from dsh_kernel.runtime.image_reduce import ImageCaps
from dsh_kernel.testing import ScriptedProvider, text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy

from ..agent.helpers import of_type
from .images import make_bomb_png, make_png

PLOT = (
    "import matplotlib.pyplot as plt\n"
    "plt.plot([1, 2, 3], [2, 4, 9], label='squares')\n"
    "plt.title('Growth')\n"
    "plt.xlabel('step')\n"
    "plt.legend()\n"
    "None\n"
)


@pytest.fixture
def agg() -> Iterator[None]:
    """A non-interactive backend (as in a plain script): nothing shows a figure by itself."""
    plt.close("all")
    plt.switch_backend("agg")
    try:
        yield
    finally:
        plt.close("all")


@pytest.fixture
def inline(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """``%matplotlib inline`` in the shell, as the kernel has it (the GUI hook is ipykernel's)."""
    saved = dict(matplotlib.rcParams)
    plt.close("all")
    monkeypatch.setattr(shell, "enable_gui", lambda gui=None: None)
    shell.enable_matplotlib("inline")
    # matplotlib_inline registers the figure formats once per process, on the first shell only
    select_figure_formats(shell, {"png"})
    try:
        yield shell
    finally:
        plt.close("all")
        plt.switch_backend("agg")
        matplotlib.interactive(False)
        matplotlib.rcParams.update(saved)


def render(result: CodeRunResult, images: ImageCaps | None = None) -> tuple[ContentBlock, ...]:
    tool = python_tool(CodeRunner({}), images=images or ImageCaps())
    return tool.render({"code": ""}, result.to_json())


def split(blocks: tuple[ContentBlock, ...]) -> tuple[str, list[ImageBlock]]:
    text, *rest = blocks
    assert isinstance(text, TextBlock)
    assert all(isinstance(b, ImageBlock) for b in rest)
    return text.text, [b for b in rest if isinstance(b, ImageBlock)]


def png_of(block: ImageBlock) -> Image.Image:
    assert block.data is not None
    raw = base64.b64decode(block.data)
    assert hashlib.sha256(raw).hexdigest() == block.sha256
    assert len(raw) == block.size
    img = Image.open(io.BytesIO(raw))
    img.load()
    assert img.size == (block.width, block.height)
    return img


def test_a_figure_left_open_with_the_inline_backend_is_one_image_and_is_closed(
    inline: InteractiveShell,
) -> None:
    result = CodeRunner(inline.user_ns, shell=inline).run(PLOT)
    assert result.ok, result.failure
    assert plt.get_fignums() == []  # closed: it cannot show up again in a later cell
    images = [o for o in result.display_outputs if "image/png" in o["data"]]  # type: ignore[operator]
    assert len(images) == 1
    text, blocks = split(render(result))
    [block] = blocks
    assert block.media_type == "image/png" and png_of(block).format == "PNG"
    assert block.description.startswith("a matplotlib figure (1 axes)")
    assert '"Growth"' in block.description and 'x "step"' in block.description
    assert "1 line (3 points)" in block.description and 'legend "squares"' in block.description
    assert len(block.description) <= 600
    assert text.startswith("[image/png ")  # the text still names it, in its place


def test_plt_show_with_the_inline_backend_is_captured_once(inline: InteractiveShell) -> None:
    code = PLOT.replace("None\n", "plt.show()\n")
    result = CodeRunner(inline.user_ns, shell=inline).run(code)
    assert result.ok, result.failure
    _, blocks = split(render(result))
    assert len(blocks) == 1 and '"Growth"' in blocks[0].description
    assert plt.get_fignums() == []


def test_a_figure_left_open_without_an_interactive_backend_is_captured_and_closed(
    shell: InteractiveShell, agg: None
) -> None:
    result = CodeRunner(shell.user_ns, shell=shell).run(PLOT)
    assert result.ok, result.failure
    assert plt.get_fignums() == []
    [output] = result.display_outputs
    assert output["output_type"] == "display_data"
    assert '"Growth"' in str(output["metadata"][DESCRIPTION_KEY])  # type: ignore[index]
    _, [block] = split(render(result))
    assert png_of(block).size[0] <= 1024


def test_without_a_shell_a_figure_left_open_is_captured_and_closed(agg: None) -> None:
    fig_code = (
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\n"
    )
    result = CodeRunner({}).run(fig_code)
    assert result.ok, result.failure
    assert plt.get_fignums() == []
    _, [block] = split(render(result))
    assert "1 bar series (2 bars)" in block.description


def test_figures_open_before_the_run_are_the_users_and_are_left_alone(
    shell: InteractiveShell, agg: None
) -> None:
    mine = plt.figure()
    result = CodeRunner(shell.user_ns, shell=shell).run("x = 1")
    assert result.display_outputs == ()
    assert plt.get_fignums() == [mine.number]


def test_a_failed_run_still_closes_its_figures_and_sends_no_image(agg: None) -> None:
    result = CodeRunner({}).run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n1 / 0")
    assert result.failure is not None and result.failure.kind == "exception"
    assert plt.get_fignums() == []
    assert len(result.display_outputs) == 1  # the card still shows it


def test_display_of_an_ipython_image_is_an_image_block(shell: InteractiveShell) -> None:
    shell.user_ns["png"] = make_png(40, 30)
    result = CodeRunner(shell.user_ns, shell=shell).run(
        "from IPython.display import Image, display\ndisplay(Image(data=png))"
    )
    _, [block] = split(render(result))
    assert (block.width, block.height, block.reduction) == (40, 30, None)
    assert base64.b64decode(block.data or "") == make_png(40, 30)
    assert block.description == "an image (PNG via IPython.display.Image)"


def test_a_pil_image_as_the_last_value_is_an_image_block(shell: InteractiveShell) -> None:
    result = CodeRunner(shell.user_ns, shell=shell).run(
        "from PIL import Image\nImage.new('RGB', (1600, 400), 'teal')"
    )
    assert result.ok, result.failure
    text, [block] = split(render(result))
    assert (block.width, block.height) == (1024, 256)
    assert block.description == "an image (PIL, 1600x400, mode RGB)"
    assert block.reduction is not None and block.reduction.startswith("1600x400 PNG")
    assert "Out: <PIL.Image.Image image mode=RGB size=1600x400" in text


def test_at_most_n_images_per_call_with_a_note_of_what_was_dropped(agg: None) -> None:
    code = "import matplotlib.pyplot as plt\nfor i in range(6):\n    plt.figure(); plt.plot([i, i + 1])\n"
    result = CodeRunner({}).run(code)
    text, blocks = split(render(result))
    assert len(blocks) == 4
    assert text.endswith(
        "\n[2 more images not sent: the limit is 4 per call (DSH_IMAGES_PER_CALL)]"
    )
    _, blocks = split(render(result, ImageCaps(per_call=0)))
    assert blocks == []


def test_a_hundred_figures_in_one_run_are_a_few_images_and_a_note(agg: None) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.rcParams['figure.max_open_warning'] = 0\n"
        "for i in range(100):\n"
        "    plt.figure(figsize=(1, 1), dpi=40); plt.plot([0, i])\n"
    )
    result = CodeRunner({}).run(code)
    assert result.ok, result.failure
    assert plt.get_fignums() == []  # all 100 closed
    assert result.notes == (
        "80 more open figures closed without being drawn: the end of a run draws at most 20 "
        "(show them with plt.show() or display(fig))",
    )
    assert len(result.display_outputs) == 20
    text, blocks = split(render(result))
    assert len(blocks) == 4
    assert sum(b.size for b in blocks) <= 4 * 512 * 1024
    assert text.endswith(
        "\n[80 more open figures closed without being drawn: the end of a run draws at most 20 "
        "(show them with plt.show() or display(fig))]"
        "\n[16 more images not sent: the limit is 4 per call (DSH_IMAGES_PER_CALL)]"
    )
    assert len(text) < 20_000


def test_svg_corrupt_and_bomb_images_are_each_a_one_line_note(shell: InteractiveShell) -> None:
    shell.user_ns["bomb"] = make_bomb_png(8000, 6250)
    shell.user_ns["ok"] = make_png(20, 10)
    code = (
        "from IPython.display import SVG, Image, display\n"
        'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>\'))\n'
        "display({'image/png': 'bm90IGEgcG5n', 'text/plain': 'broken'}, raw=True)\n"
        "display(Image(data=bomb))\n"
        "display(Image(data=ok))\n"
    )
    result = CodeRunner(shell.user_ns, shell=shell).run(code)
    assert result.ok, result.failure
    text, blocks = split(render(result))
    assert [(b.width, b.height) for b in blocks] == [(20, 10)]
    notes = text.splitlines()[-3:]
    assert notes == [
        "[image 1 not sent: SVG is not sent to the model (it is not rasterised); show it as a PNG]",
        "[image 2 not sent: corrupt PNG data (not an image Pillow can read)]",
        "[image 3 not sent: 8000x6250 PNG is 50.0 megapixels, over the 36-megapixel limit for "
        "reduction]",
    ]


def test_an_image_the_output_cap_dropped_is_named(shell: InteractiveShell) -> None:
    shell.user_ns["bomb"] = make_bomb_png(8000, 6250)  # ~1.2 MB as base64
    from dsh_kernel.runtime import OutputCaps

    result = CodeRunner(shell.user_ns, shell=shell).run(
        "from IPython.display import Image, display\ndisplay(Image(data=bomb))",
        caps=OutputCaps(stored_bytes=64 * 1024),
    )
    text, blocks = split(render(result))
    assert blocks == []
    assert text.endswith(
        "[image 1 not sent: the run's output went over its size cap, so the image was not kept]"
    )


def test_without_pillow_the_run_still_succeeds_and_says_why(
    agg: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = CodeRunner({}).run("import matplotlib.pyplot as plt\nplt.plot([1]); plt.figure()")
    monkeypatch.setitem(sys.modules, "PIL", None)
    text, blocks = split(render(result))
    assert blocks == []
    assert text.endswith(
        "[images 1, 2 not sent: the image library Pillow is not importable (pip install pillow)]"
    )


async def test_the_tool_result_carries_the_block_and_its_bytes_are_logged_first(
    agg: None,
) -> None:
    provider = ScriptedProvider(
        [tool_call_response("python", {"code": PLOT}, call_id="c1"), text_response("A curve.")]
    )
    agent = Agent(
        provider=provider,
        model="m1",
        tools=[python_tool(CodeRunner({}))],
        approval_policy=ApprovalPolicy("auto"),
    )
    agent.followup("plot it")
    await agent.when_idle()
    events = agent.session.events
    [result] = of_type(events, "tool/result")
    content = result.data["message"]["content"][0]["content"]  # type: ignore[index]
    [image] = [b for b in content if b["type"] == "image"]  # type: ignore[union-attr]
    assert image["mediaType"] == "image/png" and '"Growth"' in image["description"]
    assert "data" not in image  # the block refers to its bytes by hash
    [data] = of_type(events, "image/data")
    assert data.data["sha256"] == image["sha256"] and data.seq < result.seq
    raw = base64.b64decode(str(data.data["data"]))
    assert hashlib.sha256(raw).hexdigest() == image["sha256"]
    # the next request carries the block (with its bytes only when the route takes images)
    sent = provider.requests[1].messages[-1].content[0]
    assert any(isinstance(b, ImageBlock) for b in sent.content)  # type: ignore[union-attr]
