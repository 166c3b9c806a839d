// SPDX-License-Identifier: MIT
#pragma once
// A GPU's virtual memory through CUDA's driver API (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess, ...), with libcuda.so.1 loaded at run time: no build needs CUDA, and a machine
// without a GPU gets a clear reason instead of a link error.

#include <rlmem/device/device.hpp>

#include <memory>
#include <string>

namespace rlmem {

/// Opens GPU `ordinal` on its primary context (the one PyTorch uses). nullptr when there is no
/// driver, no such device, or the driver refuses, with `why` saying which in one line.
std::unique_ptr<device> open_cuda_device(int ordinal, std::string& why);

}  // namespace rlmem
