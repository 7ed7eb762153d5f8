"""Lazy attributes of a module (PEP 562): names resolved from other modules on first use.

The package keeps its import light and its import graph one-way with two uses of this:

* public facades of the applications (``ugm_infer.dca``, ``ugm_infer.predict``,
  ``ugm_infer.models.ergm``, ``ugm_infer.models.crf`` and the application names of
  ``ugm_infer.models``), so that the core never imports :mod:`ugm_infer.applications`
  when it is loaded;
* heavy optional parts (the NumPyro bridge, plotting, diagnostics) that ``import
  ugm_infer`` would otherwise load with numpyro, matplotlib and ArviZ.

A resolved name is stored in the module, so later lookups cost nothing.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping


def lazy_attributes(module_name: str, where: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``module_name`` resolving the names of ``where`` on first use.

    ``where[name]`` is ``"package.module"`` (the attribute is that module) or
    ``"package.module:attr"`` (the attribute is ``attr`` of that module).
    """
    module = sys.modules[module_name]

    def __getattr__(name: str):
        target = where.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        path, _, attr = target.partition(":")
        value = importlib.import_module(path)
        if attr:
            value = getattr(value, attr)
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(where))

    return __getattr__, __dir__


def reexport(module_name: str, targets: Iterable[str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` making ``module_name`` a lazy facade of the modules ``targets``.

    A name is looked up in ``targets`` in order, on first use; ``__all__`` (what ``from
    facade import *`` and ``dir`` list) is the first target's.  Names outside it (private
    helpers of the modules a facade stands for) are found too, so code written against
    those modules keeps working.
    """
    targets = tuple(targets)
    module = sys.modules[module_name]

    def __getattr__(name: str):
        if name == "__all__":
            value = list(importlib.import_module(targets[0]).__all__)
            setattr(module, name, value)
            return value
        if name.startswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        for target in targets:
            mod = importlib.import_module(target)
            if hasattr(mod, name):
                value = getattr(mod, name)
                setattr(module, name, value)
                return value
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(__getattr__("__all__")))

    return __getattr__, __dir__
