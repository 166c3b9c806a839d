"""Exceptions of the rlmem package.

Every failure of librlmem arrives as an :class:`RlmemError` subclass chosen by the C status code,
carrying the one-line message the ``rlmem`` command prints after ``rlmem:``::

    try:
        rlmem.inspect("evil.pickle")
    except rlmem.BadInputError as error:
        print(error)          # evil.pickle: FORBIDDEN_OPCODE at byte 2: the pickle wants to ...
        print(error.status)   # -2 (RLMEM_E_BAD_INPUT)

The classes also derive from the matching built-in exception (``ValueError``, ``MemoryError``,
``RuntimeError``, ``OSError``), so code that already catches those keeps working.
"""

from __future__ import annotations

__all__ = [
    "RlmemError",
    "InvalidArgumentError",
    "BadInputError",
    "RlmemMemoryError",
    "InternalError",
    "LibraryError",
    "RuntimeStateError",
    "DeviceError",
    "error_for_status",
]

# The C status codes of include/rlmem/rlmem.h.
RLMEM_OK = 0
RLMEM_E_INVALID_ARGUMENT = -1
RLMEM_E_BAD_INPUT = -2
RLMEM_E_NO_MEMORY = -3
RLMEM_E_INTERNAL = -4
RLMEM_E_STATE = -5
RLMEM_E_DEVICE = -6


class RlmemError(Exception):
    """Base class of every rlmem error.

    ``str(error)`` is the message; ``error.status`` the C status code (``None`` for errors raised
    by the Python side, such as a missing library); ``error.status_name`` its name.
    """

    status: int | None = None
    status_name: str | None = None

    def __init__(self, message: str, status: int | None = None, status_name: str | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(RlmemError, ValueError):
    """An option is wrong (a negative limit, top=0, a step marker that is not a regular expression,
    a device the snapshot does not have, category rules that do not parse). RLMEM_E_INVALID_ARGUMENT."""

    status = RLMEM_E_INVALID_ARGUMENT
    status_name = "RLMEM_E_INVALID_ARGUMENT"


class BadInputError(RlmemError, ValueError):
    """The snapshot cannot be read or is malformed: a missing file, garbage bytes, a truncated
    pickle, a pickle that wants to import or call code (refused, never executed). RLMEM_E_BAD_INPUT."""

    status = RLMEM_E_BAD_INPUT
    status_name = "RLMEM_E_BAD_INPUT"


class RlmemMemoryError(RlmemError, MemoryError):
    """librlmem could not allocate host memory, or the runtime's device has no memory left for a
    request (the message says which). RLMEM_E_NO_MEMORY."""

    status = RLMEM_E_NO_MEMORY
    status_name = "RLMEM_E_NO_MEMORY"


class InternalError(RlmemError, RuntimeError):
    """A bug in rlmem; please report it with the message. RLMEM_E_INTERNAL."""

    status = RLMEM_E_INTERNAL
    status_name = "RLMEM_E_INTERNAL"


class LibraryError(RlmemError, OSError):
    """librlmem.so cannot be found or loaded, or it is a version this package does not speak."""


class RuntimeStateError(RlmemError, RuntimeError):
    """The runtime cannot do this now: the tag is paused (or not), or the runtime is not open."""

    status = RLMEM_E_STATE
    status_name = "RLMEM_E_STATE"


class DeviceError(RlmemError, RuntimeError):
    """No CUDA driver or device for the runtime, or the driver failed."""

    status = RLMEM_E_DEVICE
    status_name = "RLMEM_E_DEVICE"


_BY_STATUS = {
    RLMEM_E_INVALID_ARGUMENT: InvalidArgumentError,
    RLMEM_E_BAD_INPUT: BadInputError,
    RLMEM_E_NO_MEMORY: RlmemMemoryError,
    RLMEM_E_INTERNAL: InternalError,
    RLMEM_E_STATE: RuntimeStateError,
    RLMEM_E_DEVICE: DeviceError,
}


def error_for_status(status: int, message: str, status_name: str | None = None) -> RlmemError:
    """The exception for a C status code (an unknown code gives a plain RlmemError)."""
    cls = _BY_STATUS.get(status, RlmemError)
    return cls(message, status, status_name)
