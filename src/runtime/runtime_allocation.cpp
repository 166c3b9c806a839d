// SPDX-License-Identifier: MIT
// The runtime's allocations: allocate in the current region's tag (or the library's), free,
// the memory a CUDA graph's pool keeps, and the chunks a tag's live blocks use.
#include <rlmem/runtime/runtime.hpp>

#include "runtime_helpers.hpp"

#include <algorithm>
#include <iterator>

namespace rlmem {

result<std::uint64_t, runtime_errc> runtime::allocate(std::uint64_t bytes, std::uint64_t stream) {
  std::lock_guard hold(lock_);
  return allocate_in(regions_.empty() ? 0 : regions_.back(), bytes, stream);
}

result<std::uint64_t, runtime_errc> runtime::allocate_for_library(std::uint64_t bytes, std::uint64_t stream) {
  std::lock_guard hold(lock_);
  return allocate_in(tag_ids_.at(std::string(library_tag)), bytes, stream);
}

result<std::uint64_t, runtime_errc> runtime::allocate_unproven(std::uint64_t bytes, std::uint64_t stream, std::string_view why) {
  std::lock_guard hold(lock_);
  return allocate_in(regions_.empty() ? 0 : regions_.back(), bytes, stream, why);
}

result<std::uint64_t, runtime_errc> runtime::allocate_in(std::uint32_t tag_id, std::uint64_t bytes, std::uint64_t stream,
                                                         std::string_view unproven) {
  if (bytes == 0) return fail(runtime_errc::invalid_argument, "an allocation of 0 bytes");
  if (tags_[tag_id].stats.paused) {
    ++tags_[tag_id].stats.failed_allocations;
    return fail(runtime_errc::paused, "tag '" + tags_[tag_id].stats.name + "' is paused: resume it before allocating in it");
  }
  model_block* block = nullptr;
  try {
    std::uint64_t key = arena_key(tag_id, stream);
    block = policy_.allocate(bytes, key);
    if (block != nullptr) {
      live_.emplace(block->ptr, live_block{block, tag_id, stream, bytes, gpu_.stream_capturing(stream), false, std::string(unproven)});
      if (!unproven.empty()) ++tags_[tag_id].unproven_blocks;
    }
  } catch (const std::bad_alloc&) {
    if (block != nullptr) policy_.free_completed(block);
    return fail(runtime_errc::out_of_memory, "out of host memory for the runtime's bookkeeping");
  }
  tag_state& tag = tags_[tag_id];
  if (policy_.alloc_retries() != totals_.alloc_retries || block == nullptr) {
    // Cached pages of every tag may have gone back to make room.
    totals_.alloc_retries = policy_.alloc_retries();
    for (tag_state& each : tags_) refresh_mapped(each);
  } else {
    refresh_mapped(tag);
  }
  if (block == nullptr) {
    if (!policy_.fault().empty()) return device_fault("allocation");
    ++totals_.ooms;
    ++tag.stats.failed_allocations;
    std::uint64_t free_bytes = 0;
    std::uint64_t total_bytes = 0;
    gpu_.memory_info(free_bytes, total_bytes);
    remember({history_event::kind::oom, 0, bytes, stream, now_us(), free_bytes});
    return fail(runtime_errc::out_of_memory, "out of memory: " + std::to_string(bytes) + " bytes requested in tag '" + tag.stats.name +
                                                 "'; " + mib(static_cast<std::uint64_t>(policy_.reserved_bytes())) + " mapped by rlmem, " +
                                                 mib(free_bytes) + " free of " + mib(total_bytes) + " on the device");
  }
  remember({history_event::kind::alloc, block->ptr, block->size, stream, now_us(), 0});
  tag.stats.allocated_bytes.add(block->size);
  tag.stats.allocations.add(1);
  totals_.allocated_bytes.add(block->size);
  totals_.allocations.add(1);
  return block->ptr;
}

result<void, runtime_errc> runtime::free(std::uint64_t address) {
  std::lock_guard hold(lock_);
  auto found = live_.find(address);
  if (found == live_.end() || found->second.held_for_graph) {
    return fail(runtime_errc::unknown_pointer, "free of an address rlmem did not hand out, or freed twice");
  }
  if (found->second.captured) {
    // A CUDA graph's replays still read and write it: kept until release_graph_memory().
    found->second.held_for_graph = true;
    tags_[found->second.tag].stats.graph_held_bytes += found->second.block->size;
    return {};
  }
  free_block(found);
  if (!policy_.fault().empty()) return device_fault("free");
  return {};
}

result<void, runtime_errc> runtime::release_graph_memory(std::string_view tag) {
  std::lock_guard hold(lock_);
  if (!tag.empty() && find_tag(tag) == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(tag) + "'");
  for (auto at = live_.begin(); at != live_.end();) {
    auto next = std::next(at);
    if (at->second.held_for_graph && (tag.empty() || tags_[at->second.tag].stats.name == tag)) {
      tags_[at->second.tag].stats.graph_held_bytes -= at->second.block->size;
      free_block(at);
    }
    at = next;
  }
  if (!policy_.fault().empty()) return device_fault("release_graph_memory");
  return {};
}

void runtime::free_block(std::unordered_map<std::uint64_t, live_block>::iterator found) {
  model_block* block = found->second.block;
  std::uint32_t tag_id = found->second.tag;
  std::uint64_t stream = found->second.stream;
  std::uint64_t address = found->first;
  std::uint64_t size = block->size;
  std::int64_t now = now_us();
  remember({history_event::kind::free_requested, address, size, stream, now, 0});
  remember({history_event::kind::free_completed, address, size, stream, now, 0});
  tag_state& tag = tags_[tag_id];
  if (!found->second.unproven.empty()) --tag.unproven_blocks;
  live_.erase(found);
  policy_.free_completed(block);
  tag.stats.allocated_bytes.remove(size);
  tag.stats.allocations.remove(1);
  totals_.allocated_bytes.remove(size);
  totals_.allocations.remove(1);
  refresh_mapped(tag);
}

std::vector<address_run> runtime::chunks_in_use(const tag_state& tag) const {
  std::vector<address_run> chunks;
  for (std::uint64_t key : tag.arena_keys) {
    address_run range;
    if (!policy_.arena_range(key, range)) continue;
    for (address_run run : policy_.used_runs(range)) {
      for (std::uint64_t at = run.address; at < run.address + run.bytes; at += options_.copy_chunk_bytes) {
        chunks.push_back({at, std::min(options_.copy_chunk_bytes, run.address + run.bytes - at)});
      }
    }
  }
  return chunks;
}

}  // namespace rlmem
