// SPDX-License-Identifier: MIT
// Growable buffers: one reserved address range that grows in place, page by page.
#include <rlmem/runtime/runtime.hpp>

#include "runtime_helpers.hpp"

#include <algorithm>

namespace rlmem {

result<std::uint64_t, runtime_errc> runtime::reserve_growable(std::uint64_t max_bytes) {
  std::lock_guard hold(lock_);
  if (max_bytes == 0) return fail(runtime_errc::invalid_argument, "a growable buffer of 0 bytes");
  std::uint32_t tag_id = regions_.empty() ? 0 : regions_.back();
  if (tags_[tag_id].stats.paused) return fail(runtime_errc::paused, "tag '" + tags_[tag_id].stats.name + "' is paused");
  std::uint64_t key = next_arena_key_;
  std::uint64_t address = 0;
  if (!policy_.reserve_growable(key, max_bytes, address)) {
    if (!policy_.fault().empty()) return device_fault("reserving a growable buffer");
    return fail(runtime_errc::out_of_memory, "no address space for a growable buffer of " + mib(max_bytes));
  }
  ++next_arena_key_;
  growables_.emplace(address, growable{key, tag_id, max_bytes});
  tags_[tag_id].arena_keys.push_back(key);
  return address;
}

result<void, runtime_errc> runtime::grow(std::uint64_t address, std::uint64_t bytes) {
  std::lock_guard hold(lock_);
  auto found = growables_.find(address);
  if (found == growables_.end()) return fail(runtime_errc::unknown_pointer, "not a growable buffer's address");
  tag_state& tag = tags_[found->second.tag];
  if (tag.stats.paused) return fail(runtime_errc::paused, "tag '" + tag.stats.name + "' is paused: resume it before growing its buffers");
  if (bytes > found->second.max_bytes) {
    return fail(runtime_errc::invalid_argument, "growing a buffer to " + std::to_string(bytes) + " bytes: more than its max_bytes, " +
                                                    std::to_string(found->second.max_bytes));
  }
  std::uint64_t before = policy_.grown_bytes(found->second.key);
  if (!policy_.grow(found->second.key, bytes)) {
    for (tag_state& each : tags_) refresh_mapped(each);
    if (!policy_.fault().empty()) return device_fault("growing a buffer");
    ++tag.stats.failed_allocations;
    ++totals_.ooms;
    return fail(runtime_errc::out_of_memory, "a growable buffer cannot grow to " + std::to_string(bytes) + " bytes: " +
                                                 mib(static_cast<std::uint64_t>(policy_.reserved_bytes())) +
                                                 " mapped by rlmem");
  }
  std::uint64_t added = policy_.grown_bytes(found->second.key) - before;
  tag.stats.allocated_bytes.add(added);
  totals_.allocated_bytes.add(added);
  for (tag_state& each : tags_) refresh_mapped(each);
  return {};
}

std::uint64_t runtime::grown_bytes(std::uint64_t address) const {
  std::lock_guard hold(lock_);
  auto found = growables_.find(address);
  return found == growables_.end() ? 0 : policy_.grown_bytes(found->second.key);
}

result<void, runtime_errc> runtime::release_growable(std::uint64_t address) {
  std::lock_guard hold(lock_);
  auto found = growables_.find(address);
  if (found == growables_.end()) return fail(runtime_errc::unknown_pointer, "not a growable buffer's address, or released twice");
  std::uint64_t key = found->second.key;
  std::uint32_t tag_id = found->second.tag;
  address_run range;
  if (policy_.arena_range(key, range)) {
    if (auto unpoisoned = unpoison(tags_[tag_id], range); !unpoisoned.ok()) return unpoisoned;
  }
  std::uint64_t grown = policy_.grown_bytes(key);
  policy_.release_growable(key);
  tag_state& tag = tags_[tag_id];
  std::erase(tag.arena_keys, key);
  tag.stats.allocated_bytes.remove(grown);
  totals_.allocated_bytes.remove(grown);
  growables_.erase(found);
  for (tag_state& each : tags_) refresh_mapped(each);
  return {};
}

}  // namespace rlmem
