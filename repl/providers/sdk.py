"""How the openai SDK is imported: its type packages are read on first use.

``import openai`` runs ``openai/types/__init__.py``, which imports every model of every API
(responses, evals, graders, realtime...): about 850 modules and 0.9 s on two cores, on the
critical path of ``glassloop ask`` (the turn waits for the client). A chat completion stream
needs about 150 of them. ``install`` puts a finder before the standard one that gives each
package under ``openai.types`` an empty module with its ``__path__``: its submodules import
as before, and the package's own ``__init__`` runs, whole, the first time one of its names
is asked for. Each of those files only imports names (``tests/test_sdk.py`` checks every one
of the installed version), so running it later changes nothing but when.

Standard library only; the SDK itself is imported where it is used.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

TYPES = "openai.types"


class _OnFirstName(importlib.abc.Loader):
    """A package whose ``__init__`` runs when a name of it is first looked up."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real
        self.lock = threading.RLock()

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module, with __path__ and __spec__ set

    def exec_module(self, module: ModuleType) -> None:
        real, lock, read = self.real, self.lock, [False]

        def __getattr__(name: str) -> Any:
            # another thread asking meanwhile waits here until the __init__ has run; a lookup the
            # __init__ itself makes finds the names bound so far, as in any package being imported
            with lock:
                if not read[0]:
                    read[0] = True
                    try:
                        real.exec_module(module)
                    except BaseException:
                        read[0] = False
                        raise
                    if vars(module).get("__getattr__") is __getattr__:
                        delattr(module, "__getattr__")
            try:
                return vars(module)[name]
            except KeyError:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

        setattr(module, "__getattr__", __getattr__)  # noqa: B010 - a module's own, looked up by Python


class _TypesFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != TYPES and not name.startswith(TYPES + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.submodule_search_locations is None or spec.loader is None:
            return spec  # a module, not a package: as it is
        spec.loader = _OnFirstName(spec.loader)
        return spec


_FINDER = _TypesFinder()


def install() -> None:
    """Read ``openai.types`` packages on first use from now on (once; a no-op once the SDK is in)."""
    if _FINDER not in sys.meta_path and TYPES not in sys.modules:
        sys.meta_path.insert(0, _FINDER)
