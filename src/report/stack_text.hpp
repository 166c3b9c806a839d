// SPDX-License-Identifier: MIT
#pragma once
// One line per stack frame, as both reports print them.

#include <rlmem/snapshot/snapshot.hpp>

#include <string>

namespace rlmem::detail {

/// "forward (transformers/models/qwen2/modeling_qwen2.py:47)" or a C++ signature; the name and
/// the file name each at most max_label_bytes (elided in the middle).
std::string frame_text(const snapshot& snap, frame_id id);

/// Frames a JSON stack lists before one last "... N more frames" entry: a stack as deep as a
/// pickle allows must not make the report grow past the snapshot.
inline constexpr std::size_t max_json_stack_frames = 256;

}  // namespace rlmem::detail
