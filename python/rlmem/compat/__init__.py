"""Drop-in stand-ins for the memory-pausing packages RL frameworks call, built on
:mod:`rlmem.runtime` (docs/runtime-compat.md).

* :mod:`rlmem.compat.torch_memory_saver` -- torch_memory_saver's API (``region``, ``pause``,
  ``resume``, ``cuda_graph``, ``disable``, ``configure_subprocess``) over rlmem's tags, as
  SGLang, verl and slime call it.

A framework switches by importing the stand-in under the real package's name, in this process::

    import sys, rlmem.compat.torch_memory_saver
    sys.modules["torch_memory_saver"] = rlmem.compat.torch_memory_saver

or, for every process it starts too (SGLang's schedulers are spawned), by putting
:func:`shim_path` first on ``PYTHONPATH``: the folder holds a ``torch_memory_saver`` module that
is the stand-in.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["shim_path", "alias_torch_memory_saver"]


def shim_path() -> str:
    """The folder whose ``torch_memory_saver`` module is :mod:`rlmem.compat.torch_memory_saver`:
    put it first on ``PYTHONPATH`` and every Python process that imports torch_memory_saver
    (spawned ones included) gets rlmem's."""
    return str(Path(__file__).resolve().parent / "shim")


def alias_torch_memory_saver():
    """``sys.modules["torch_memory_saver"] = rlmem.compat.torch_memory_saver`` for this process;
    returns the module. Call it before the framework imports torch_memory_saver."""
    from . import torch_memory_saver

    sys.modules["torch_memory_saver"] = torch_memory_saver
    return torch_memory_saver
