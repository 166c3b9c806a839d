// SPDX-License-Identifier: MIT
// The runtime: the rlmem policy behind a lock, with tags, pause and resume, and counters. This
// file holds its construction, tags and regions, the policy's faults as failures, and figures;
// runtime_allocation.cpp, runtime_pause.cpp, runtime_growables.cpp and runtime_history.cpp the
// rest, runtime_errors.cpp the table of its codes.

#include <rlmem/runtime/runtime.hpp>

#include "runtime_helpers.hpp"

#include <algorithm>

namespace rlmem {

namespace {

rlmem_policy_options for_a_long_run(rlmem_policy_options options) {
  options.keep_segment_events = false;
  return options;
}

}  // namespace

void counter::add(std::uint64_t amount) noexcept {
  current += amount;
  total += amount;
  peak = std::max(peak, current);
}

void counter::set(std::uint64_t value) noexcept {
  if (value >= current) {
    add(value - current);
  } else {
    remove(current - value);
  }
}

runtime::runtime(device& gpu, runtime_options options)
    : gpu_(gpu), options_(options), policy_(gpu_, for_a_long_run(options.policy)) {
  std::uint64_t page = policy_.page_bytes();
  options_.copy_chunk_bytes = std::max(page, options_.copy_chunk_bytes / page * page);
  tag_named(default_tag);
  tag_named(library_tag);
  if (options_.history_entries > 0) {
    history_.reserve(options_.history_entries);
    policy_.observe_pages([this](bool mapped, std::uint64_t address, std::uint64_t size, std::uint64_t key) {
      auto stream = stream_of_arena_.find(key);
      remember({mapped ? history_event::kind::segment_map : history_event::kind::segment_unmap, address, size,
                stream == stream_of_arena_.end() ? 0 : stream->second, now_us(), 0});
    });
  }
}

runtime::~runtime() {
  for (tag_state& tag : tags_) {
    (void)unpoison(tag);  // a destructor has no one to tell: the pages go back with the policy
    if (tag.poison != 0) gpu_.release(tag.poison);
  }
  for (tag_state& tag : tags_) {
    for (void* slab : tag.slabs) gpu_.host_free(slab);
  }
  for (void* slab : spare_slabs_) gpu_.host_free(slab);
}

runtime::tag_state& runtime::tag_named(std::string_view name) {
  auto found = tag_ids_.find(std::string(name));
  if (found != tag_ids_.end()) return tags_[found->second];
  tag_ids_.emplace(std::string(name), static_cast<std::uint32_t>(tags_.size()));
  tag_state& made = tags_.emplace_back();
  made.stats.name = std::string(name);
  return made;
}

runtime::tag_state* runtime::find_tag(std::string_view name) {
  auto found = tag_ids_.find(std::string(name));
  return found == tag_ids_.end() ? nullptr : &tags_[found->second];
}

result<void, runtime_errc> runtime::enter_region(std::string_view tag) {
  std::lock_guard hold(lock_);
  if (tag == library_tag) {
    return fail(runtime_errc::invalid_argument, "tag '" + std::string(library_tag) + "' is the runtime's own, for memory torch's libraries keep: name another");
  }
  tag_named(tag);
  regions_.push_back(tag_ids_.at(std::string(tag)));
  return {};
}

result<void, runtime_errc> runtime::leave_region() {
  std::lock_guard hold(lock_);
  if (regions_.empty()) return fail(runtime_errc::invalid_argument, "no region is open");
  regions_.pop_back();
  return {};
}

std::string runtime::current_tag() const {
  std::lock_guard hold(lock_);
  return tags_[regions_.empty() ? 0 : regions_.back()].stats.name;
}

std::uint64_t runtime::arena_key(std::uint32_t tag, std::uint64_t stream) {
  auto [at, made] = arena_keys_.try_emplace({tag, stream}, next_arena_key_);
  if (made) {
    ++next_arena_key_;
    tags_[tag].arena_keys.push_back(at->second);
    stream_of_arena_.emplace(at->second, stream);
  }
  return at->second;
}

// The pages of every tag, as the policy holds them now: an allocation in one tag may have sent
// another's cached pages back to the device.
void runtime::refresh_mapped(tag_state& tag) {
  std::uint64_t mapped = 0;
  for (std::uint64_t key : tag.arena_keys) mapped += policy_.arena_mapped_bytes(key);
  tag.stats.mapped_bytes.set(mapped);
  totals_.reserved_bytes.set(static_cast<std::uint64_t>(policy_.reserved_bytes()));
}

runtime_failure runtime::device_fault(std::string_view what) {
  std::string message = std::string(what) + ": " + policy_.fault();
  policy_.clear_fault();
  return fail(runtime_errc::device_error, std::move(message));
}

result<void, runtime_errc> runtime::empty_cache() {
  std::lock_guard hold(lock_);
  policy_.empty_cache();
  for (tag_state& each : tags_) refresh_mapped(each);
  if (!policy_.fault().empty()) return device_fault("empty_cache");
  return {};
}

result<void, runtime_errc> runtime::read(std::uint64_t address, void* destination, std::uint64_t size) {
  std::lock_guard hold(lock_);
  device_errc code = gpu_.copy_to_host(destination, address, size);
  if (code == device_errc::ok) return {};
  return fail(runtime_errc::invalid_argument, "read of unmapped or invalid memory: " + std::string(error_name(code)));
}

result<void, runtime_errc> runtime::write(std::uint64_t address, const void* source, std::uint64_t size) {
  std::lock_guard hold(lock_);
  device_errc code = gpu_.copy_from_host(address, source, size);
  if (code == device_errc::ok) return {};
  return fail(runtime_errc::invalid_argument, "write to unmapped or invalid memory: " + std::string(error_name(code)));
}

void runtime::reset_peaks() {
  std::lock_guard hold(lock_);
  for (counter* each : {&totals_.allocated_bytes, &totals_.allocations, &totals_.reserved_bytes}) each->peak = each->current;
  for (tag_state& tag : tags_) {
    for (counter* each : {&tag.stats.allocated_bytes, &tag.stats.allocations, &tag.stats.mapped_bytes}) each->peak = each->current;
  }
}

std::vector<tag_statistics> runtime::statistics() const {
  std::lock_guard hold(lock_);
  std::vector<tag_statistics> all;
  all.reserve(tags_.size());
  for (const tag_state& each : tags_) {
    tag_statistics& stats = all.emplace_back(each.stats);
    if (!each.stats.paused) continue;
    for (const address_run& chunk : chunks_in_use(each)) stats.paused_bytes += chunk.bytes;
  }
  return all;
}

runtime_totals runtime::totals() const {
  std::lock_guard hold(lock_);
  runtime_totals now = totals_;
  now.device_calls = gpu_.totals();
  return now;
}

}  // namespace rlmem
