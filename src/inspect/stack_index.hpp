// SPDX-License-Identifier: MIT
#pragma once
// The allocation site and the memory category of each stack, resolved once per stack over one
// index of frames: what every part of inspect() names a block by.

#include "analysis.hpp"
#include "frames.hpp"

#include <rlmem/inspect/inspect.hpp>
#include <rlmem/snapshot/snapshot.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlmem::detail {

// Sites and categories of stacks, resolved once per stack over one index of frames.
class stack_index {
 public:
  stack_index(const snapshot& snap, const std::vector<category_rule>& rules)
      : frames_(snap), categories_(frames_, rules), site_of_stack_(snap.stack_offsets.size(), unknown),
        category_of_stack_(snap.stack_offsets.size(), unknown) {}

  // Stack 0 means two things: made before recording began, or made where torch saw no Python
  // frames (the autograd engine's backward threads); they get separate sites.
  std::uint32_t site(stack_id stack, bool before_trace) {
    if (stack == 0) return before_trace ? special_site(before_site_, "<allocated before recording began>")
                                        : special_site(no_stack_site_, "<no Python stack: autograd backward or a C++ thread>");
    std::uint32_t& cached = site_of_stack_[stack];
    if (cached == unknown) {
      allocation_site resolved = resolve_site(frames_, stack);
      auto [found, inserted] = site_by_label_.try_emplace(resolved.label, static_cast<std::uint32_t>(sites_.size()));
      if (inserted) sites_.push_back({std::move(resolved.label), "", 0});
      cached = found->second;
    }
    return cached;
  }
  const allocation_site& site_info(std::uint32_t id) const { return sites_[id]; }
  // The site a label names, among those resolved from stacks (not the two special ones).
  std::optional<std::uint32_t> site_named(const std::string& label) const {
    auto found = site_by_label_.find(label);
    if (found == site_by_label_.end()) return std::nullopt;
    return found->second;
  }
  std::size_t site_count() const { return sites_.size(); }

  // The site `id` as a report shows it: with `stack` as its representative and that stack's
  // nearest user frame.
  allocation_site describe(std::uint32_t id, stack_id stack) {
    allocation_site site = sites_[id];
    site.stack = stack;
    if (stack != 0) site.user_frame = resolve_site(frames_, stack).user_frame;
    return site;
  }

  memory_category category(stack_id stack, bool before_trace) {
    if (stack == 0) return categories_.categorize(stack, before_trace);  // two categories: not cached by stack
    std::uint32_t& cached = category_of_stack_[stack];
    if (cached == unknown) cached = static_cast<std::uint32_t>(categories_.categorize(stack, before_trace));
    return static_cast<memory_category>(cached);
  }

  frame_index& frames() { return frames_; }

 private:
  static constexpr std::uint32_t unknown = UINT32_MAX;
  std::uint32_t special_site(std::uint32_t& id, const char* label) {
    if (id == unknown) {
      id = static_cast<std::uint32_t>(sites_.size());
      sites_.push_back({label, "", 0});
    }
    return id;
  }
  frame_index frames_;
  category_matcher categories_;
  std::vector<std::uint32_t> site_of_stack_;
  std::vector<std::uint32_t> category_of_stack_;
  std::vector<allocation_site> sites_;
  std::unordered_map<std::string, std::uint32_t> site_by_label_;
  std::uint32_t before_site_ = unknown;
  std::uint32_t no_stack_site_ = unknown;
};

}  // namespace rlmem::detail
