"""Heavy packages a test file uses, imported when a test first touches them, not when the file is collected.

Every xdist worker collects every test file: a file that imports the providers' SDKs (anthropic,
openai, google-genai: about 2 s), inspect_ai or torch at its top made each worker pay for them,
whether or not it ran a test of that file. ``anthropic = lazy("anthropic")`` at a file's top
imports the package at its first attribute (``anthropic.Anthropic``), in the test that uses it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Later(ModuleType):
    """Stands for the module of its name; the first public attribute asked of it imports that module.
    Private names are not passed on: pytest's collection asks every object of a test file for its
    markers (``_pytestfixturefunction``, ``__test__``), which would import the package after all."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(importlib.import_module(self.__name__), attr)


def lazy(name: str) -> ModuleType:
    """The module ``name`` (a package or a submodule), imported when first used."""
    return _Later(name)
