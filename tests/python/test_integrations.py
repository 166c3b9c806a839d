"""rlmem.integrations.RlmemCallback (a transformers.TrainerCallback made on first use) and the
plain-loop form. transformers is not installed here: a stand-in module plays it; with the real
one installed (the GPU machine), the last test uses it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

from conftest import PYTHON_DIR
from fakes import FakeCuda, synthetic
from schema_check import check_steplog


class StandInTrainerCallback:
    """transformers.TrainerCallback's shape: every event a no-op method."""

    def on_step_end(self, args, state, control, **kwargs):
        pass

    def on_train_end(self, args, state, control, **kwargs):
        pass


@pytest.fixture
def stand_in_transformers(monkeypatch):
    module = types.ModuleType("transformers")
    module.TrainerCallback = StandInTrainerCallback
    monkeypatch.setitem(sys.modules, "transformers", module)
    return module


def test_import_rlmem_does_not_import_transformers():
    code = "import sys, rlmem, rlmem.integrations; print('transformers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PYTHON_DIR)})
    assert done.stdout.strip() == "False", done.stdout + done.stderr


def test_without_transformers_the_callback_says_what_it_needs(monkeypatch, rlmem):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` fail
    integrations = importlib.import_module("rlmem.integrations")
    with pytest.raises(ImportError, match="rlmem.integrations.RlmemCallback needs transformers"):
        integrations.RlmemCallback  # noqa: B018


def test_callback_steps_the_monitor_with_global_step(stand_in_transformers, rlmem, tmp_path):
    from rlmem.integrations import RlmemCallback

    assert issubclass(RlmemCallback, StandInTrainerCallback) and RlmemCallback.__name__ == "RlmemCallback"
    assert RlmemCallback is rlmem.integrations.RlmemCallback, "one class per TrainerCallback base"
    cuda = FakeCuda(synthetic(4))
    callback = RlmemCallback(log=tmp_path / "trainer.jsonl", cuda=cuda)
    state = types.SimpleNamespace(global_step=0)
    control = object()
    for index in range(4):
        cuda.goto(index)
        state.global_step = 10 * (index + 1)  # e.g. logging every 10 optimizer steps
        assert callback.on_step_end(None, state, control) is control
    assert callback.on_train_end(None, state, control) is control
    assert [r["step"] for r in check_steplog(tmp_path / "trainer.jsonl")] == [10, 20, 30, 40]
    assert callback.monitor._log_file is None, "on_train_end closes the log"


def test_callback_takes_an_existing_monitor(stand_in_transformers, rlmem):
    from rlmem.integrations import RlmemCallback

    monitor = rlmem.StepMonitor(cuda=FakeCuda(synthetic(1)))
    assert RlmemCallback(monitor).monitor is monitor
    with pytest.raises(TypeError, match="either a StepMonitor or the options"):
        RlmemCallback(monitor, log="x.jsonl")


def test_plain_loop_form_is_exported(rlmem):
    from rlmem.integrations import monitored

    assert monitored is rlmem.monitored


def test_with_real_transformers(rlmem, tmp_path):
    transformers = pytest.importorskip("transformers")
    from rlmem.integrations import RlmemCallback

    assert issubclass(RlmemCallback, transformers.TrainerCallback)
    cuda = FakeCuda(synthetic(2))
    callback = RlmemCallback(log=tmp_path / "t.jsonl", cuda=cuda)
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    for index in range(2):
        cuda.goto(index)
        state.global_step = index + 1
        callback.on_step_end(None, state, control)
    callback.on_train_end(None, state, control)
    assert [r["step"] for r in check_steplog(tmp_path / "t.jsonl")] == [1, 2]
