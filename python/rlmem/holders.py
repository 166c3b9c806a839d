"""Who holds the leak: the Python objects that keep given GPU blocks alive.

``rlmem.inspect()`` names the allocation site of a leak and the live blocks of that site as
address ranges. :func:`find_holders` names the Python object that keeps those blocks alive::

    found = rlmem.holders.find_holders([(0x7F3A00000000, 4_194_304), ...])
    for holder in found:          # ranked by bytes, at most max_results of them
        print(holder)             # kept by `trainer.metrics['entropy']`, a list of 12 tensors
                                  # (46.9 MiB), created at grpo.py:88
    found.complete                # False when the time budget or a cap cut the search short

API
---
``find_holders(blocks, *, budget_seconds=1.0, max_results=3, roots=None) -> HolderSearch``

* ``blocks``: iterable of ``(address, size)`` int pairs (mappings with ``address``/``size`` keys
  and objects with such attributes are accepted too). A tensor matches when the start of its
  storage lies in a block. CPU tensors work the same (host addresses).
* ``budget_seconds``: wall-clock budget (``None``: no limit). At most about 60% of it goes to
  the heap scan; the referrer walk stops when it is spent. Each ``gc.get_referrers`` call is
  O(heap) and cannot be interrupted, so a search may overrun by one such call (tens of ms on a
  heap of a million objects). ``0`` returns at once with ``complete=False``.
* ``max_results``: how many holders to return (``None``: all).
* ``roots``: optional mapping ``{name: object}`` of objects the caller can name (the model, the
  trainer): a path through one of them starts with that name, in preference to any other.

:class:`HolderSearch` (a read-only sequence of :class:`Holder`, best first):
``holders`` (tuple), ``complete`` (bool), ``seconds`` (float), ``tensors_matched`` (Python
tensor objects whose storage lies in the blocks), ``bytes_matched`` (distinct storages found,
directly or as saved tensors of autograd graphs), ``blocks`` / ``blocks_matched`` (ranges given,
after merging overlaps / ranges with a storage found), ``holders_found`` (before the
``max_results`` cut) and ``reason`` (why the search is incomplete or empty, else ``None``).

:class:`Holder`: ``path`` (a name the user recognises: ``trainer.metrics['entropy']``,
``grpo.cache``, ``grpo.py:88 in train(): local 'kept'``, ``hook.<closure>.t``; an object with no
name is ``<ClassName at 0x..>``), ``kind`` (``list``, ``dict``, ``tuple``, ``set``, ``deque``,
``object`` for a container of another type, or, when the slot holds the tensor itself,
``attribute``, ``global``, ``local``, ``cell``; ``unreferenced`` for tensors that no Python
object refers to), ``tensors``, ``bytes`` (each storage counted once), ``created_at``
(``"file:line"`` where the container was allocated, from ``tracemalloc``, else ``None``; for a
slot that holds a tensor itself, where the largest such tensor's Python object was created),
``graph_roots`` / ``graph_of`` (when held through autograd: how many tensors under the holder
have autograd graphs that save matched tensors, and the shortest path of one), ``also`` (other
names of the same holder) and ``direct`` (the tensors are the holder's own elements). ``str()``
gives one line.

Module globals of ``__main__`` are named bare (``trainer``); those of other modules with the
module's name (``grpo.trainer``).

What is found
-------------
Tensors come from ``gc.get_objects()`` (every torch.Tensor Python object is gc-tracked, in a
container or not). The walk goes up ``gc.get_referrers`` breadth first (depth 8, batches of 32
objects per call, at most 40 calls and 512 objects per level), plus the locals of every live
frame of every thread, which CPython's gc cannot see (3.11+). It stops once every holder has a
module-global (or ``roots``) name. An object that a referrer already found also holds is not
asked again, and when tensors sit in many small objects (a list of 1000 ``Transition`` objects)
the walk goes up from the first few to their list and then down from it (3 levels) to the rest.
So the tensors of one container are found through a representative: a tensor held by two
containers shows both only when the representative is held by both. Elements without a name of
their own (``history[3]``, ``buffer[3].logits``, ``cache[12]``) are grouped under the container;
``trainer.metrics['entropy']`` (a str key) is a holder of its own. The parameters and buffers of
a ``torch.nn.Module`` read ``model.layer.weight``.

Through autograd: when blocks match no tensor, or only tensors that no Python object refers to
(torch keeps the Python object of a tensor saved for backward), the graphs of the tensors in gc
are walked (``next_functions``, 100 000 nodes at most) and their saved tensors (``_saved_*``,
``saved_tensors``) compared with those blocks. The top tensors of graphs that save them (a
``loss`` kept in a list, a ``running_loss += loss``) are then named as above. Reading a saved
tensor runs saved-tensor unpack hooks when a graph has them.

Limits: tensors held only from C++ (a C++ extension, a CUDA graph, an autograd graph whose top
tensor has no Python object) are reported as ``unreferenced``. A container named through an
object's attribute needs that object's ``__dict__`` (on CPython 3.11+ reading it materialises
the dict of an object whose attributes were stored inline). On CPython before 3.13, reading a
function frame's locals stores a snapshot in the frame; the search empties the snapshots it
made (so that they keep nothing alive) unless a trace or profile function is set or someone
else holds the snapshot, in which case it stays until the frame next refreshes it or returns.
``created_at`` needs tracemalloc tracing since before the container was created.

The search never calls ``repr``, ``__eq__``, ``__hash__``, ``__getattr__`` or ``__torch_function__``
of user objects, never raises on odd objects, imports nothing (torch only when the process has
already imported it: without torch there are no tensors), and keeps no reference to any object
after it returns: results hold strings and ints only.
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import time
import types
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

from ._format import format_bytes

__all__ = ["Holder", "HolderSearch", "find_holders"]

MAX_DEPTH = 8  # levels of referrers above a tensor
BATCH = 32  # objects per gc.get_referrers call: its cost grows with the batch too
MAX_REFERRER_CALLS = 40
MAX_FRONTIER = 512  # objects expanded per level, heaviest first
MAX_PARENTS = 16  # referrers kept per object
MAX_GRAPH_NODES = 100_000  # autograd nodes visited
MAX_INDEX_ITEMS = 2_000_000  # items of one container searched for an element
SCAN_SHARE = 0.6  # share of the budget the heap scan may use

_G = globals()  # frames whose f_globals is this are ours
_CO_OPTIMIZED = 0x0001
_PEP667 = sys.version_info >= (3, 13)  # frame.f_locals is a write-through proxy, no snapshot
_MISSING = object()

_TYPE_NAME = type.__dict__["__name__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]
_FrameType = types.FrameType
_CellType = getattr(types, "CellType", type((lambda x: lambda: x)(0).__closure__[0]))
_GEN_FRAME = {types.GeneratorType: "gi_frame", types.CoroutineType: "cr_frame", types.AsyncGeneratorType: "ag_frame"}
_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType)
_SIMPLE_KEYS = (str, int, bool, float, complex, bytes, type(None))
_CONTAINER_KINDS = ((list, "list"), (tuple, "tuple"), (dict, "dict"), (set, "set"), (frozenset, "set"),
                    (collections.deque, "deque"))
_ELEMENT_EDGES = ("index", "member", "ikey")  # edges that give an element no name of its own
_MODULE_DICTS = ("_parameters", "_buffers", "_modules")  # of a torch.nn.Module
_KIND_WORDS = {
    "attribute": "an attribute", "global": "a module global", "local": "a local variable",
    "cell": "a closure variable", "object": "an object",
}


@dataclass(frozen=True)
class Holder:
    """One object (or one named slot: attribute, global, local, closure variable) that keeps
    matched tensors alive. Only strings and ints: it refers to no object of the search."""

    path: str
    kind: str
    tensors: int
    bytes: int
    created_at: Optional[str] = None
    graph_roots: int = 0
    graph_of: Optional[str] = None
    also: Tuple[str, ...] = ()
    direct: bool = True

    def __str__(self) -> str:
        count = f"{self.tensors} tensor{'' if self.tensors == 1 else 's'} ({format_bytes(self.bytes)})"
        if self.kind == "unreferenced":
            text = (f"kept by no Python object: {count} referenced only from C++ (an autograd graph, "
                    "a C++ extension or a CUDA graph)")
        else:
            word = _KIND_WORDS.get(self.kind) or f"a {self.kind}"
            if self.graph_roots:
                roots = f"{self.graph_roots} tensor{'' if self.graph_roots == 1 else 's'}"
                first = f" (`{self.graph_of}`)" if self.graph_of and self.graph_of != self.path else ""
                text = f"kept by `{self.path}`, {word} holding {roots}{first} whose autograd graphs save {count}"
            elif self.direct and self.kind in ("list", "dict", "tuple", "set", "deque"):
                text = f"kept by `{self.path}`, {word} of {count}"
            else:
                text = f"kept by `{self.path}`, {word} holding {count}"
        if self.created_at:
            text += f", created at {self.created_at}"
        if self.also:
            text += "; also reachable as " + ", ".join(f"`{name}`" for name in self.also)
        return text


@dataclass(frozen=True)
class HolderSearch:
    """The result of :func:`find_holders`: a sequence of :class:`Holder`, best first."""

    holders: Tuple[Holder, ...]
    complete: bool
    seconds: float
    tensors_matched: int = 0
    bytes_matched: int = 0
    blocks: int = 0
    blocks_matched: int = 0
    holders_found: int = 0
    reason: Optional[str] = None

    def __iter__(self) -> Iterator[Holder]:
        return iter(self.holders)

    def __len__(self) -> int:
        return len(self.holders)

    def __getitem__(self, index):
        return self.holders[index]

    def __bool__(self) -> bool:
        return bool(self.holders)

    def __str__(self) -> str:
        lines = [str(holder) for holder in self.holders]
        if self.reason:
            lines.append(f"({'incomplete: ' if not self.complete else ''}{self.reason})")
        return "\n".join(lines) if lines else "no holder found"


def find_holders(blocks, *, budget_seconds: Optional[float] = 1.0, max_results: Optional[int] = 3,
                 roots=None) -> HolderSearch:
    """Names the Python objects that keep the tensors in ``blocks`` alive (see the module
    docstring). Returns a :class:`HolderSearch`; raises only for malformed ``blocks``."""
    started = time.perf_counter()
    ranges = _normalize_blocks(blocks)
    torch = sys.modules.get("torch")  # without torch imported there is no tensor to look for
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    if not isinstance(tensor_type, type):
        return HolderSearch((), True, time.perf_counter() - started, blocks=len(ranges),
                            reason="torch is not imported in this process: there is no tensor to look for")
    if not ranges:
        return HolderSearch((), True, time.perf_counter() - started, reason="no blocks given")
    if budget_seconds is not None and budget_seconds <= 0:
        return HolderSearch((), False, time.perf_counter() - started, blocks=len(ranges),
                            reason="the time budget was spent before the search began")
    deadline = None if budget_seconds is None else started + float(budget_seconds)
    search = None
    try:
        search = _Search(torch, tensor_type, ranges, started, deadline, roots)
        return search.run(max_results)
    except Exception as error:  # a bug of ours must not break the training loop
        return HolderSearch((), False, time.perf_counter() - started, blocks=len(ranges),
                            reason=f"the search failed: {type(error).__name__}")
    finally:
        if search is not None:
            search.close()


def _normalize_blocks(blocks):
    ranges = []
    for block in blocks:
        if isinstance(block, dict):
            address, size = block["address"], block["size"]
        elif hasattr(block, "address") and hasattr(block, "size"):
            address, size = block.address, block.size
        else:
            address, size = block
        address, size = int(address), int(size)
        if size > 0 and address >= 0:
            ranges.append([address, address + size])
    ranges.sort()
    merged = []
    for start, end in ranges:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


# ----- safe helpers: no user code runs in them ---------------------------------------------------

def _mro(tp) -> tuple:
    try:
        return _TYPE_MRO.__get__(tp)
    except Exception:
        return (tp,)


def _tname(obj) -> str:
    try:
        name = _TYPE_NAME.__get__(type(obj))
        return name if type(name) is str else "?"
    except Exception:
        return "?"


def _obj_label(obj) -> str:
    return f"<{_tname(obj)} at {id(obj):#x}>"


def _class_attr(tp, name):
    for klass in _mro(tp):
        try:
            found = _TYPE_DICT.__get__(klass).get(name, _MISSING)
        except Exception:
            continue
        if found is not _MISSING:
            return found
    return _MISSING


def _instance_dict(obj):
    descriptor = _class_attr(type(obj), "__dict__")
    if type(descriptor) not in _DESCRIPTORS:
        return None
    try:
        found = descriptor.__get__(obj, type(obj))
    except Exception:
        return None
    return found if dict in _mro(type(found)) else None


def _short_file(path, _cache={}) -> str:
    short = _cache.get(path)
    if short is None:
        short = str(path)
        try:
            cwd = os.getcwd()
            if short.startswith(cwd + os.sep):
                short = short[len(cwd) + 1:]
            else:
                base = os.path.basename(short)
                short = os.path.join(os.path.basename(os.path.dirname(short)), base) \
                    if base in ("__init__.py", "__main__.py") else (base or short)
        except Exception:
            pass
        if len(_cache) < 4096:
            _cache[path] = short
    return short


def _where(frame) -> str:
    try:
        code = frame.f_code
        name = getattr(code, "co_qualname", None) or code.co_name
        line = frame.f_lineno
        return f"{_short_file(code.co_filename)}:{line if line is not None else '?'} in {name}()"
    except Exception:
        return _obj_label(frame)


def _tracing() -> bool:
    """True when a Python-level trace or profile function may copy a frame's locals snapshot back
    into the frame (then emptying a snapshot could delete the frame's locals)."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return True
    threading = sys.modules.get("threading")
    for getter in ("gettrace", "getprofile"):
        function = getattr(threading, getter, None) if threading is not None else None
        try:
            if function is not None and function() is not None:
                return True
        except Exception:
            return True
    return False


def _read_locals(frame, tracing: bool, ignore: set):
    """(names, values, id of the snapshot dict or None) of a frame's locals. On CPython < 3.13
    frame.f_locals stores a snapshot dict in the frame; we empty the one we read when that is safe
    (no tracer could write it back, nobody else holds it), so that it keeps nothing alive."""
    names, values, snapshot = [], [], None
    try:
        optimized = bool(frame.f_code.co_flags & _CO_OPTIMIZED)
        found = frame.f_locals
    except Exception:
        return names, values, snapshot
    try:
        pairs = list(dict.items(found)) if type(found) is dict else list(found.items())
        for name, value in pairs:
            if type(name) is str:
                names.append(name)
                values.append(value)
        del pairs
    except Exception:
        pass
    if type(found) is dict:
        snapshot = id(found)
        cleared = False
        # found is held by the frame, by the variable and by getrefcount's argument.
        if optimized and not _PEP667 and not tracing and sys.getrefcount(found) <= 3:
            try:
                if frame.f_trace is None:
                    dict.clear(found)
                    cleared = True
            except Exception:
                pass
        if optimized and not cleared:
            ignore.add(snapshot)  # a snapshot left in place: never a holder of its own
    del found
    return names, values, snapshot


def _created_at(obj) -> Optional[str]:
    try:
        import tracemalloc

        if not tracemalloc.is_tracing():
            return None
        trace = tracemalloc.get_object_traceback(obj)
        if not trace:
            return None
        frames = list(trace)  # oldest first
        ours = os.path.dirname(os.path.abspath(__file__))
        for frame in reversed(frames):
            name = frame.filename
            if not name.startswith("<frozen") and os.path.dirname(os.path.abspath(name)) != ours:
                return f"{_short_file(name)}:{frame.lineno}"
        return f"{_short_file(frames[-1].filename)}:{frames[-1].lineno}"
    except Exception:
        return None


def _time_up(deadline) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


class _Target:
    """A matched tensor, or the top tensor of an autograd graph that saves matched storages."""

    __slots__ = ("storages", "direct", "graph")

    def __init__(self):
        self.storages = {}  # storage address -> nbytes
        self.direct = False  # its own storage is in the blocks
        self.graph = False  # its autograd graph saves storages in the blocks


class _Search:
    """State of one search; close() drops every object reference it took."""

    def __init__(self, torch, tensor_type, ranges, started, deadline, roots):
        self.torch = torch
        self.Tensor = tensor_type
        self.starts = [start for start, _ in ranges]
        self.ends = [end for _, end in ranges]
        self.started = started
        self.deadline = deadline
        self.incomplete: Optional[str] = None
        self.ignore: set = {id(self)}
        self.nodes = self._mine({})  # id -> object: every object of the walk, kept alive meanwhile
        self.parents = {}  # id -> [referrer ids]
        self.cat = {}  # id -> 'target', 'obj', 'moddict', 'userroot', 'frame', 'gen', 'type', 'module'
        self.weight = {}  # id -> bytes under it (to expand the heaviest first)
        self.expandable = set()
        self.queried = set()  # ids whose referrers were searched (or found by a downward search)
        self.targets = {}  # id -> _Target
        self.root_best = {}  # id -> best tuple of a root
        self.best = {}  # id -> (class, length, text, role, via id, edge kind)
        self.frame_local = {}  # id -> ["file:line in f(): local 'x'", ...]
        self.frame_values = self._mine([])
        self.frames = self._mine([])
        self.live_frames = set()
        self.all_tensors = self._mine([])
        self.caches = self._mine({})  # (what, id) -> index dicts built from containers
        self.mine = self._mine([])  # other containers of ours
        self.calls = 0
        self.tracing = _tracing()
        self.modmap = {}
        for name, module in list(sys.modules.items()):
            try:
                if types.ModuleType not in _mro(type(module)):
                    continue
                namespace = types.ModuleType.__dict__["__dict__"].__get__(module)
            except Exception:
                continue
            if type(namespace) is dict and (id(namespace) not in self.modmap or name == "__main__"):
                self.modmap[id(namespace)] = name
        self.userroots = {}
        if roots:
            self.ignore.add(id(roots))
            for name, obj in dict(roots).items():
                if type(name) is str:
                    self.userroots[id(obj)] = name
                    self.mine.append(obj)
        self.storage_method = None
        for method in ("untyped_storage", "_storage", "storage"):
            found = _class_attr(tensor_type, method)
            if found is not _MISSING:
                self.storage_method = found
                break
        self.grad_fn = _class_attr(tensor_type, "grad_fn")
        try:
            self.Module = torch.nn.Module
        except Exception:
            self.Module = None
        self.Parameter = getattr(getattr(torch, "nn", None), "Parameter", None)

    def _mine(self, container):
        self.ignore.add(id(container))
        return container

    def close(self):
        for name in ("nodes", "frame_values", "frames", "all_tensors", "caches", "mine", "targets",
                     "parents", "best", "root_best", "frame_local"):
            container = getattr(self, name, None)
            if container is not None:
                container.clear()
        self.torch = self.Tensor = self.Module = self.Parameter = None

    def no_torch_function(self):
        C = getattr(self.torch, "_C", None)
        for name in ("DisableTorchFunction", "DisableTorchFunctionSubclass"):
            context = getattr(C, name, None)
            if context is not None:
                try:
                    return context()
                except Exception:
                    pass
        return _Nothing()

    # ----- tensors ---------------------------------------------------------------------------------

    def storage_of(self, tensor):
        """(address, nbytes) of a tensor's storage, or (0, 0) for meta, sparse, wrapper... tensors."""
        try:
            storage = self.storage_method(tensor)
            address, nbytes = int(storage.data_ptr()), int(storage.nbytes())
        except Exception:
            return 0, 0
        return (address, nbytes) if address and nbytes > 0 else (0, 0)

    def block_of(self, address) -> int:
        index = bisect_right(self.starts, address) - 1
        return index if index >= 0 and address < self.ends[index] else -1

    def scan(self):
        """Finds the tensors whose storage lies in the blocks."""
        objects = self._mine(gc.get_objects())
        budget_end = None if self.deadline is None else \
            self.started + SCAN_SHARE * (self.deadline - self.started)
        is_tensor = {}
        Tensor = self.Tensor
        count = len(objects)
        with self.no_torch_function():
            for index in range(count):
                if not index & 4095 and _time_up(budget_end):
                    self.incomplete = f"the time budget ran out while scanning the heap ({index} of {count} objects)"
                    break
                obj = objects[index]
                tp = type(obj)
                flag = is_tensor.get(id(tp))
                if flag is None:
                    flag = is_tensor[id(tp)] = Tensor in _mro(tp)
                if not flag:
                    continue
                self.all_tensors.append(obj)
                address, nbytes = self.storage_of(obj)
                if address and self.block_of(address) >= 0:
                    target = _Target()
                    target.storages[address] = nbytes
                    target.direct = True
                    self.add_target(obj, target)
        objects.clear()
        obj = None
        del objects

    def add_target(self, obj, target):
        key = id(obj)
        if key in self.targets:
            old = self.targets[key]
            old.storages.update(target.storages)
            old.direct = old.direct or target.direct
            old.graph = old.graph or target.graph
            return
        self.targets[key] = target
        self.nodes[key] = obj
        self.cat[key] = "target"
        self.weight[key] = sum(target.storages.values())
        self.expandable.add(key)

    # ----- frames --------------------------------------------------------------------------------

    def read_frames(self):
        """The locals of every live frame: gc cannot see them (CPython 3.11+)."""
        try:
            import _thread

            current = _thread.get_ident()
            tops = sys._current_frames()
        except Exception:
            return
        order = sorted(tops, key=lambda ident: ident != current)
        for ident in order:
            chain = []
            frame = tops[ident] if ident != current else sys._getframe()
            while frame is not None:
                if frame.f_globals is not _G:
                    chain.append(frame)
                frame = frame.f_back
            for frame in reversed(chain):  # outermost first: the longest-lived name comes first
                self.frames.append(frame)
                self.live_frames.add(id(frame))
                try:
                    # Module level (f_locals is the module's dict): named as module globals.
                    if not frame.f_code.co_flags & _CO_OPTIMIZED and frame.f_locals is frame.f_globals:
                        continue
                except Exception:
                    continue
                where = _where(frame)
                names, values, _ = _read_locals(frame, self.tracing, self.ignore)
                for name, value in zip(names, values):
                    self.frame_values.append(value)
                    self.frame_local.setdefault(id(value), []).append(f"{where}: local '{name}'")
                del names, values
            del chain
        tops.clear()
        frame = None
        del tops

    # ----- referrers -----------------------------------------------------------------------------

    def classify(self, obj, key):
        tp = type(obj)
        if key in self.userroots:
            self.root_best[key] = (-1, 0, self.userroots[key], None, None, None)
            return "userroot"
        if key in self.modmap:
            name = self.modmap[key]
            prefix = "" if name == "__main__" else name + "."
            self.root_best[key] = (0, 0, name, ("module", prefix), None, None)
            return "moddict"
        if tp is _FrameType:
            where = _where(obj)
            if key in self.live_frames:
                self.root_best[key] = (1, 0, where, ("frame", where), None, None)
            else:
                try:
                    flags = obj.f_code.co_flags
                except Exception:
                    flags = 0
                # Up to CPython 3.10 a suspended generator's frame is the referrer of its locals.
                kind = "generator" if flags & 0x20 else "coroutine" if flags & 0x80 else \
                    "async_generator" if flags & 0x200 else None
                where += f" (suspended {kind})" if kind else " (not running)"
                self.root_best[key] = (2, 0, where, ("frame", where), None, None)
            return "frame"
        if tp in _GEN_FRAME:
            try:
                frame = getattr(obj, _GEN_FRAME[tp])
            except Exception:
                frame = None
            where = (_where(frame) if frame is not None else _obj_label(obj)) + f" (suspended {_tname(obj)})"
            del frame
            self.root_best[key] = (2, 0, where, ("gen", where), None, None)
            return "gen"
        mro = _mro(tp)
        if type in mro:
            try:
                module = _class_attr(obj, "__module__")
                qualname = _TYPE_QUALNAME.__get__(obj)
                text = qualname if module in (_MISSING, "__main__", "builtins") or type(module) is not str \
                    else f"{module}.{qualname}"
                self.root_best[key] = (0 if module in sys.modules else 2, 0, text, None, None, None)
            except Exception:
                self.root_best[key] = (3, 0, _obj_label(obj), None, None, None)
            return "type"
        if types.ModuleType in mro:
            try:
                name = types.ModuleType.__dict__["__dict__"].__get__(obj).get("__name__")
            except Exception:
                name = None
            self.root_best[key] = (0, 0, name if type(name) is str else _obj_label(obj), None, None, None)
            return "module"
        return "obj"

    def expand(self, ids, level: int, cover: bool = True, max_calls: Optional[int] = None):
        """One level up: the referrers of the objects ``ids``. With ``cover``, an object held by a
        referrer already found is not asked again (one call finds the list of 1000 tensors).
        With ``max_calls``, stops quietly after that many calls (the rest stays unqueried)."""
        order = sorted((key for key in ids if key not in self.queried and not self.parents.get(key)),
                       key=lambda key: -self.weight.get(key, 0))
        if level > 1 and len(order) > MAX_FRONTIER:
            order = order[:MAX_FRONTIER]
            self.incomplete = self.incomplete or f"more than {MAX_FRONTIER} objects at one level"
        want = set(order)
        new = []
        position = 0
        calls = 0
        while position < len(order):
            if max_calls is not None and calls >= max_calls:
                return new
            if self.calls >= MAX_REFERRER_CALLS:
                self.incomplete = self.incomplete or f"stopped after {MAX_REFERRER_CALLS} referrer searches"
                break
            if _time_up(self.deadline):
                self.incomplete = self.incomplete or "the time budget ran out while walking referrers"
                break
            batch_ids = []
            while position < len(order) and len(batch_ids) < BATCH:
                key = order[position]
                position += 1
                if key in want:
                    batch_ids.append(key)
            if not batch_ids:
                break
            want.difference_update(batch_ids)
            self.queried.update(batch_ids)
            batch = tuple([self.nodes[key] for key in batch_ids])
            self.calls += 1
            calls += 1
            # gc leaves out its argument tuple, which is batch itself only up to CPython 3.12.
            batch_key = id(batch)
            self.ignore.add(batch_key)
            referrers = gc.get_referrers(*batch)
            del batch
            referrer = child = None
            for referrer in referrers:
                key = id(referrer)
                if key in self.ignore:
                    continue
                tp = type(referrer)
                if tp is _FrameType:
                    try:
                        if referrer.f_globals is _G:
                            continue
                    except Exception:
                        continue
                try:
                    referents = gc.get_referents(referrer)
                except Exception:
                    continue
                hit = 0
                for child in referents:
                    child_key = id(child)
                    if child_key in self.expandable and child_key != key:
                        parents = self.parents.setdefault(child_key, [])
                        if key not in parents and len(parents) < MAX_PARENTS:
                            parents.append(key)
                        hit += self.weight.get(child_key, 0) or 1
                        if cover:
                            want.discard(child_key)
                child = None
                del referents
                if hit and key not in self.nodes:
                    self.weight[key] = hit
                    if self.register(referrer, key) == "obj":
                        new.append(key)
            referrers.clear()
            referrer = None
            del referrers
            self.ignore.discard(batch_key)
        if any(key in want for key in order[position:]):
            self.incomplete = self.incomplete or "not every object's referrers could be searched"
        return new

    def register(self, obj, key):
        self.nodes[key] = obj
        self.cat[key] = category = self.classify(obj, key)
        if category == "obj":
            self.expandable.add(key)
        return category

    def complete_down(self, start_ids, depth: int = 3, cap: int = 1_000_000):
        """Finds the targets not yet placed below objects found above some of them: one referrer
        search finds one Transition of a list of 1000 and, a level up, the list; the other 999
        Transitions and their tensors are found here, going down from the list."""
        remaining = {key for key, target in self.targets.items()
                     if not self.parents.get(key) and key not in self.queried}
        if not remaining or not start_ids:
            return
        visited = set()
        objects = self._mine({})  # id -> object met on the way down
        came_from = {}  # id -> id of the object above it
        skip = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType, _FrameType,
                types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
        for start in start_ids:
            if not remaining or len(visited) > cap or _time_up(self.deadline):
                break
            if self.cat.get(start) != "obj":
                continue
            layer = self._mine([self.nodes[start]])
            for _ in range(depth):
                below = self._mine([])
                for obj in layer:
                    above = id(obj)
                    try:
                        kids = gc.get_referents(obj)
                    except Exception:
                        continue
                    for kid in kids:
                        key = id(kid)
                        if key in remaining:
                            self.link_down(above, key, came_from, objects)
                            remaining.discard(key)
                            continue
                        if key in visited or key in self.nodes or key in self.ignore or key in self.modmap \
                                or not gc.is_tracked(kid):
                            continue
                        tp = type(kid)
                        if tp in skip or tp in _GEN_FRAME:
                            continue
                        mro = _mro(tp)
                        if self.Tensor in mro or type in mro or types.ModuleType in mro:
                            continue
                        visited.add(key)
                        came_from[key] = above
                        objects[key] = kid
                        below.append(kid)
                    kid = None
                    del kids
                    if len(visited) > cap:
                        break
                obj = None
                self.ignore.discard(id(layer))
                layer.clear()
                layer = below
                if not layer or not remaining:
                    break
            self.ignore.discard(id(layer))
            layer.clear()
            del layer
        objects.clear()

    def link_down(self, above, key, came_from, objects):
        """Edges from ``key`` up the downward path to an object already known."""
        child = key
        while True:
            parents = self.parents.setdefault(child, [])
            if above not in parents and len(parents) < MAX_PARENTS:
                parents.append(above)
            if above in self.nodes:
                return
            self.register(objects[above], above)
            self.queried.add(above)  # one referrer is known: the object above
            child, above = above, came_from[above]

    # ----- autograd ------------------------------------------------------------------------------

    def autograd(self, wanted_blocks):
        """Tops of autograd graphs in gc whose saved tensors lie in ``wanted_blocks``."""
        if self.grad_fn is _MISSING or not self.all_tensors:
            return []
        memo = self._mine({})  # id(node) -> frozenset of storage addresses saved under it
        keep = self._mine({})  # id(node) -> node: ids stay valid meanwhile
        children = self._mine({})
        saved_names = {}
        inner = set()
        nbytes_of = {}
        candidates = self._mine([])  # tensor, node, tensor, node...
        empty = frozenset()
        visited = 0

        def own_hits(node):
            names = saved_names.get(id(type(node)))
            if names is None:
                try:
                    names = tuple(name for name in dir(type(node))
                                  if name.startswith("_saved_") or name == "saved_tensors")
                except Exception:
                    names = ()
                saved_names[id(type(node))] = names
                self.mine.append(type(node))
            found = set()
            for name in names:
                try:
                    value = getattr(node, name)
                except Exception:
                    continue
                items = value if type(value) in (tuple, list) else (value,)
                for item in items:
                    if self.Tensor in _mro(type(item)):
                        address, nbytes = self.storage_of(item)
                        if address and self.block_of(address) in wanted_blocks:
                            found.add(address)
                            nbytes_of[address] = nbytes
                del value, items
            return found

        with self.no_torch_function():
            for tensor in self.all_tensors:
                target = self.targets.get(id(tensor))
                if target is not None and not self.parents.get(id(tensor)) and id(tensor) not in self.frame_local:
                    continue  # a tensor nothing refers to names nothing
                try:
                    node = self.grad_fn.__get__(tensor)
                except Exception:
                    continue
                if node is not None:
                    candidates.append(tensor)
                    candidates.append(node)
            del tensor
            for index in range(1, len(candidates), 2):
                stack = [(candidates[index], False)]
                while stack:
                    node, done = stack.pop()
                    key = id(node)
                    if key in memo:
                        continue
                    if not done:
                        if visited >= MAX_GRAPH_NODES or (not visited & 255 and _time_up(self.deadline)):
                            self.incomplete = self.incomplete or "stopped walking autograd graphs (budget or node cap)"
                            stack.clear()
                            break
                        visited += 1
                        keep[key] = node
                        stack.append((node, True))  # finished after its children, popped before it
                        kids = []
                        pair = child = None
                        try:
                            for pair in node.next_functions:
                                child = pair[0]
                                if child is not None:
                                    keep.setdefault(id(child), child)
                                    kids.append(id(child))
                                    inner.add(id(child))
                                    if id(child) not in memo:
                                        stack.append((child, False))
                        except Exception:
                            pass
                        pair = child = None
                        children[key] = kids
                    else:
                        hits = own_hits(node)
                        for kid in children.get(key, ()):
                            hits.update(memo.get(kid, empty))
                        memo[key] = frozenset(hits) if hits else empty
                del node, stack
            tops = []
            for index in range(0, len(candidates), 2):
                node_key = id(candidates[index + 1])
                hits = memo.get(node_key)
                if hits and node_key not in inner:
                    target = _Target()
                    target.graph = True
                    for address in hits:
                        target.storages[address] = nbytes_of[address]
                    tensor = candidates[index]
                    tops.append(id(tensor))
                    self.add_target(tensor, target)
                    del tensor
        candidates.clear()
        memo.clear()
        keep.clear()
        children.clear()
        return [key for key in tops if key not in self.parents]

    # ----- naming --------------------------------------------------------------------------------

    def index_of(self, parent_key, parent):
        """{id(item): index} of a list, tuple or deque (first occurrence)."""
        cache_key = ("index", parent_key)
        index = self.caches.get(cache_key)
        if index is None:
            index = {}
            mro = _mro(type(parent))
            iterate = list.__iter__ if list in mro else tuple.__iter__ if tuple in mro else \
                collections.deque.__iter__ if collections.deque in mro else None
            item = None
            try:
                if iterate is not None:
                    for position, item in enumerate(iterate(parent)):
                        if position >= MAX_INDEX_ITEMS:
                            break
                        index.setdefault(id(item), position)
            except Exception:
                pass
            item = None
            self.caches[cache_key] = index
        return index

    def keys_of(self, parent_key, parent, tag="keys"):
        """({id(value): key}, {id(key)}) of a dict; the keys are kept in the cache."""
        cache_key = (tag, parent_key)
        found = self.caches.get(cache_key)
        if found is None:
            values, keys = self._mine({}), {}
            key = value = None
            try:
                for position, (key, value) in enumerate(dict.items(parent)):
                    if position >= MAX_INDEX_ITEMS:
                        break
                    values.setdefault(id(value), key)
                    keys[id(key)] = None
            except Exception:
                pass
            key = value = None
            found = self.caches[cache_key] = (values, keys)
        return found

    def locals_of(self, parent_key, frame):
        cache_key = ("locals", parent_key)
        found = self.caches.get(cache_key)
        if found is None:
            names, values, snapshot = _read_locals(frame, self.tracing, self.ignore) if frame is not None \
                else ([], [], None)
            mapping = {}
            for name, value in zip(names, values):
                mapping.setdefault(id(value), name)
            del names, values
            found = self.caches[cache_key] = (mapping, snapshot)
        return found

    def fmt_key(self, key, depth=0) -> str:
        tp = type(key)
        if tp in _SIMPLE_KEYS:
            text = repr(key)
            return text if len(text) <= 60 else text[:56] + "..." + text[-1]
        if tp is tuple and depth < 2 and len(key) <= 4:
            inner = ", ".join(self.fmt_key(item, depth + 1) for item in key)
            return f"({inner}{',' if len(key) == 1 else ''})"
        if tp is self.Tensor or (self.Parameter is not None and tp is self.Parameter):
            try:
                shape = "x".join(str(int(size)) for size in tuple(key.shape))
                return f"<{_tname(key)} {shape or 'scalar'} at {id(key):#x}>"
            except Exception:
                pass
        return _obj_label(key)

    def compose(self, parent_key, child_key, parent_best):
        """The name of the child through the parent: (text, role, added length, edge kind) or None.
        Edge kinds: index, member, skey/ikey (str / other dict key), attr, global, local, cell,
        closurecell, transparent (the child is the parent's namespace), other."""
        _, _, text, role, _, _ = parent_best
        parent = self.nodes[parent_key]
        kind = role[0] if role else None
        if kind == "module":
            key = self.keys_of(parent_key, parent)[0].get(child_key, _MISSING)
            return (role[1] + key, None, 1, "global") if type(key) is str else None
        if kind in ("frame", "gen"):
            if kind == "frame":
                frame = parent
            else:
                try:
                    frame = getattr(parent, _GEN_FRAME[type(parent)])
                except Exception:
                    frame = None
            mapping, snapshot = self.locals_of(parent_key, frame)
            del frame
            if snapshot == child_key:
                return text, ("locals", role[1]), 0, "transparent"
            name = mapping.get(child_key)
            return (f"{role[1]}: local '{name}'", None, 1, "local") if name is not None else None
        if kind == "locals":
            key = self.keys_of(parent_key, parent)[0].get(child_key, _MISSING)
            return (f"{role[1]}: local '{key}'", None, 1, "local") if type(key) is str else None
        if kind == "closure":
            position = self.index_of(parent_key, parent).get(child_key)
            if position is not None and position < len(role[1]):
                return f"{text}.<closure>.{role[1][position]}", None, 1, "closurecell"
            return None
        if kind == "attrs":
            key = self.keys_of(parent_key, parent)[0].get(child_key, _MISSING)
            if type(key) is str:
                if role[1] and key in _MODULE_DICTS:
                    return text, ("attrs", False), 0, "transparent"  # model.weight, not model._parameters['weight']
                return (f"{text}.{key}" if key.isidentifier() else f"{text}.__dict__[{self.fmt_key(key)}]",
                        None, 1, "attr")
        tp = type(parent)
        if tp is _CellType:
            return text, None, 0, "cell"
        mro = _mro(tp)
        if list in mro or tuple in mro or collections.deque in mro:
            position = self.index_of(parent_key, parent).get(child_key)
            if position is not None:
                fields = _class_attr(tp, "_fields") if tuple in mro else _MISSING
                if type(fields) is tuple and position < len(fields) and type(fields[position]) is str:
                    return f"{text}.{fields[position]}", None, 1, "index"
                return f"{text}[{position}]", None, 1, "index"
        elif dict in mro and kind != "attrs":
            values, keys = self.keys_of(parent_key, parent)
            key = values.get(child_key, _MISSING)
            if key is not _MISSING:
                return f"{text}[{self.fmt_key(key)}]", None, 1, "skey" if type(key) is str else "ikey"
            if child_key in keys:
                return f"{text} (a key)", None, 1, "ikey"
        elif set in mro or frozenset in mro:
            return f"{text} (a member)", None, 1, "member"
        elif tp is types.FunctionType:
            try:
                if parent.__closure__ is not None and id(parent.__closure__) == child_key:
                    freevars = tuple(str(name) for name in parent.__code__.co_freevars)
                    return text, ("closure", freevars), 0, "transparent"
                for name in ("__defaults__", "__kwdefaults__"):
                    if id(getattr(parent, name)) == child_key:
                        return f"{text}.{name}", None, 1, "attr"
                if id(_instance_dict(parent)) == child_key:
                    return text, ("attrs", False), 0, "transparent"
            except Exception:
                pass
            return None
        elif type in mro:
            try:
                namespace = gc.get_referents(_TYPE_DICT.__get__(parent))
                if any(id(item) == child_key for item in namespace):
                    return text, ("attrs", False), 0, "transparent"
            except Exception:
                pass
            return None
        # any other object: its __dict__, an attribute in it, a slot or C member
        is_module = self.Module is not None and self.Module in mro
        namespace = _instance_dict(parent)
        if namespace is not None:
            if id(namespace) == child_key:
                return text, ("attrs", is_module), 0, "transparent"
            key = self.keys_of(parent_key, namespace, "attrs")[0].get(child_key, _MISSING)
            if type(key) is str:
                if is_module and key in _MODULE_DICTS:
                    return text, ("attrs", False), 0, "transparent"  # model.weight, not model._parameters['weight']
                return (f"{text}.{key}" if key.isidentifier() else f"{text}.__dict__[{self.fmt_key(key)}]",
                        None, 1, "attr")
        for klass in mro:
            try:
                members = [(name, value) for name, value in _TYPE_DICT.__get__(klass).items()
                           if type(value) is types.MemberDescriptorType and name not in ("__weakref__",)]
            except Exception:
                continue
            for name, member in members:
                try:
                    if id(member.__get__(parent, tp)) == child_key:
                        return f"{text}.{name}", None, 1, "attr"
                except Exception:
                    continue
        return f"{text}.<{_tname(self.nodes.get(child_key))}>", None, 1, "other"

    def relax(self):
        """Best names of the objects that need one: shortest path from the best kind of root
        (roots given, module globals, live locals, then the rest)."""
        need = set()
        for parents in self.parents.values():
            need.update(parents)
        best = self.best
        best.clear()
        best.update(self.root_best)
        for key, names in self.frame_local.items():
            if key in self.nodes and key not in best:
                best[key] = (1, 0, names[0], None, None, "local")
        for attempt in range(3):
            for _ in range(2 * MAX_DEPTH + 4):
                changed = False
                for child_key in need:
                    for parent_key in self.parents.get(child_key, ()):
                        parent_best = best.get(parent_key)
                        if parent_best is None:
                            continue
                        composed = self.compose(parent_key, child_key, parent_best)
                        if composed is None:
                            continue
                        text, role, added, edge = composed
                        candidate = (parent_best[0], parent_best[1] + added, text, role, parent_key, edge)
                        current = best.get(child_key)
                        if current is None or (candidate[0], candidate[1], len(text)) < \
                                (current[0], current[1], len(current[2])):
                            best[child_key] = candidate
                            changed = True
                if not changed:
                    break
            unnamed = [key for key in need if key not in best]
            if not unnamed:
                break
            tops = [key for key in unnamed if not any(p in best for p in self.parents.get(key, ()))]
            for key in (tops if attempt < 2 and tops else unnamed):
                best[key] = (3, 0, _obj_label(self.nodes[key]), None, None, None)

    def well_named(self) -> bool:
        for key in self.targets:
            for parent_key in self.parents.get(key, ()):
                found = self.best.get(parent_key)
                if found is None or found[0] > 0:
                    return False
        return True

    # ----- the search ----------------------------------------------------------------------------

    def run(self, max_results):
        self.scan()
        if not self.targets and not self.all_tensors:
            return self.result([], max_results, "no live tensor in this process")
        self.read_frames()
        frontier = self.expand(list(self.targets), 1, max_calls=2)
        up = frontier
        for level in (2, 3, 4):
            # Many tensors in many small containers: go up from the first containers found, then
            # down from there to the others, before asking for the rest one batch at a time.
            if not up or not any(not self.parents.get(key) and key not in self.queried for key in self.targets):
                break
            up = self.expand(up, level, max_calls=1)
            self.complete_down(up)
            frontier += up
        frontier += self.expand(list(self.targets), 1)
        # Through autograd: blocks that no tensor matched, or whose tensors nothing refers to.
        matched_blocks = set()
        orphan_blocks = set()
        for key, target in self.targets.items():
            referenced = bool(self.parents.get(key)) or key in self.frame_local or key not in self.queried
            for address in target.storages:
                block = self.block_of(address)
                matched_blocks.add(block)
                if not referenced:
                    orphan_blocks.add(block)
        wanted = (set(range(len(self.starts))) - matched_blocks) | orphan_blocks
        if wanted and not _time_up(self.deadline):
            roots = self.autograd(wanted)
            if roots:
                frontier += self.expand(roots, 1)
        level = 2
        while frontier and level <= MAX_DEPTH and not _time_up(self.deadline):
            self.relax()
            if self.well_named():
                break
            frontier = self.expand(frontier, level)
            self.complete_down(frontier)
            level += 1
        self.relax()
        return self.result(self.holders(), max_results, None)

    def holders(self):
        groups = {}

        def group(key, kind, path, anchor, direct):
            found = groups.get(key)
            if found is None:
                found = groups[key] = {"kind": kind, "path": path, "anchor": anchor, "tensors": set(),
                                       "storages": {}, "roots": [], "direct": direct, "graph_of": None,
                                       "largest": (-1, None)}
            found["direct"] = found["direct"] and direct
            return found

        def graph_of(found, text):  # the shortest name of a graph's top tensor: losses[0]
            if found["graph_of"] is None or (len(text), text) < (len(found["graph_of"]), found["graph_of"]):
                found["graph_of"] = text

        def add(found, key, target):
            if target.direct:
                found["tensors"].add(key)
                size = sum(target.storages.values())
                if size > found["largest"][0]:
                    found["largest"] = (size, key)
            if target.graph:
                found["roots"].append(key)
            found["storages"].update(target.storages)

        unreferenced = {}
        for key, target in self.targets.items():
            placed = False
            for parent_key in self.parents.get(key, ()):
                parent_best = self.best.get(parent_key)
                if parent_best is None:
                    continue
                owner = parent_key
                while self.best.get(owner) is not None and self.best[owner][5] == "transparent":
                    owner = self.best[owner][4]
                if _container_kind(self.nodes[parent_key]) is None or owner != parent_key:
                    if self.best.get(owner) is not None and self.best[owner][5] in _ELEMENT_EDGES:
                        # An attribute of an element (buffer[3].logits): no need to name the
                        # attribute (reading __dict__ could materialise it), the list is the holder.
                        holder, direct = self.collapse(owner, True)
                        found = group(("container", holder), _container_kind(self.nodes[holder]) or "object",
                                      self.best[holder][2], holder, direct)
                        if target.graph:
                            composed = self.compose(parent_key, key, parent_best)
                            graph_of(found, composed[0] if composed else self.best[owner][2])
                        add(found, key, target)
                        placed = True
                        continue
                composed = self.compose(parent_key, key, parent_best)
                if composed is None:
                    continue
                text, _, _, edge = composed
                start, element = parent_key, False
                if edge in ("attr", "cell"):
                    # buffer[3].logits: the attribute of an element of a list: name the list
                    while self.best.get(start) is not None and self.best[start][5] == "transparent":
                        start = self.best[start][4]
                    element = self.best.get(start) is not None and self.best[start][5] in _ELEMENT_EDGES
                if edge in ("attr", "global", "local", "cell") and not element:
                    kind = {"attr": "attribute"}.get(edge, edge)
                    found = group(("slot", text), kind, text, None, True)
                else:
                    holder, direct = self.collapse(start, element)
                    kind = _container_kind(self.nodes[holder]) or "object"
                    found = group(("container", holder), kind, self.best[holder][2], holder, direct)
                if target.graph:
                    graph_of(found, text)
                add(found, key, target)
                placed = True
            for text in self.frame_local.get(key, ()):
                found = group(("slot", text), "local", text, None, True)
                if target.graph:
                    graph_of(found, text)
                add(found, key, target)
                placed = True
            if not placed and target.direct and key in self.queried:
                unreferenced[key] = target
        explained = set()
        for found in groups.values():
            explained.update(found["storages"])
        rest = {key: target for key, target in unreferenced.items()
                if any(address not in explained for address in target.storages)}
        if rest:
            found = group(("unreferenced",), "unreferenced", "(no Python referrer)", None, True)
            for key, target in rest.items():
                add(found, key, target)
        out = []
        for found in groups.values():
            anchor = found["anchor"]
            if anchor is None:
                anchor = found["largest"][1] if found["largest"][1] is not None else \
                    (found["roots"][0] if found["roots"] else None)
            created = _created_at(self.nodes[anchor]) if anchor is not None and found["kind"] != "unreferenced" else None
            saved = set()
            for key in found["roots"]:
                saved.update(self.targets[key].storages)
            direct_storages = set()
            for key in found["tensors"]:
                direct_storages.update(self.targets[key].storages)
            also = self.other_names(found["anchor"], found["path"]) if found["anchor"] is not None else ()
            out.append(Holder(
                path=found["path"], kind=found["kind"],
                tensors=len(found["tensors"]) + len(saved - direct_storages),
                bytes=sum(found["storages"].values()), created_at=created,
                graph_roots=len(set(found["roots"])), graph_of=found["graph_of"] if found["roots"] else None,
                also=also, direct=found["direct"]))
        out.sort(key=lambda holder: (-holder.bytes, -holder.tensors, holder.path))
        return out

    def collapse(self, holder, element):
        """history[3] is a tuple in the list history, buffer[3] an object in the list buffer: the
        holder is the list. Goes up through element edges (list index, set member, non-str key)."""
        direct = not element
        for step in range(4):
            found = self.best.get(holder)
            if found is None or found[5] not in _ELEMENT_EDGES:
                break
            if not (step == 0 and element) and _container_kind(self.nodes[holder]) is None:
                break
            holder, direct = found[4], False
        return holder, direct

    def other_names(self, key, chosen):
        names = []
        for parent_key in self.parents.get(key, ()):
            parent_best = self.best.get(parent_key)
            if parent_best is None or parent_best[0] > 2:
                continue
            composed = self.compose(parent_key, key, parent_best)
            if composed is not None and composed[2] and composed[0] != chosen:
                names.append((parent_best[0], composed[0]))
        names.extend((1, text) for text in self.frame_local.get(key, ()) if text != chosen)
        names.sort()
        unique = []
        for _, text in names:
            if text not in unique:
                unique.append(text)
        return tuple(unique[:2])

    def result(self, holders, max_results, reason):
        matched = {}
        direct = 0
        for target in self.targets.values():
            direct += target.direct
            matched.update(target.storages)
        blocks_matched = len({self.block_of(address) for address in matched})
        kept = holders if max_results is None else holders[:max(0, int(max_results))]
        if reason is None:
            if self.incomplete:
                reason = self.incomplete
            elif not holders:
                reason = "no live tensor lies in the blocks"
        return HolderSearch(tuple(kept), self.incomplete is None, time.perf_counter() - self.started,
                            tensors_matched=direct, bytes_matched=sum(matched.values()),
                            blocks=len(self.starts), blocks_matched=blocks_matched,
                            holders_found=len(holders), reason=reason)


def _container_kind(obj) -> Optional[str]:
    mro = _mro(type(obj))
    for base, kind in _CONTAINER_KINDS:
        if base in mro:
            return kind
    return None


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None
