// SPDX-License-Identifier: MIT
// Allocation sites: the first frame of a stack outside torch internals and generic plumbing,
// and the nearest frame of the user's own code. A stack of C++ frames only (the autograd
// engine's backward threads) is named by its operator and autograd node.

#include "frames.hpp"

#include <rlmem/inspect/inspect.hpp>

#include <string>
#include <string_view>

namespace rlmem {

namespace detail {

namespace {

// "aten::bmm (BmmBackward0)" from the operator entry closest to the allocation that is not an
// empty*() factory and the autograd node that ran it; falls back to the first frame that is
// not a helper, then to the innermost frame.
std::string native_site_label(frame_index& frames, std::span<const frame_id> stack) {
  std::string_view op;
  std::string_view factory_op;
  std::string_view node;
  const frame_id* first_caller = nullptr;
  for (const frame_id& id : stack) {
    const frame_index::native_role& role = frames.native(id);
    if (!role.op.empty() && !role.factory && op.empty()) op = role.op;
    if (!role.op.empty() && role.factory && factory_op.empty()) factory_op = role.op;
    if (!role.node.empty() && node.empty()) node = role.node;
    if (!role.helper && first_caller == nullptr) first_caller = &id;
  }
  if (op.empty() && node.empty() && first_caller != nullptr) return frames.label(*first_caller);
  if (op.empty()) op = factory_op;
  if (op.empty() && node.empty()) return frames.label(stack.front());
  std::string label;
  if (!op.empty()) label = "aten::" + elide_middle(op);
  if (!node.empty()) label += op.empty() ? elide_middle(node) : " (" + elide_middle(node) + ")";
  return label;
}

}  // namespace

site_frames locate_site_frames(frame_index& frames, std::span<const frame_id> stack) {
  site_frames found;
  std::size_t first_python = site_frames::none;
  for (std::size_t i = 0; i < stack.size(); ++i) {
    frame_id id = stack[i];
    if (!frames.is_python(id)) continue;
    if (first_python == site_frames::none) first_python = i;
    if (found.site == site_frames::none && !frames.is_torch_internal(id) && !frames.is_plumbing(id)) found.site = i;
    if (!frames.is_library(id) && !frames.filename(id).starts_with("<")) {
      found.user = i;
      break;
    }
  }
  if (found.site == site_frames::none) found.site = first_python;
  return found;
}

allocation_site resolve_site(frame_index& frames, stack_id stack) {
  allocation_site site;
  site.stack = stack;
  auto stack_frames = frames.snap().stack(stack);
  if (stack_frames.empty()) {
    site.label = "<no stack recorded>";
    return site;
  }
  site_frames found = locate_site_frames(frames, stack_frames);
  if (found.user != site_frames::none) site.user_frame = frames.label(stack_frames[found.user]);
  site.label = found.site != site_frames::none ? frames.label(stack_frames[found.site]) : native_site_label(frames, stack_frames);
  return site;
}

}  // namespace detail

allocation_site resolve_site(const snapshot& snap, stack_id stack) {
  detail::frame_index frames(snap);
  return detail::resolve_site(frames, stack);
}

std::size_t user_frame_position(const snapshot& snap, stack_id stack) {
  detail::frame_index frames(snap);
  auto stack_frames = snap.stack(stack);
  std::size_t user = detail::locate_site_frames(frames, stack_frames).user;
  return user == detail::site_frames::none ? stack_frames.size() : user;
}

}  // namespace rlmem
