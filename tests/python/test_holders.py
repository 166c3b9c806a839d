"""rlmem.holders.find_holders: the Python object that keeps a leak's tensors alive.

CPU tensors stand in for GPU ones: their storages have host addresses, and the walk is the same.
The tests of the walk itself also run with a stand-in torch module (a gc-tracked Tensor class with
untyped_storage()), so that they run on every Python, torch or not; the autograd, nn.Module and
view tests need the real torch. Independent of librlmem (only the package's Python files).
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import sys
import threading
import time
import tracemalloc
import types
import weakref

import pytest

from rlmem.holders import Holder, HolderSearch, find_holders

HERE = sys.modules[__name__]
MOD = __name__  # the name the walk gives this module's globals


_addresses = itertools.count(1 << 40, 1 << 20)


class StandInStorage:
    def __init__(self, address, size):
        self.address, self.size = address, size

    def data_ptr(self):
        return self.address

    def nbytes(self):
        return self.size


class StandInTensor:
    """What the walk needs of torch.Tensor: a gc-tracked object with a storage address."""

    def __init__(self, numel):
        self._storage_ = StandInStorage(next(_addresses), 4 * numel)

    def untyped_storage(self):
        return self._storage_


def stand_in_torch():
    module = types.ModuleType("torch")
    module.Tensor = StandInTensor
    module.zeros = lambda *size: StandInTensor(math.prod(size))
    return module


@pytest.fixture(params=["torch", "stand-in"])
def torch(request, monkeypatch):
    if request.param == "torch":
        return pytest.importorskip("torch")
    module = stand_in_torch()
    monkeypatch.setitem(sys.modules, "torch", module)
    return module


@pytest.fixture
def real_torch():
    return pytest.importorskip("torch")


def storage_of(tensor):
    for name in ("untyped_storage", "_storage"):
        if hasattr(tensor, name):
            storage = getattr(tensor, name)()
            break
    else:
        storage = tensor.storage()
    return storage.data_ptr(), storage.nbytes()


def blocks_of(tensors):
    return [storage_of(tensor) for tensor in tensors]


def nbytes(tensors):
    return sum(size for _, size in dict(blocks_of(tensors)).items())


def holder_at(found, path):
    for holder in found.holders:
        if holder.path == path:
            return holder
    raise AssertionError(f"expected a holder `{path}`; saw {[h.path for h in found.holders]} ({found.reason})")


def only_plain_values(value, where="result"):
    """The results keep no object alive: strings, numbers, None and tuples of them only."""
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            only_plain_values(getattr(value, field.name), f"{where}.{field.name}")
    elif type(value) is tuple:
        for position, item in enumerate(value):
            only_plain_values(item, f"{where}[{position}]")
    else:
        assert type(value) in (str, int, float, bool, type(None)), \
            f"expected only str/int/float/bool/None in {where}; saw {type(value).__name__}"


def test_a_module_global_list(torch, monkeypatch):
    monkeypatch.setattr(HERE, "KEPT", [torch.zeros(256) for _ in range(3)], raising=False)
    found = find_holders(blocks_of(HERE.KEPT))
    assert isinstance(found, HolderSearch), f"expected a HolderSearch; saw {type(found).__name__}"
    assert found.complete, f"expected complete=True; saw False ({found.reason})"
    assert len(found) >= 1 and found[0].path == f"{MOD}.KEPT", \
        f"expected `{MOD}.KEPT` first; saw {[h.path for h in found]}"
    holder = found[0]
    assert (holder.kind, holder.tensors, holder.bytes) == ("list", 3, 3 * 1024), \
        f"expected ('list', 3, 3072); saw {(holder.kind, holder.tensors, holder.bytes)}"
    assert str(holder) == f"kept by `{MOD}.KEPT`, a list of 3 tensors (3.00 KiB)", f"saw {str(holder)!r}"
    assert (found.tensors_matched, found.bytes_matched, found.blocks, found.blocks_matched) == (3, 3072, 3, 3), \
        f"expected (3, 3072, 3, 3); saw {(found.tensors_matched, found.bytes_matched, found.blocks, found.blocks_matched)}"
    only_plain_values(found)


class Trainer:
    def __init__(self, torch):
        self.metrics = {"entropy": [torch.zeros(100) for _ in range(12)],
                        "kl": [torch.zeros(100) for _ in range(5)]}
        self.last_logits = torch.zeros(1000)


def test_a_list_in_a_dict_in_an_attribute_of_a_main_global(torch, monkeypatch):
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "trainer", Trainer(torch), raising=False)
    found = find_holders(blocks_of(main.trainer.metrics["entropy"]) + blocks_of([main.trainer.last_logits]))
    assert found.complete, f"expected complete=True; saw False ({found.reason})"
    paths = [holder.path for holder in found]
    assert paths == ["trainer.metrics['entropy']", "trainer.last_logits"], \
        f"expected [\"trainer.metrics['entropy']\", 'trainer.last_logits'] (by bytes); saw {paths}"
    metrics, logits = found
    assert (logits.kind, logits.tensors, logits.bytes) == ("attribute", 1, 4000), \
        f"expected ('attribute', 1, 4000); saw {(logits.kind, logits.tensors, logits.bytes)}"
    assert (metrics.kind, metrics.tensors, metrics.bytes) == ("list", 12, 4800), \
        f"expected ('list', 12, 4800) (the 'kl' list is not in the blocks); saw " \
        f"{(metrics.kind, metrics.tensors, metrics.bytes)}"
    assert str(metrics) == "kept by `trainer.metrics['entropy']`, a list of 12 tensors (4.69 KiB)", \
        f"saw {str(metrics)!r}"


def test_a_local_of_a_live_frame(torch):
    kept = [torch.zeros(64) for _ in range(4)]
    line = sys._getframe().f_lineno + 1
    found = find_holders(blocks_of(kept))
    expected = f"test_holders.py:{line} in test_a_local_of_a_live_frame(): local 'kept'"
    assert found and found[0].path.endswith(expected), \
        f"expected a path ending with {expected!r}; saw {[h.path for h in found]} ({found.reason})"
    assert (found[0].kind, found[0].tensors) == ("list", 4), f"expected ('list', 4); saw {(found[0].kind, found[0].tensors)}"


def test_a_local_of_a_suspended_generator(torch):
    def producer():
        buffer = [torch.zeros(16), torch.zeros(16)]
        yield buffer

    generator = producer()
    blocks = blocks_of(next(generator))
    found = find_holders(blocks)
    # Python >= 3.11 names test_a_local_of_a_suspended_generator.<locals>.producer(), earlier just producer().
    expected = "producer() (suspended generator): local 'buffer'"
    assert found and expected in found[0].path, \
        f"expected a path containing {expected!r}; saw {[h.path for h in found]} ({found.reason})"
    generator.close()


def test_a_local_of_another_thread(torch):
    ready, done = threading.Event(), threading.Event()
    blocks = []

    def worker():
        kept = [torch.zeros(32) for _ in range(2)]
        blocks.extend(blocks_of(kept))
        ready.set()
        done.wait(30)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert ready.wait(30), "expected the worker thread to start"
        found = find_holders(blocks)
    finally:
        done.set()
        thread.join(30)
    expected = "worker(): local 'kept'"
    assert found and expected in found[0].path, \
        f"expected a path containing {expected!r}; saw {[h.path for h in found]} ({found.reason})"


def test_a_local_of_a_frame_kept_by_a_stored_exception(torch, monkeypatch):
    def fails():
        big = [torch.zeros(9)]
        raise ValueError(len(big))

    try:
        fails()
    except ValueError:
        monkeypatch.setattr(HERE, "LAST_ERROR", sys.exc_info(), raising=False)  # the classic leak
    traceback = HERE.LAST_ERROR[2]
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    blocks = blocks_of(traceback.tb_frame.f_locals["big"])
    del traceback
    found = find_holders(blocks)
    expected = "fails() (not running): local 'big'"
    assert found and expected in found[0].path and found[0].kind == "list", \
        f"expected a list at a path containing {expected!r}; saw {[(h.path, h.kind) for h in found]}"


def test_a_closure_cell(torch, monkeypatch):
    def make_hook():
        saved = torch.zeros(128)

        def hook():
            return saved

        return hook

    monkeypatch.setattr(HERE, "HOOK", make_hook(), raising=False)
    found = find_holders(blocks_of([HERE.HOOK()]))
    assert found and (found[0].path, found[0].kind) == (f"{MOD}.HOOK.<closure>.saved", "cell"), \
        f"expected ('{MOD}.HOOK.<closure>.saved', 'cell'); saw {[(h.path, h.kind) for h in found]}"


def test_a_tuple(torch, monkeypatch):
    monkeypatch.setattr(HERE, "PAIR", (torch.zeros(10), torch.zeros(20)), raising=False)
    found = find_holders(blocks_of(HERE.PAIR))
    assert found and (found[0].path, found[0].kind, found[0].tensors, found[0].bytes) == (f"{MOD}.PAIR", "tuple", 2, 120), \
        f"expected ('{MOD}.PAIR', 'tuple', 2, 120); saw {[(h.path, h.kind, h.tensors, h.bytes) for h in found]}"


def test_tuples_in_a_list_are_one_holder(torch, monkeypatch):
    monkeypatch.setattr(HERE, "HISTORY", [(torch.zeros(8), torch.zeros(8)) for _ in range(5)], raising=False)
    found = find_holders(blocks_of([tensor for pair in HERE.HISTORY for tensor in pair]))
    assert [(h.path, h.kind, h.tensors, h.bytes, h.direct) for h in found] == [(f"{MOD}.HISTORY", "list", 10, 320, False)], \
        f"expected [('{MOD}.HISTORY', 'list', 10, 320, False)]; saw {[(h.path, h.kind, h.tensors, h.bytes, h.direct) for h in found]}"
    assert str(found[0]) == f"kept by `{MOD}.HISTORY`, a list holding 10 tensors (320 B)", f"saw {str(found[0])!r}"


class Transition:
    def __init__(self, obs, logits):
        self.obs = obs
        self.logits = logits


@pytest.mark.parametrize("materialized", [False, True], ids=["inline-attributes", "with-__dict__"])
def test_objects_in_a_list_are_grouped_under_the_list(torch, monkeypatch, materialized):
    # A rollout buffer: 300 objects holding 2 tensors each. One referrer search finds 32 of them;
    # the walk goes up to the list and down from it to the others.
    buffer = [Transition(torch.zeros(4), torch.zeros(4)) for _ in range(300)]
    if materialized:
        for transition in buffer:
            vars(transition)  # on CPython 3.11+ this gives the object a real __dict__ (one more level)
    monkeypatch.setattr(HERE, "ROLLOUT", {"buffer": buffer}, raising=False)
    blocks = blocks_of([tensor for transition in buffer for tensor in (transition.obs, transition.logits)])
    buffer = transition = None
    found = find_holders(blocks)
    assert found.complete, f"expected complete=True; saw False ({found.reason})"
    seen = [(h.path, h.kind, h.tensors, h.direct) for h in found]
    assert seen == [(f"{MOD}.ROLLOUT['buffer']", "list", 600, False)], \
        f"expected [(\"{MOD}.ROLLOUT['buffer']\", 'list', 600, False)]; saw {seen}"


def test_views_of_one_storage_count_its_bytes_once(real_torch, monkeypatch):
    torch = real_torch
    base = torch.zeros(100)
    monkeypatch.setattr(HERE, "VIEWS", [base[:50], base[50:]], raising=False)
    blocks = blocks_of([base])
    del base
    found = find_holders(blocks)
    holder = holder_at(found, f"{MOD}.VIEWS")
    assert (holder.tensors, holder.bytes) == (2, 400), f"expected (2, 400); saw {(holder.tensors, holder.bytes)}"


def test_a_parameter_of_a_module_is_named_by_attribute(real_torch, monkeypatch):
    torch = real_torch
    monkeypatch.setattr(HERE, "MODEL", torch.nn.Linear(4, 4), raising=False)
    found = find_holders(blocks_of([HERE.MODEL.weight]))
    assert found and (found[0].path, found[0].kind) == (f"{MOD}.MODEL.weight", "attribute"), \
        f"expected ('{MOD}.MODEL.weight', 'attribute'); saw {[(h.path, h.kind) for h in found]}"


def test_optimizer_state_is_named_by_the_optimizer(real_torch, monkeypatch):
    torch = real_torch
    model = torch.nn.Linear(3, 3)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 3)).sum().backward()
    optimizer.step()
    monkeypatch.setattr(HERE, "OPTIMIZER", optimizer, raising=False)
    blocks = blocks_of([state["exp_avg"] for state in optimizer.state.values()])
    del model, optimizer
    found = find_holders(blocks)
    seen = [(h.path, h.kind, h.tensors) for h in found]
    assert seen == [(f"{MOD}.OPTIMIZER.state", "dict", 2)], f"expected [('{MOD}.OPTIMIZER.state', 'dict', 2)]; saw {seen}"


def test_roots_name_objects_the_caller_knows(torch):
    class Cache:
        pass

    owner = Cache()
    owner.entries = {"step": [torch.zeros(8)]}
    found = find_holders(blocks_of(owner.entries["step"]), roots={"cache": owner})
    assert found and found[0].path == "cache.entries['step']", \
        f"expected \"cache.entries['step']\"; saw {[h.path for h in found]}"


def test_held_through_an_autograd_graph(real_torch, monkeypatch):
    torch = real_torch
    x = torch.randn(1000, requires_grad=True)
    hidden = x.exp()  # saved by ExpBackward (result) and SinBackward (self)
    blocks = blocks_of([hidden])
    loss = hidden.sin()
    del hidden  # its storage now lives on only inside the graph of `loss`
    monkeypatch.setattr(HERE, "LOSSES", [loss], raising=False)
    del loss
    found = find_holders(blocks)
    holder = holder_at(found, f"{MOD}.LOSSES")
    assert (holder.kind, holder.tensors, holder.bytes, holder.graph_roots, holder.graph_of) == \
        ("list", 1, 4000, 1, f"{MOD}.LOSSES[0]"), \
        f"expected ('list', 1, 4000, 1, '{MOD}.LOSSES[0]'); saw " \
        f"{(holder.kind, holder.tensors, holder.bytes, holder.graph_roots, holder.graph_of)}"
    assert "whose autograd graphs save 1 tensor (3.91 KiB)" in str(holder), f"saw {str(holder)!r}"
    assert all(h.kind != "unreferenced" for h in found), \
        f"expected no unreferenced holder (the graph explains the storage); saw {[str(h) for h in found]}"


def test_a_running_loss_holds_every_step_graph(real_torch, monkeypatch):
    torch = real_torch
    class State:
        pass

    state = State()
    state.running = torch.zeros(())
    x = torch.randn(500, requires_grad=True)
    blocks = []
    for step in range(3):
        hidden = (x * (step + 1)).exp()
        blocks += blocks_of([hidden])
        state.running = state.running + hidden.sin().sum()  # the classic leak: no .item()
        del hidden
    monkeypatch.setattr(HERE, "STATE", state, raising=False)
    del state
    found = find_holders(blocks)
    holder = holder_at(found, f"{MOD}.STATE.running")
    assert (holder.kind, holder.tensors, holder.bytes, holder.graph_roots) == ("attribute", 3, 6000, 1), \
        f"expected ('attribute', 3, 6000, 1); saw {(holder.kind, holder.tensors, holder.bytes, holder.graph_roots)}"


def test_a_graph_whose_top_tensor_is_gone_is_unreferenced_or_unmatched(real_torch, monkeypatch):
    torch = real_torch
    x = torch.randn(100, requires_grad=True)
    hidden = x.exp()
    blocks = blocks_of([hidden])
    node = hidden.sin().grad_fn  # the graph lives on through its node, the output tensor is gone
    del hidden
    monkeypatch.setattr(HERE, "NODE", node, raising=False)
    del node
    found = find_holders(blocks)
    if found.tensors_matched:  # torch kept the Python object of the saved tensor
        assert [h.kind for h in found] == ["unreferenced"], f"expected ['unreferenced']; saw {[str(h) for h in found]}"
        assert str(found[0]).startswith("kept by no Python object: 1 tensor (400 B)"), f"saw {str(found[0])!r}"
    else:
        assert not found and found.complete, f"expected no holder, complete; saw {[str(h) for h in found]}"


def test_budget_zero_returns_at_once_incomplete(torch):
    kept = [torch.zeros(4)]
    started = time.perf_counter()
    found = find_holders(blocks_of(kept), budget_seconds=0)
    elapsed = time.perf_counter() - started
    assert (found.complete, len(found)) == (False, 0), f"expected (False, 0); saw {(found.complete, len(found))}"
    assert elapsed < 0.05, f"expected under 0.05 s; saw {elapsed:.3f} s"
    assert "budget" in (found.reason or ""), f"expected a reason about the budget; saw {found.reason!r}"
    tiny = find_holders(blocks_of(kept), budget_seconds=1e-9)
    assert tiny.complete is False, f"expected complete=False with a 1 ns budget; saw {tiny.complete} ({tiny.reason})"


class Box(list):
    """A list that takes weak references."""


def test_no_reference_is_kept_to_a_global_container(torch):
    HERE.BOX = Box(torch.zeros(16) for _ in range(3))  # not monkeypatch: its undo list would keep it
    try:
        check_no_reference_is_kept()
    finally:
        vars(HERE).pop("BOX", None)


def check_no_reference_is_kept():
    box_ref = weakref.ref(HERE.BOX)
    tensor_refs = [weakref.ref(tensor) for tensor in list.__iter__(HERE.BOX)]
    before = sys.getrefcount(HERE.BOX)
    counts = [sys.getrefcount(ref()) for ref in tensor_refs]
    found = find_holders(blocks_of(HERE.BOX))
    assert found and found[0].path == f"{MOD}.BOX", f"expected `{MOD}.BOX`; saw {[h.path for h in found]}"
    after = sys.getrefcount(HERE.BOX)  # outside assert: pytest's rewriting holds temporaries
    after_counts = [sys.getrefcount(ref()) for ref in tensor_refs]
    assert after == before, f"expected refcount {before}; saw {after}"
    assert after_counts == counts, f"expected tensor refcounts {counts}; saw {after_counts}"
    only_plain_values(found)
    del HERE.BOX
    assert box_ref() is None, "expected the container to die once its global is deleted; it is still alive"
    assert all(ref() is None for ref in tensor_refs), "expected the tensors to die with their container"


def test_no_reference_is_kept_to_a_local_container(torch):
    if sys.gettrace() is not None or sys.getprofile() is not None:
        pytest.skip("a trace function is set: frame locals snapshots are left in place then")
    box = Box(torch.zeros(16) for _ in range(3))
    box_ref = weakref.ref(box)
    before = sys.getrefcount(box)
    found = find_holders(blocks_of(box))
    after = sys.getrefcount(box)
    assert found and found[0].path.endswith("local 'box'"), f"expected a local 'box'; saw {[h.path for h in found]}"
    assert after == before, f"expected refcount {before}; saw {after}"
    del box
    assert box_ref() is None, "expected the container to die after `del` (no frame snapshot may hold it)"


class Hostile:
    """Every hook a careless walker would call raises; isinstance() even says it is a Tensor."""

    def __getattribute__(self, name):
        if name == "__class__":
            return sys.modules["torch"].Tensor
        raise RuntimeError(f"hostile __getattribute__({name})")

    def __getattr__(self, name):
        raise RuntimeError(f"hostile __getattr__({name})")

    def __eq__(self, other):
        raise RuntimeError("hostile __eq__")

    def __hash__(self):
        return 7

    def __repr__(self):
        raise RuntimeError("hostile __repr__")

    __str__ = __repr__

    def __len__(self):
        raise RuntimeError("hostile __len__")

    def __iter__(self):
        raise RuntimeError("hostile __iter__")

    def __bool__(self):
        raise RuntimeError("hostile __bool__")


class HostileList(list):
    def __iter__(self):
        raise RuntimeError("hostile __iter__")

    def __eq__(self, other):
        raise RuntimeError("hostile __eq__")

    __hash__ = None

    def __repr__(self):
        raise RuntimeError("hostile __repr__")

    def __len__(self):
        raise RuntimeError("hostile __len__")

    def __getattribute__(self, name):
        raise RuntimeError(f"hostile __getattribute__({name})")


def test_hostile_objects_in_the_chain(torch, monkeypatch):
    items = [torch.zeros(40) for _ in range(2)]
    blocks = blocks_of(items)
    evil = Hostile()
    object.__setattr__(evil, "items", HostileList(items))
    key = Hostile()
    more = [torch.zeros(20)]
    blocks += blocks_of(more)
    monkeypatch.setattr(HERE, "EVIL", evil, raising=False)
    # Under a str key the list is a holder of its own; a Hostile key is shown by type and address.
    monkeypatch.setattr(HERE, "EVIL_MAP", {key: {"step": more}}, raising=False)
    assert isinstance(evil, torch.Tensor), "the hostile object should pass isinstance(obj, torch.Tensor)"
    del items, more, evil
    found = find_holders(blocks, max_results=None)
    assert found.complete, f"expected complete=True; saw False ({found.reason})"
    paths = sorted((h.path, h.kind, h.tensors) for h in found)
    expected = sorted([(f"{MOD}.EVIL.items", "list", 2), (f"{MOD}.EVIL_MAP[<Hostile at {id(key):#x}>]['step']", "list", 1)])
    assert paths == expected, f"expected {expected}; saw {paths}"


def test_created_at_when_tracemalloc_traces(torch, monkeypatch):
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(4)
    try:
        spare = [[] for _ in range(200)]  # empty the free list: its lists were allocated before tracing
        line = sys._getframe().f_lineno + 1
        made = [torch.zeros(32) for _ in range(3)]
        monkeypatch.setattr(HERE, "MADE", made, raising=False)
        del made, spare
        found = find_holders(blocks_of(HERE.MADE))
    finally:
        if started:
            tracemalloc.stop()
    holder = holder_at(found, f"{MOD}.MADE")
    assert (holder.created_at or "").endswith(f"test_holders.py:{line}"), \
        f"expected created_at ending with test_holders.py:{line}; saw {holder.created_at!r}"
    assert str(holder).endswith(f"test_holders.py:{line}"), f"saw {str(holder)!r}"


def test_created_at_is_none_without_tracemalloc(torch, monkeypatch):
    if tracemalloc.is_tracing():
        pytest.skip("tracemalloc is tracing in this process")
    monkeypatch.setattr(HERE, "PLAIN", [torch.zeros(4)], raising=False)
    found = find_holders(blocks_of(HERE.PLAIN))
    assert found and found[0].created_at is None, f"expected created_at None; saw {[h.created_at for h in found]}"


def test_ranked_by_bytes_and_cut_at_max_results(torch, monkeypatch):
    for name, size in (("SMALL", 10), ("LARGE", 1000), ("MIDDLE", 100)):
        monkeypatch.setattr(HERE, name, [torch.zeros(size)], raising=False)
    found = find_holders(blocks_of(HERE.SMALL + HERE.LARGE + HERE.MIDDLE), max_results=2)
    paths = [h.path for h in found]
    assert paths == [f"{MOD}.LARGE", f"{MOD}.MIDDLE"], f"expected ['{MOD}.LARGE', '{MOD}.MIDDLE']; saw {paths}"
    assert found.holders_found == 3, f"expected holders_found 3; saw {found.holders_found}"


def test_blocks_that_hold_no_tensor(torch):
    found = find_holders([(16, 16)])
    assert (found.complete, len(found), found.tensors_matched) == (True, 0, 0), \
        f"expected (True, 0, 0); saw {(found.complete, len(found), found.tensors_matched)}"
    assert found.reason, "expected a reason for an empty result"


def test_blocks_as_mappings_and_objects(torch, monkeypatch):
    monkeypatch.setattr(HERE, "KEPT2", [torch.zeros(8), torch.zeros(8)], raising=False)
    (a, a_size), (b, b_size) = blocks_of(HERE.KEPT2)

    class Block:
        address, size = b, b_size

    found = find_holders([{"address": a, "size": a_size}, Block()])
    assert found and (found[0].path, found[0].tensors) == (f"{MOD}.KEPT2", 2), \
        f"expected ('{MOD}.KEPT2', 2); saw {[(h.path, h.tensors) for h in found]}"
    with pytest.raises((TypeError, ValueError)):
        find_holders([(1, 2, 3)])


def test_without_torch_an_empty_complete_result(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    found = find_holders([(4096, 4096)])
    assert (found.complete, found.holders) == (True, ()), f"expected (True, ()); saw {(found.complete, found.holders)}"
    assert "torch" in (found.reason or ""), f"expected a reason naming torch; saw {found.reason!r}"


def test_a_larger_heap_within_the_budget(torch, monkeypatch):
    heap = [[index] for index in range(300_000)]  # 300k more gc-tracked objects
    monkeypatch.setattr(HERE, "DEEP", {"a": {"b": [torch.zeros(8) for _ in range(50)]}}, raising=False)
    found = find_holders(blocks_of(HERE.DEEP["a"]["b"]), budget_seconds=10)
    del heap
    assert found.complete, f"expected complete=True; saw False ({found.reason})"
    assert found and found[0].path == f"{MOD}.DEEP['a']['b']", f"expected \"{MOD}.DEEP['a']['b']\"; saw {[h.path for h in found]}"
    assert found.seconds < 10, f"expected under 10 s; saw {found.seconds:.2f} s"


def test_holder_str_for_each_kind():
    cases = {
        Holder("a.b", "attribute", 1, 1024): "kept by `a.b`, an attribute holding 1 tensor (1.00 KiB)",
        Holder("x", "dict", 2, 2048, created_at="x.py:3"): "kept by `x`, a dict of 2 tensors (2.00 KiB), created at x.py:3",
        Holder("f.py:1 in f(): local 'k'", "local", 1, 10, also=("g",)):
            "kept by `f.py:1 in f(): local 'k'`, a local variable holding 1 tensor (10 B); also reachable as `g`",
    }
    for holder, expected in cases.items():
        assert str(holder) == expected, f"expected {expected!r}; saw {str(holder)!r}"
    gc.collect()
