// SPDX-License-Identifier: MIT
#pragma once
// A GPU's virtual memory through CUDA's driver API (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess, ...), with libcuda.so.1 loaded at run time: no build needs CUDA, and a machine
// without a GPU gets a clear reason instead of a link error.

#include <rlmem/base/error.hpp>
#include <rlmem/device/device.hpp>

#include <memory>

namespace rlmem {

/// Opens GPU `ordinal` on its primary context (the one PyTorch uses), or fails with the reason in
/// one line in `detail`: unavailable (no driver, no such device), not_supported (a driver without
/// the virtual-memory API) or driver_error (the driver refused).
result<std::unique_ptr<device>, device_errc> open_cuda_device(int ordinal);

}  // namespace rlmem
