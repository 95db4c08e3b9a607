"""`orchrm.rmodel.precision`: what `dtype auto` resolves to, and ORCHRM_BF16 overriding the
hardware's say in it, on every CPU alike."""

from __future__ import annotations

import pytest
import torch

from orchrm.errors import ConfigError
from orchrm.rmodel.precision import BF16_ENV, bf16_detected, bf16_supported, resolve_dtype

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("value", "auto"),
    [("1", "bf16"), ("yes", "bf16"), (" On ", "bf16"), ("0", "fp32"), ("false", "fp32")],
)
def test_the_variable_decides_what_auto_means(value, auto, monkeypatch):
    monkeypatch.setenv(BF16_ENV, value)
    assert resolve_dtype("auto", CPU) == resolve_dtype(None, CPU) == auto
    assert bf16_supported(CPU) is (auto == "bf16")


@pytest.mark.parametrize("value", ["1", "0"])
def test_an_explicit_precision_is_never_overridden(value, monkeypatch):
    monkeypatch.setenv(BF16_ENV, value)
    assert resolve_dtype("fp32", CPU) == resolve_dtype("float32", CPU) == "fp32"
    assert resolve_dtype("bf16", CPU) == resolve_dtype("bfloat16", CPU) == "bf16"


@pytest.mark.parametrize("value", ["auto", ""])
def test_auto_or_unset_asks_the_hardware(value, monkeypatch):
    monkeypatch.setenv(BF16_ENV, value)
    assert bf16_supported(CPU) is bf16_detected(CPU)


def test_the_hardware_is_read_from_cpuinfo_and_a_missing_file_means_fp32(monkeypatch):
    from pathlib import Path

    import orchrm.rmodel.precision as precision

    class Fake(type(Path())):
        text = ""

        def read_text(self, *args, **kwargs):
            if self.text is None:
                raise FileNotFoundError(str(self))
            return self.text

    monkeypatch.setattr(precision, "Path", Fake)
    for text, found in (("flags : fpu avx2 amx_bf16 amx_tile", True), ("flags : avx2", False)):
        Fake.text = text
        assert bf16_detected(CPU) is found
    Fake.text = None
    assert bf16_detected(CPU) is False


def test_a_value_it_cannot_read_is_named(monkeypatch):
    monkeypatch.setenv(BF16_ENV, "maybe")
    with pytest.raises(ConfigError, match="ORCHRM_BF16='maybe': use 1"):
        resolve_dtype("auto", CPU)
    with pytest.raises(ConfigError, match="dtype 'fp16'"):
        resolve_dtype("fp16", CPU)


def test_the_cli_names_a_bad_variable_in_one_line(orchrm_cli, tmp_path, monkeypatch):
    monkeypatch.setenv(BF16_ENV, "maybe")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("")
    done = orchrm_cli("evaluate-rm", str(pairs), "--rm", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ORCHRM_BF16='maybe'")
