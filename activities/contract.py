"""The implementing side of the activity declarations in workflows/models/, and the worker's check.

Layer: activities. An activity's name, argument and result are declared once, where workflows
can import them (``@declare_activity`` in workflows/models/<controller>.py); workflows pass the
declaration to ``execute_activity``. A method here implements one with ``@implements(declaration)``:
it registers under the declaration's name, and mypy checks its argument and result against the
declaration's. worker/temporal.py calls :func:`check_implemented` before it builds a worker, so a
declaration with no implementation, or one whose types drifted, stops the worker at start.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterable
from typing import TypeVar

from temporalio import activity

import workflows.models
from workflows.models.common import DECLARED

Self = TypeVar("Self")
In = TypeVar("In")
Out = TypeVar("Out")

#: The attribute that names, on an implementation, the declaration it implements.
IMPLEMENTS = "__batchd_implements__"


def implements(declaration: Callable[[In], Out]) -> Callable[[Callable[[Self, In], Out]], Callable[[Self, In], Out]]:
    """Register the decorated method as the activity ``declaration`` declares, under its name."""

    def register(method: Callable[[Self, In], Out]) -> Callable[[Self, In], Out]:
        setattr(method, IMPLEMENTS, declaration)
        return activity.defn(name=declaration.__name__)(method)

    return register


def declarations() -> dict[str, Callable[..., object]]:
    """Every activity declared in the modules of workflows.models, by name."""
    found: dict[str, Callable[..., object]] = {}
    for info in pkgutil.iter_modules(workflows.models.__path__, f"{workflows.models.__name__}."):
        module = importlib.import_module(info.name)
        found.update((name, obj) for name, obj in vars(module).items()
                     if getattr(obj, DECLARED, False) and obj.__module__ == module.__name__)
    return found


def check_implemented(registered: Iterable[Callable[..., object]]) -> None:
    """Every declaration has exactly one implementation in ``registered``, with its exact types.

    Raises:
        TypeError: listing every declaration without (or with two) implementations, every
            registered activity that implements no declaration, and every type mismatch.
    """
    declared = declarations()
    done: set[str] = set()
    problems: list[str] = []
    for fn in registered:
        what = getattr(fn, "__qualname__", repr(fn))
        declaration: Callable[..., object] | None = getattr(fn, IMPLEMENTS, None)
        if declaration is None:
            problems.append(f"{what} is registered but implements no declaration of workflows.models")
            continue
        name = declaration.__name__
        if declared.get(name) is not declaration:
            problems.append(f"{what} implements {declaration.__module__}.{name}, which is not in workflows.models")
        elif name in done:
            problems.append(f"activity {name} has two implementations")
        elif (want := _signature(declaration)) != (got := _signature(fn)):
            problems.append(f"{what} implements {name} as {_show(got)}, but it is declared {_show(want)}")
        done.add(name)
    problems += [f"activity {name} ({fn.__module__}) has no implementation" for name, fn in declared.items()
                 if name not in done]
    if problems:
        raise TypeError("activities do not match their declarations:\n  " + "\n  ".join(problems))


Signature = tuple[bool, tuple[object, ...], object]


def _signature(fn: Callable[..., object]) -> Signature:
    """(async?, parameter types, result type): what a declaration and its implementation agree on."""
    hints = typing.get_type_hints(fn)
    params = tuple(hints.get(p.name, p.annotation) for p in inspect.signature(fn).parameters.values())
    return inspect.iscoroutinefunction(fn), params, hints.get("return")


def _show(sig: Signature) -> str:
    is_async, params, result = sig

    def name(t: object) -> str:
        return str(getattr(t, "__qualname__", t))

    return f"{'async ' if is_async else ''}({', '.join(map(name, params))}) -> {name(result)}"
