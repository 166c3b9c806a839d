"""A transformers KV cache that grows in place: each layer's keys and values live in rlmem
:class:`~rlmem.runtime.GrowableBuffer` s, so the cache maps memory as the sequence grows, with
no ``torch.cat`` copies (transformers' ``DynamicCache`` holds two copies while it grows) and no
worst-case preallocation (``StaticCache``)::

    from rlmem.kv_cache import GrowableCache
    cache = GrowableCache(max_tokens=8192, tag="rollout")
    model.generate(input_ids, past_key_values=cache, max_new_tokens=2048)

``max_tokens`` bounds the sequence (prompt and generated tokens): addresses for that many are
reserved up front, memory is mapped 2 MiB at a time. With ``tag``, the buffers belong to that
rlmem tag, so ``rlmem.runtime.pause(tag)`` releases them between rollouts. Works with torch's
own allocator (the buffers come from rlmem's runtime beside it) and under
``rlmem.runtime.install()``. Needs transformers 5 (its ``Cache`` of layers).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Optional

import torch
from transformers.cache_utils import Cache, DynamicLayer

from .errors import InvalidArgumentError
from .runtime import GrowableBuffer, region

__all__ = ["GrowableCache", "GrowableLayer"]


class _TokenMajor:
    """One of a layer's two tensors: a buffer laid out [token, batch, head, dim], so that it grows
    at its end, seen by transformers as [batch, head, token, dim] (a permuted view)."""

    def __init__(self, like: torch.Tensor, max_tokens: int, tag: Optional[str]):
        batch, heads, _, dim = like.shape
        self.token_shape = (batch, heads, dim)
        self.dtype = like.dtype
        self.token_bytes = batch * heads * dim * like.element_size()
        with region(tag, device=like.device.index) if tag else contextlib.nullcontext():
            self.buffer = GrowableBuffer(max_tokens * self.token_bytes, device=like.device.index)
        self.all_tokens: Optional[torch.Tensor] = None  # a view of every token the buffer holds now

    def write(self, start: int, states: torch.Tensor) -> torch.Tensor:
        """Stores `states` ([batch, head, tokens, dim]) from token `start`; the view of all so far."""
        end = start + states.shape[-2]
        if self.buffer.nbytes < end * self.token_bytes:
            self.buffer.grow(end * self.token_bytes)  # whole pages: room for more than `end`
            self.all_tokens = self.buffer.view((self.buffer.nbytes // self.token_bytes, *self.token_shape), self.dtype)
        assert self.all_tokens is not None
        self.all_tokens[start:end] = states.permute(2, 0, 1, 3)
        return self.all_tokens[:end].permute(1, 2, 0, 3)

    def release(self) -> None:
        self.all_tokens = None
        self.buffer.release()


class GrowableLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values grow in place in rlmem buffers."""

    def __init__(self, max_tokens: int, tag: Optional[str] = None):
        super().__init__()
        self.max_tokens = max_tokens
        self.tag = tag
        self._keys: Optional[_TokenMajor] = None
        self._values: Optional[_TokenMajor] = None
        self._length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self._keys = _TokenMajor(key_states, self.max_tokens, self.tag)
        self._values = _TokenMajor(value_states, self.max_tokens, self.tag)
        self._length = 0
        self.keys = key_states[..., :0, :]
        self.values = value_states[..., :0, :]
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self._length + key_states.shape[-2]
        if end > self.max_tokens:
            raise InvalidArgumentError(f"GrowableCache holds at most {self.max_tokens} tokens; "
                                       f"this update would make {end}: raise max_tokens")
        assert self._keys is not None and self._values is not None
        self.keys = self._keys.write(self._length, key_states)
        self.values = self._values.write(self._length, value_states)
        self._length = end
        return self.keys, self.values

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)  # narrows the views; the buffers keep their pages
        if self.is_initialized:
            self._length = self.keys.shape[-2]

    # Beam search and returning several sequences change the batch: the buffers are made again
    # for the new batch and the selected rows copied into them.
    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self._rebuild(self.keys.repeat_interleave(repeats, dim=0), self.values.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._rebuild(self.keys[indices, ...], self.values[indices, ...])

    def _rebuild(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        self.release()
        self.lazy_initialization(keys, values)
        self.update(keys, values)

    def release(self) -> None:
        """Gives the layer's memory back now; the layer starts empty on its next update."""
        for part in (self._keys, self._values):
            if part is not None:
                part.release()
        self._keys = self._values = None
        self._length = 0
        self.keys = self.values = None
        self.is_initialized = False


class GrowableCache(Cache):
    """transformers' ``Cache`` over :class:`GrowableLayer` s: pass it as ``past_key_values``."""

    def __init__(self, max_tokens: int, tag: Optional[str] = None):
        if int(max_tokens) <= 0:
            raise InvalidArgumentError(f"max_tokens must be positive, not {max_tokens!r}")
        super().__init__(layer_class_to_replicate=functools.partial(GrowableLayer, int(max_tokens), tag))
        self.max_tokens = int(max_tokens)
        self.tag = tag

    def release(self) -> None:
        """Gives every layer's memory back now (otherwise, when the cache is dropped)."""
        for layer in self.layers:
            layer.release()
