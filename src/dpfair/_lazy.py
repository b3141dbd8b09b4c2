"""Names a package loads on first access (PEP 562), for the packages' ``__init__`` modules.

``import dpfair.data`` or ``import dpfair.fairclass`` stays cheap: an exported name is read
from the module that defines it only when a caller first asks for it, and is then kept in
the package's namespace so that the next access does not come back here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["LazyModule", "lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], submodules: Collection[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``(__getattr__, __dir__)`` of ``package``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    where : mapping of str to str
        Exported name -> the module that defines it; the value is read on first access and
        stored in the package's namespace.
    submodules : collection of str, optional
        Names that import ``package.<name>`` (a submodule) on access.

    Returns
    -------
    (__getattr__, __dir__)
        ``__getattr__`` looks a name up in ``submodules``, then in ``where``, else raises
        :class:`AttributeError` with Python's own message; ``__dir__`` lists the package's
        namespace together with its ``__all__``.
    """

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name in where:
            value = getattr(importlib.import_module(where[name]), name)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[package])
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__


class LazyModule:
    """A module imported on first attribute access (``optimize = LazyModule("scipy.optimize")``).

    For heavy dependencies used inside functions only: a module that holds one at its top
    can be imported (by the command line, say) without paying for it until a function
    that needs it runs.
    """

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"
