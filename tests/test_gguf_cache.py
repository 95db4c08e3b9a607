"""A GGUF backbone is converted into a model directory once and read from orchrm's cache
after (`orchrm.rmodel.gguf_cache`): the bundled SmolLM2 loads from the cache with the
GGUF loader's weights and the same seeded reward head; the cache key follows the file's
bytes; a damaged conversion is made again; processes loading at once convert once; a
cache that cannot be written is one line naming ORCHRM_CACHE."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

import orchrm.rmodel.gguf_cache as gguf_cache
from orchrm.errors import ConfigError
from orchrm.rmodel.backbone import load_backbone, rewards
from orchrm.rmodel.gguf_cache import SOURCE, converted
from tests.samples import tiny_decoder, tiny_gguf
from tests.test_gguf_backbone import bundled, texts


def scores(model, tokenizer) -> list[float]:
    """`model`'s fp32 rewards of the sample texts, padded (no packing), in eval mode."""
    model.eval()
    ids = tokenizer(texts())["input_ids"]
    return rewards(model, ids, tokenizer.pad_token_id, 16, torch.device("cpu"), bf16=False)


def fake_convert(calls: list):
    """A `_convert` that saves a tiny Llama as the conversion (as the real one lays it
    out) and counts its calls, for the cache's mechanics without transformers' GGUF
    loader."""

    def convert(path: Path, out: Path, key: dict) -> None:
        calls.append(path)
        tiny_decoder(out, ["a plan of agents"])
        (out / SOURCE).write_text(json.dumps({"converted_from": str(path), **key}))

    return convert


@pytest.mark.slow  # the GGUF loader's own reading takes 20 s
def test_the_bundled_gguf_loads_from_the_cache_as_the_gguf_loader_reads_it(monkeypatch):
    from transformers import AutoModelForSequenceClassification

    gguf = bundled()
    torch.manual_seed(7)
    model, tokenizer = load_backbone(str(gguf), packing=False)
    folder = converted(gguf)
    record = json.loads((folder / SOURCE).read_text())
    assert record["converted_from"] == str(gguf.absolute()) and len(record["sha256"]) == 64
    assert folder.parent == Path(gguf_cache.cache_root()) / "gguf"
    # read from the cache: a second load converts nothing and gives the same rewards
    monkeypatch.setattr(gguf_cache, "_convert", lambda *a: pytest.fail("converted again"))
    torch.manual_seed(7)
    again, again_tokenizer = load_backbone(str(gguf), packing=False)
    assert scores(again, again_tokenizer) == scores(model, tokenizer)
    # the GGUF loader's own reading: the same base weights and the same seeded head
    torch.manual_seed(7)
    direct = AutoModelForSequenceClassification.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, num_labels=1, dtype=torch.float32,
        **gguf_cache.dequantized(),
    )  # fmt: skip
    ours = model.state_dict()
    assert set(direct.state_dict()) == set(ours)
    assert all(torch.equal(v, ours[k]) for k, v in direct.state_dict().items())


@pytest.fixture
def fake_cache(tmp_path, monkeypatch) -> tuple[Path, list]:
    """A tiny GGUF, a cache of this test's own, and the calls of a fake conversion."""
    monkeypatch.setenv("ORCHRM_CACHE", str(tmp_path / "cache"))
    calls: list = []
    monkeypatch.setattr(gguf_cache, "_convert", fake_convert(calls))
    return tiny_gguf(tmp_path / "m.gguf", "llama", rows=4), calls


def test_a_second_load_reads_the_cache_and_the_key_follows_the_bytes(tmp_path, fake_cache):
    path, calls = fake_cache
    first = converted(path)
    assert converted(path) == first and len(calls) == 1
    assert first.parent == tmp_path / "cache" / "gguf" and first.name.startswith("m-")
    load_backbone(str(path))  # the model and tokenizer come from the conversion
    assert len(calls) == 1
    # other bytes under the same name: another key, another conversion
    tiny_gguf(path, "llama", rows=5)
    second = converted(path)
    assert second != first and len(calls) == 2
    # no scratch folder is left beside the conversions
    left = sorted(p.name for p in (tmp_path / "cache" / "gguf").iterdir() if p.is_dir())
    assert left == sorted([first.name, second.name])


def test_a_damaged_conversion_is_made_again(fake_cache):
    path, calls = fake_cache
    folder = converted(path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # cut short, as a full disk leaves it
    assert converted(path) == folder and len(calls) == 2
    load_backbone(str(path))


def test_loads_at_once_convert_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHRM_CACHE", str(tmp_path / "cache"))
    calls: list = []
    slow = fake_convert(calls)
    started = threading.Event()

    def convert(*args) -> None:
        started.set()
        threading.Event().wait(0.5)  # the other loader arrives while this one converts
        slow(*args)

    monkeypatch.setattr(gguf_cache, "_convert", convert)
    path = tiny_gguf(tmp_path / "m.gguf", "llama", rows=4)
    found: list = []
    threads = [threading.Thread(target=lambda: found.append(converted(path))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert started.is_set() and len(calls) == 1 and len(set(found)) == 1 and len(found) == 3


def test_a_cache_that_cannot_be_written_is_one_line_naming_orchrm_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ORCHRM_CACHE", str(blocker / "cache"))
    path = tiny_gguf(tmp_path / "m.gguf", "llama", rows=4)
    with pytest.raises(ConfigError) as err:
        load_backbone(str(path))
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "set ORCHRM_CACHE" in message


def test_a_gguf_transformers_cannot_read_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHRM_CACHE", str(tmp_path / "cache"))
    path = tiny_gguf(tmp_path / "rwkv.gguf", "rwkv6", rows=4)
    with pytest.raises(ConfigError, match="architecture rwkv6 is not supported"):
        load_backbone(str(path))
    assert not [p for p in (tmp_path / "cache" / "gguf").iterdir() if p.is_dir()]


def test_the_cache_folder_follows_orchrm_cache_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCHRM_CACHE", str(tmp_path / "a"))
    assert gguf_cache.cache_root() == tmp_path / "a"
    monkeypatch.delenv("ORCHRM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gguf_cache.cache_root() == tmp_path / "xdg" / "orchrm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert gguf_cache.cache_root() == tmp_path / "home" / ".cache" / "orchrm"
