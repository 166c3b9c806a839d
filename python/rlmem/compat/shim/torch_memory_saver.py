"""``import torch_memory_saver`` answered by rlmem: this folder first on PYTHONPATH makes the
name resolve to :mod:`rlmem.compat.torch_memory_saver` (see ``rlmem.compat.shim_path()``)."""

import sys

from rlmem.compat import torch_memory_saver as _rlmem_torch_memory_saver

# The import statement hands out whatever sys.modules holds under the name once this file ran.
sys.modules[__name__] = _rlmem_torch_memory_saver
