// SPDX-License-Identifier: MIT
#pragma once
// One line per stack frame, as both reports print them.

#include <rlmem/snapshot.hpp>

#include <string>

namespace rlmem::detail {

/// "forward (transformers/models/qwen2/modeling_qwen2.py:47)" or a C++ signature.
std::string frame_text(const snapshot& snap, frame_id id);

}  // namespace rlmem::detail
