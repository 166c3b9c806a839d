// SPDX-License-Identifier: MIT
#pragma once
// What the analyses need to know of each frame, worked out once per distinct frame: a stack can
// repeat one frame thousands of times and a trace can use one stack millions of times, so no
// analysis may look at frame text per use. Filenames are read with '/' as the separator, so
// Windows paths (C:\...\site-packages\torch\...) give the same sites and categories as POSIX ones.

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rlmem::detail {

class frame_index {
 public:
  explicit frame_index(const snapshot& snap);

  const snapshot& snap() const noexcept { return snap_; }

  /// The filename with every '\' read as '/'.
  std::string_view filename(frame_id id);
  std::string_view name(frame_id id) const { return snap_.str(snap_.frames[id].name); }

  /// "path:line function", the text category rules and the step marker are matched against,
  /// written into `out` (reused by the caller, so no allocation per frame).
  void match_text(frame_id id, std::string& out);

  bool is_python(frame_id id) { return facts(id) & python; }
  bool is_library(frame_id id) { return facts(id) & library; }
  bool is_torch_internal(frame_id id) { return facts(id) & torch_internal; }
  bool is_plumbing(frame_id id) { return facts(id) & plumbing; }
  bool is_optimizer(frame_id id) { return facts(id) & optimizer; }

  /// "transformers/models/qwen2/modeling_qwen2.py:47 forward" or a C++ name, at most
  /// max_label_bytes.
  std::string label(frame_id id);

  /// label() of a frame as if it stood on each of `lines`: "transformers/cache_utils.py:146,147
  /// update", at most max_label_bytes.
  std::string label_of_lines(frame_id id, std::span<const std::int64_t> lines);

  /// What a C++ frame says of the operator that allocated.
  struct native_role {
    bool known = false;
    bool helper = false;       ///< allocator, dispatcher, unwinder or interpreter: not the caller
    std::string_view op;       ///< "bmm" from at::_ops::bmm::call, "" when not an operator entry
    bool factory = false;      ///< op is an empty*() that only makes the output buffer
    std::string_view node;     ///< "BmmBackward0" from torch::autograd::generated::BmmBackward0::apply
  };
  const native_role& native(frame_id id);

 private:
  enum fact : std::uint8_t {
    known = 1, python = 2, library = 4, torch_internal = 8, plumbing = 16, optimizer = 32
  };
  std::uint8_t facts(frame_id id);

  const snapshot& snap_;
  // By string id: 0 not looked at yet, 1 has no '\', else 2 + index into normalised_.
  std::vector<std::uint32_t> filename_state_;
  std::vector<std::string> normalised_;
  std::vector<std::uint8_t> facts_;  // by frame id
  std::vector<native_role> native_;  // by frame id, filled on first use
};

/// Positions in a stack (innermost first) of the frame a site is named after and of the nearest
/// frame of the user's own code; `none` where there is no such frame (a stack of C++ frames only
/// is named by its operator, not by a frame).
struct site_frames {
  static constexpr std::size_t none = SIZE_MAX;
  std::size_t site = none;
  std::size_t user = none;
};
site_frames locate_site_frames(frame_index& frames, std::span<const frame_id> stack);

/// resolve_site() over a shared frame_index.
allocation_site resolve_site(frame_index& frames, stack_id stack);

}  // namespace rlmem::detail
