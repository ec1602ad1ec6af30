"""The image limits: ``DSH_IMAGE_MAX_SIDE``, ``DSH_IMAGES_PER_CALL``, ``DSH_IMAGE_MAX_BYTES`` and the
kernel's traitlets — read one way, refused with one line naming the setting and its range."""

from __future__ import annotations

import pytest

from dsh_kernel.errors import UsageError
from dsh_kernel.kernel.host.settings import (
    HostSettings,
    image_caps_from_traits,
    parse_image_setting,
    settings_from_env,
)
from dsh_kernel.runtime.image_reduce import ImageCaps

VARIABLES = ("DSH_IMAGE_MAX_SIDE", "DSH_IMAGES_PER_CALL", "DSH_IMAGE_MAX_BYTES")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_the_defaults() -> None:
    assert settings_from_env(HostSettings()).images == ImageCaps(
        max_side=1024, per_call=4, max_bytes=512 * 1024
    )


@pytest.mark.parametrize(
    ("field", "raw", "value"),
    [
        ("max_side", "2048", 2048),
        ("max_side", " 1_536 ", 1536),
        ("per_call", "0", 0),
        ("max_bytes", "262144", 262144),
        ("max_bytes", "256k", 256 * 1024),
        ("max_bytes", "256KiB", 256 * 1024),
        ("max_bytes", "2M", 2 * 1024 * 1024),
        ("max_bytes", "2 MB", 2 * 1024 * 1024),
    ],
)
def test_values_are_whole_numbers_and_bytes_take_k_and_m(field: str, raw: str, value: int) -> None:
    assert parse_image_setting(field, raw, "X=") == value


@pytest.mark.parametrize(
    ("name", "raw", "what"),
    [
        (
            "DSH_IMAGE_MAX_SIDE",
            "huge",
            "the longest side in pixels, a whole number from 64 to 8,192",
        ),
        ("DSH_IMAGE_MAX_SIDE", "10", "the longest side in pixels, a whole number from 64 to 8,192"),
        ("DSH_IMAGES_PER_CALL", "-1", "the number of images per call, a whole number from 0 to 50"),
        (
            "DSH_IMAGES_PER_CALL",
            "2.5",
            "the number of images per call, a whole number from 0 to 50",
        ),
        (
            "DSH_IMAGE_MAX_BYTES",
            "1G",
            "the bytes per image, a whole number from 8,192 to 20,971,520",
        ),
        (
            "DSH_IMAGE_MAX_BYTES",
            "100",
            "the bytes per image, a whole number from 8,192 to 20,971,520",
        ),
    ],
)
def test_a_bad_variable_is_one_line_naming_it_and_the_range(
    monkeypatch: pytest.MonkeyPatch, name: str, raw: str, what: str
) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(UsageError) as raised:
        settings_from_env(HostSettings())
    message = raised.value.message
    assert message.startswith(f"{name}={raw!r} is ")
    assert message.endswith(f"give {what}")
    assert "\n" not in message


def test_the_environment_overrides_the_traitlets(monkeypatch: pytest.MonkeyPatch) -> None:
    traits = image_caps_from_traits(512, 2, 64 * 1024)
    assert traits == ImageCaps(max_side=512, per_call=2, max_bytes=64 * 1024)
    monkeypatch.setenv("DSH_IMAGES_PER_CALL", "7")
    caps = settings_from_env(HostSettings(images=traits)).images
    assert caps == ImageCaps(max_side=512, per_call=7, max_bytes=64 * 1024)


def test_a_bad_traitlet_names_the_traitlet() -> None:
    with pytest.raises(UsageError) as raised:
        image_caps_from_traits(1024, 100, 512 * 1024)
    assert raised.value.message == (
        "c.DshKernel.images_per_call = 100 is out of range: give the number of images per call, "
        "a whole number from 0 to 50"
    )
