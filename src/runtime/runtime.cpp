// SPDX-License-Identifier: MIT
// The runtime: the rlmem policy behind a lock, with tags, pause and resume, and counters.

#include <rlmem/runtime/runtime.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <new>

#include <unistd.h>  // sysconf: the host's physical memory

namespace rlmem {

namespace {

constexpr std::array<std::string_view, static_cast<std::size_t>(runtime_errc::count_)> error_names{
    "ok", "out_of_memory", "paused", "not_paused", "already_paused", "unknown_pointer", "unknown_tag", "invalid_argument",
    "device_error"};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The reason of this thread's last failure: read by the caller right after the call that
// failed, so that another thread's failure in between cannot replace it.
thread_local std::string calling_thread_error;

rlmem_policy_options for_a_long_run(rlmem_policy_options options) {
  options.keep_segment_events = false;
  return options;
}

}  // namespace

std::string_view runtime_error_name(runtime_errc code) noexcept {
  auto index = static_cast<std::size_t>(code);
  return index < error_names.size() ? error_names[index] : "unknown";
}

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
    unpoison(tag);
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

runtime_errc runtime::enter_region(std::string_view tag) {
  std::lock_guard hold(lock_);
  if (tag == library_tag) {
    return fail(runtime_errc::invalid_argument, "tag '" + std::string(library_tag) + "' is the runtime's own, for memory torch's libraries keep: name another");
  }
  tag_named(tag);
  regions_.push_back(tag_ids_.at(std::string(tag)));
  return runtime_errc::ok;
}

runtime_errc runtime::leave_region() {
  std::lock_guard hold(lock_);
  if (regions_.empty()) return fail(runtime_errc::invalid_argument, "no region is open");
  regions_.pop_back();
  return runtime_errc::ok;
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

runtime_errc runtime::fail(runtime_errc code, std::string message) {
  calling_thread_error = std::move(message);
  return code;
}

runtime_errc runtime::device_fault(std::string_view what) {
  std::string message = std::string(what) + ": " + policy_.fault();
  policy_.clear_fault();
  return fail(runtime_errc::device_error, std::move(message));
}

runtime_errc runtime::allocate(std::uint64_t bytes, std::uint64_t stream, std::uint64_t& address) {
  std::lock_guard hold(lock_);
  return allocate_in(regions_.empty() ? 0 : regions_.back(), bytes, stream, address);
}

runtime_errc runtime::allocate_for_library(std::uint64_t bytes, std::uint64_t stream, std::uint64_t& address) {
  std::lock_guard hold(lock_);
  return allocate_in(tag_ids_.at(std::string(library_tag)), bytes, stream, address);
}

runtime_errc runtime::allocate_in(std::uint32_t tag_id, std::uint64_t bytes, std::uint64_t stream, std::uint64_t& address) {
  if (bytes == 0) return fail(runtime_errc::invalid_argument, "an allocation of 0 bytes");
  if (tags_[tag_id].stats.paused) {
    ++tags_[tag_id].stats.failed_allocations;
    return fail(runtime_errc::paused, "tag '" + tags_[tag_id].stats.name + "' is paused: resume it before allocating in it");
  }
  model_block* block = nullptr;
  try {
    std::uint64_t key = arena_key(tag_id, stream);
    block = policy_.allocate(bytes, key);
    if (block != nullptr) live_.emplace(block->ptr, live_block{block, tag_id, stream, bytes, gpu_.stream_capturing(stream), false});
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
  address = block->ptr;
  remember({history_event::kind::alloc, block->ptr, block->size, stream, now_us(), 0});
  tag.stats.allocated_bytes.add(block->size);
  tag.stats.allocations.add(1);
  totals_.allocated_bytes.add(block->size);
  totals_.allocations.add(1);
  return runtime_errc::ok;
}

runtime_errc runtime::free(std::uint64_t address) {
  std::lock_guard hold(lock_);
  auto found = live_.find(address);
  if (found == live_.end() || found->second.held_for_graph) {
    return fail(runtime_errc::unknown_pointer, "free of an address rlmem did not hand out, or freed twice");
  }
  if (found->second.captured) {
    // A CUDA graph's replays still read and write it: kept until release_graph_memory().
    found->second.held_for_graph = true;
    tags_[found->second.tag].stats.graph_held_bytes += found->second.block->size;
    return runtime_errc::ok;
  }
  free_block(found);
  if (!policy_.fault().empty()) return device_fault("free");
  return runtime_errc::ok;
}

runtime_errc runtime::release_graph_memory(std::string_view tag) {
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
  return runtime_errc::ok;
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
  live_.erase(found);
  policy_.free_completed(block);
  tag_state& tag = tags_[tag_id];
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

device_errc runtime::pin_slab(void*& slab) {
  device_errc code = gpu_.host_allocate(options_.copy_chunk_bytes, slab);
  if (code == device_errc::ok) totals_.host_buffer_bytes += options_.copy_chunk_bytes;
  return code;
}

device_errc runtime::take_slab(void*& slab) {
  if (!spare_slabs_.empty()) {
    slab = spare_slabs_.back();
    spare_slabs_.pop_back();
    return device_errc::ok;
  }
  return pin_slab(slab);
}

void runtime::give_slab(void* slab) {
  if (options_.keep_host_buffers) {
    spare_slabs_.push_back(slab);
    return;
  }
  unpin_slab(slab);
}

void runtime::unpin_slab(void* slab) {
  gpu_.host_free(slab);
  totals_.host_buffer_bytes -= options_.copy_chunk_bytes;
}

void runtime::free_backup(tag_state& tag) {
  for (void* slab : tag.slabs) give_slab(slab);
  tag.slabs.clear();
  tag.backup.clear();
  tag.stats.host_backup_bytes = 0;
}

void runtime::release_host_buffers() {
  std::lock_guard hold(lock_);
  for (void* slab : spare_slabs_) unpin_slab(slab);
  spare_slabs_.clear();
}

std::uint64_t runtime::host_buffers_limit(std::string& why) const {
  std::uint64_t device_bytes = options_.policy.capacity_bytes != 0 ? options_.policy.capacity_bytes : gpu_.config().total_bytes;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGESIZE);
  // A host that does not say (sysconf fails) is bounded by the device alone.
  std::uint64_t host_half = pages > 0 && page_bytes > 0 ? static_cast<std::uint64_t>(pages) / 2 * static_cast<std::uint64_t>(page_bytes)
                                                        : UINT64_MAX;
  if (host_half < device_bytes) {
    why = "half the host's physical memory";
    return host_half;
  }
  why = options_.policy.capacity_bytes != 0 ? "the runtime's capacity, the most a pause backs up"
                                            : "the device's memory, the most a pause backs up";
  return device_bytes;
}

runtime_errc runtime::reserve_host_buffers(std::uint64_t bytes) {
  std::lock_guard hold(lock_);
  std::string bound;
  if (std::uint64_t limit = host_buffers_limit(bound); bytes > limit) {
    return fail(runtime_errc::invalid_argument, "reserving " + std::to_string(bytes) + " bytes of pinned host memory: more than " +
                                                    std::to_string(limit) + " (" + mib(limit) + ", " + bound + "); nothing pinned");
  }
  std::uint64_t slabs = bytes / options_.copy_chunk_bytes + (bytes % options_.copy_chunk_bytes != 0 ? 1 : 0);
  while (spare_slabs_.size() < slabs) {
    void* slab = nullptr;
    if (pin_slab(slab) != device_errc::ok) {
      return fail(runtime_errc::out_of_memory, "pinning " + mib(bytes) + " of host memory: " + mib(spare_slabs_.size() * options_.copy_chunk_bytes) +
                                                   " pinned before the host refused");
    }
    spare_slabs_.push_back(slab);
  }
  return runtime_errc::ok;
}

runtime_errc runtime::pause(std::string_view name, keep_contents keep) {
  std::unique_lock hold(lock_);
  tag_state* tag = find_tag(name);
  if (tag == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(name) + "': nothing was allocated in it");
  if (name == library_tag) {
    return fail(runtime_errc::invalid_argument, "tag '" + std::string(library_tag) +
                                                    "' holds what torch's libraries keep for themselves (cuBLAS workspaces, used by "
                                                    "every later GEMM): it is never paused");
  }
  if (tag->stats.paused) return fail(runtime_errc::already_paused, "tag '" + std::string(name) + "' is already paused");
  auto start = std::chrono::steady_clock::now();
  // Every stream may still be using the tag's memory: fence before copying or unmapping.
  if (device_errc code = gpu_.synchronize(); code != device_errc::ok) {
    return fail(runtime_errc::device_error, "synchronize before pause: " + std::string(device_error_name(code)));
  }
  std::uint64_t copied = 0;
  if (keep == keep_contents::host) {
    // Pin (or take kept) slabs for every piece first: the one failure to expect, host memory,
    // then leaves everything as it was.
    device_errc code = device_errc::ok;
    try {
      std::uint64_t slab_used = options_.copy_chunk_bytes;
      for (address_run chunk : chunks_in_use(*tag)) {
        while (chunk.bytes > 0 && code == device_errc::ok) {
          if (slab_used == options_.copy_chunk_bytes) {
            void* slab = nullptr;
            code = take_slab(slab);
            if (code != device_errc::ok) break;
            tag->slabs.push_back(slab);
            slab_used = 0;
          }
          address_run piece{chunk.address, std::min(chunk.bytes, options_.copy_chunk_bytes - slab_used)};
          tag->backup.push_back({piece, static_cast<std::byte*>(tag->slabs.back()) + slab_used});
          slab_used += piece.bytes;
          chunk.address += piece.bytes;
          chunk.bytes -= piece.bytes;
        }
        if (code != device_errc::ok) break;
      }
    } catch (const std::bad_alloc&) {
      code = device_errc::out_of_memory;
    }
    if (code != device_errc::ok) {
      free_backup(*tag);
      return fail(code == device_errc::out_of_memory ? runtime_errc::out_of_memory : runtime_errc::device_error,
                  "backing up tag '" + std::string(name) + "' to host memory: " + std::string(device_error_name(code)) + "; nothing paused");
    }
    // Every piece's copy is enqueued at once, then each piece's pages are released once its
    // copy is done, while the next ones copy. The lock is let go while a copy is waited for, so
    // that other threads allocate meanwhile (a 10 GiB backup takes 0.2 s): the tag is marked
    // paused (no allocation in it) and pausing (no resume of it), and any other thread that
    // would unmap a page (a release of cached pages, of a growable buffer) fences the device
    // first, which waits for these copies.
    tag->stats.paused = true;
    std::size_t tag_index = static_cast<std::size_t>(tag - tags_.data());  // tags_ may grow meanwhile
    auto paused_part_way = [&](const std::string& why) {
      tags_[tag_index].pausing = false;
      return fail(runtime_errc::device_error, "pause of tag '" + std::string(name) + "': " + why +
                                                  "; pages backed up so far are paused, the rest still mapped");
    };
    std::vector<std::pair<address_run, std::uint64_t>> pending;  // each piece and its copy's mark
    for (const backup_chunk& piece : tag->backup) {
      device_errc enqueued = gpu_.copy_to_host_async(piece.host, piece.range.address, piece.range.bytes);
      std::uint64_t mark = 0;
      if (enqueued == device_errc::ok) enqueued = gpu_.mark_copies(mark);
      if (enqueued != device_errc::ok) {
        for (const auto& [range, each] : pending) gpu_.wait_mark(each);
        gpu_.wait_copies();
        for (const auto& [range, each] : pending) policy_.release_range(range, true);
        return paused_part_way("backup copy: " + std::string(device_error_name(enqueued)));
      }
      pending.emplace_back(piece.range, mark);
      copied += piece.range.bytes;
    }
    tag->pausing = true;
    for (std::size_t index = 0; index < pending.size(); ++index) {
      device_errc waited = device_errc::ok;
      if (gpu_.concurrent_wait()) {
        hold.unlock();
        waited = gpu_.wait_mark(pending[index].second);
        hold.lock();
      } else {
        waited = gpu_.wait_mark(pending[index].second);
      }
      std::string why;
      if (waited != device_errc::ok) {
        why = "backup copy: " + std::string(device_error_name(waited));
      } else if (!policy_.release_range(pending[index].first, true)) {
        why = "releasing backed-up pages: " + policy_.fault();
        policy_.clear_fault();
      }
      if (!why.empty()) {
        for (std::size_t rest = index + 1; rest < pending.size(); ++rest) gpu_.wait_mark(pending[rest].second);
        return paused_part_way(why);
      }
    }
    tag = &tags_[tag_index];
    tag->pausing = false;
    tag->stats.host_backup_bytes = copied;
  }
  // What is left: the tag's cached pages, and every page of a discard.
  for (std::uint64_t key : tag->arena_keys) {
    address_run range;
    if (policy_.arena_range(key, range) && !policy_.release_range(range, true)) {
      // Pages released so far stay released; the tag counts as paused so resume maps them again.
      tag->stats.paused = true;
      return device_fault("pause");
    }
  }
  tag->stats.paused = true;
  ++tag->stats.pauses;
  refresh_mapped(*tag);
  tag->stats.last_pause_copied_bytes = copied;
  if (options_.check_contents) {
    if (runtime_errc code = poison(*tag); code != runtime_errc::ok) return code;
  }
  tag->stats.last_pause_seconds = seconds_since(start);
  return runtime_errc::ok;
}

runtime_errc runtime::poison(tag_state& tag) {
  std::uint64_t page = policy_.page_bytes();
  bool fresh = tag.poison == 0;
  if (fresh) {
    if (device_errc code = gpu_.create(page, tag.poison); code != device_errc::ok) {
      tag.poison = 0;
      return fail(runtime_errc::device_error, "checking mode: a page to back paused memory: " + std::string(device_error_name(code)));
    }
  }
  for (std::uint64_t key : tag.arena_keys) {
    address_run range;
    if (!policy_.arena_range(key, range)) continue;
    for (address_run run : policy_.used_runs(range)) {
      for (std::uint64_t at = run.address; at < run.address + run.bytes; at += page) {
        if (device_errc code = gpu_.map(at, page, tag.poison); code != device_errc::ok) {
          return fail(runtime_errc::device_error, "checking mode: mapping the check page: " + std::string(device_error_name(code)));
        }
        tag.poisoned.push_back(at);
      }
      if (device_errc code = gpu_.set_access(run.address, run.bytes); code != device_errc::ok) {
        return fail(runtime_errc::device_error, "checking mode: access to the check page: " + std::string(device_error_name(code)));
      }
    }
  }
  if (fresh && !tag.poisoned.empty()) {
    device_errc code = gpu_.fill_async(tag.poisoned.front(), page, options_.check_fill);
    if (code == device_errc::ok) code = gpu_.wait_copies();
    if (code != device_errc::ok) return fail(runtime_errc::device_error, "checking mode: filling the check page: " + std::string(device_error_name(code)));
  }
  return runtime_errc::ok;
}

runtime_errc runtime::unpoison(tag_state& tag, address_run within) {
  if (tag.poisoned.empty()) return runtime_errc::ok;
  std::uint64_t page = policy_.page_bytes();
  if (device_errc code = gpu_.synchronize(); code != device_errc::ok) {
    return fail(runtime_errc::device_error, "synchronize before unmapping the check page: " + std::string(device_error_name(code)));
  }
  // A write into paused memory landed in the check page: count it, and fill the page again
  // while a mapping of it is left to fill through.
  std::vector<std::uint8_t> seen(page);
  if (gpu_.copy_to_host(seen.data(), tag.poisoned.front(), page) == device_errc::ok &&
      std::any_of(seen.begin(), seen.end(), [&](std::uint8_t byte) { return byte != options_.check_fill; })) {
    ++tag.stats.writes_while_paused;
    if (gpu_.fill_async(tag.poisoned.front(), page, options_.check_fill) == device_errc::ok) gpu_.wait_copies();
  }
  std::uint64_t within_end = within.address + within.bytes < within.address ? ~std::uint64_t{0} : within.address + within.bytes;
  for (auto at = tag.poisoned.begin(); at != tag.poisoned.end();) {
    if (*at < within.address || *at >= within_end) {
      ++at;
      continue;
    }
    if (device_errc code = gpu_.unmap(*at, page); code != device_errc::ok) {
      return fail(runtime_errc::device_error, "checking mode: unmapping the check page: " + std::string(device_error_name(code)));
    }
    at = tag.poisoned.erase(at);
  }
  return runtime_errc::ok;
}

runtime_errc runtime::resume(std::string_view name) {
  std::lock_guard hold(lock_);
  tag_state* tag = find_tag(name);
  if (tag == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(name) + "': nothing was allocated in it");
  if (!tag->stats.paused) return fail(runtime_errc::not_paused, "tag '" + std::string(name) + "' is not paused");
  if (tag->pausing) return fail(runtime_errc::not_paused, "tag '" + std::string(name) + "' is being paused by another thread");
  auto start = std::chrono::steady_clock::now();
  if (runtime_errc code = unpoison(*tag); code != runtime_errc::ok) return code;
  std::vector<address_run> restored_ranges;  // to release again if the resume cannot finish
  std::uint64_t copied = 0;
  device_errc code = device_errc::ok;
  bool short_of_memory = false;
  try {
    std::vector<address_run> restored;
    // The backed-up chunks first, each copied while the next one is mapped; then whatever has
    // no backup (a discard), filled.
    for (const backup_chunk& chunk : tag->backup) {
      if (!policy_.restore_range(chunk.range, restored)) {
        short_of_memory = policy_.fault().empty();
        break;
      }
      restored_ranges.push_back(chunk.range);
      for (address_run run : restored) {
        code = gpu_.copy_from_host_async(run.address, static_cast<const std::byte*>(chunk.host) + (run.address - chunk.range.address), run.bytes);
        if (code != device_errc::ok) break;
        copied += run.bytes;
      }
      if (code != device_errc::ok) break;
    }
    for (std::size_t index = 0; index < tag->arena_keys.size() && code == device_errc::ok && !short_of_memory; ++index) {
      address_run range;
      if (!policy_.arena_range(tag->arena_keys[index], range)) continue;
      if (!policy_.restore_range(range, restored)) {
        short_of_memory = policy_.fault().empty();
        break;
      }
      restored_ranges.push_back(range);
      for (address_run run : restored) {
        code = gpu_.fill_async(run.address, run.bytes, options_.check_contents ? options_.check_fill : options_.discard_fill);
        if (code != device_errc::ok) break;
      }
    }
  } catch (const std::bad_alloc&) {
    short_of_memory = true;
  }
  device_errc waited = gpu_.wait_copies();
  if (code == device_errc::ok) code = waited;
  bool failed = short_of_memory || code != device_errc::ok || !policy_.fault().empty();
  if (failed) {
    // Back to paused as it was: the backup is still whole.
    std::string fault = policy_.fault();
    policy_.clear_fault();
    for (address_run range : restored_ranges) policy_.release_range(range);
    refresh_mapped(*tag);
    if (options_.check_contents) poison(*tag);
    if (short_of_memory) {
      return fail(runtime_errc::out_of_memory, "resume of tag '" + std::string(name) + "': not enough free device memory (" +
                                                   mib(static_cast<std::uint64_t>(policy_.reserved_bytes())) +
                                                   " mapped by rlmem); the tag stays paused");
    }
    return fail(runtime_errc::device_error, "resume of tag '" + std::string(name) + "': " +
                                                (fault.empty() ? std::string(device_error_name(code)) : fault) + "; the tag stays paused");
  }
  free_backup(*tag);
  tag->stats.paused = false;
  ++tag->stats.resumes;
  refresh_mapped(*tag);
  tag->stats.last_resume_copied_bytes = copied;
  tag->stats.last_resume_seconds = seconds_since(start);
  return runtime_errc::ok;
}

runtime_errc runtime::empty_cache() {
  std::lock_guard hold(lock_);
  policy_.empty_cache();
  for (tag_state& each : tags_) refresh_mapped(each);
  if (!policy_.fault().empty()) return device_fault("empty_cache");
  return runtime_errc::ok;
}

runtime_errc runtime::reserve_growable(std::uint64_t max_bytes, std::uint64_t& address) {
  std::lock_guard hold(lock_);
  if (max_bytes == 0) return fail(runtime_errc::invalid_argument, "a growable buffer of 0 bytes");
  std::uint32_t tag_id = regions_.empty() ? 0 : regions_.back();
  if (tags_[tag_id].stats.paused) return fail(runtime_errc::paused, "tag '" + tags_[tag_id].stats.name + "' is paused");
  std::uint64_t key = next_arena_key_;
  if (!policy_.reserve_growable(key, max_bytes, address)) {
    if (!policy_.fault().empty()) return device_fault("reserving a growable buffer");
    return fail(runtime_errc::out_of_memory, "no address space for a growable buffer of " + mib(max_bytes));
  }
  ++next_arena_key_;
  growables_.emplace(address, growable{key, tag_id, max_bytes});
  tags_[tag_id].arena_keys.push_back(key);
  return runtime_errc::ok;
}

runtime_errc runtime::grow(std::uint64_t address, std::uint64_t bytes) {
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
  return runtime_errc::ok;
}

std::uint64_t runtime::grown_bytes(std::uint64_t address) const {
  std::lock_guard hold(lock_);
  auto found = growables_.find(address);
  return found == growables_.end() ? 0 : policy_.grown_bytes(found->second.key);
}

runtime_errc runtime::release_growable(std::uint64_t address) {
  std::lock_guard hold(lock_);
  auto found = growables_.find(address);
  if (found == growables_.end()) return fail(runtime_errc::unknown_pointer, "not a growable buffer's address, or released twice");
  std::uint64_t key = found->second.key;
  std::uint32_t tag_id = found->second.tag;
  address_run range;
  if (policy_.arena_range(key, range)) {
    if (runtime_errc code = unpoison(tags_[tag_id], range); code != runtime_errc::ok) return code;
  }
  std::uint64_t grown = policy_.grown_bytes(key);
  policy_.release_growable(key);
  tag_state& tag = tags_[tag_id];
  std::erase(tag.arena_keys, key);
  tag.stats.allocated_bytes.remove(grown);
  totals_.allocated_bytes.remove(grown);
  growables_.erase(found);
  for (tag_state& each : tags_) refresh_mapped(each);
  return runtime_errc::ok;
}

runtime_errc runtime::read(std::uint64_t address, void* destination, std::uint64_t size) {
  std::lock_guard hold(lock_);
  device_errc code = gpu_.copy_to_host(destination, address, size);
  if (code == device_errc::ok) return runtime_errc::ok;
  return fail(runtime_errc::invalid_argument, "read of unmapped or invalid memory: " + std::string(device_error_name(code)));
}

runtime_errc runtime::write(std::uint64_t address, const void* source, std::uint64_t size) {
  std::lock_guard hold(lock_);
  device_errc code = gpu_.copy_from_host(address, source, size);
  if (code == device_errc::ok) return runtime_errc::ok;
  return fail(runtime_errc::invalid_argument, "write to unmapped or invalid memory: " + std::string(device_error_name(code)));
}

void runtime::remember(history_event event) {
  if (options_.history_entries == 0) return;
  if (history_.size() < options_.history_entries) {
    history_.push_back(event);
    return;
  }
  history_[history_next_] = event;
  history_next_ = (history_next_ + 1) % history_.size();
  ++history_dropped_;
}

runtime_snapshot runtime::snapshot() const {
  std::lock_guard hold(lock_);
  runtime_snapshot taken;
  std::map<std::uint64_t, const live_block*> blocks;  // by address
  for (const auto& [address, held] : live_) blocks.emplace(address, &held);
  for (const auto& [key, stream] : stream_of_arena_) {
    address_run range;
    if (!policy_.arena_range(key, range)) continue;
    for (address_run run : policy_.mapped_runs(range)) {
      runtime_snapshot::segment& segment = taken.segments.emplace_back();
      segment.address = run.address;
      segment.size = run.bytes;
      segment.stream = stream;
      for (auto at = blocks.lower_bound(run.address); at != blocks.end() && at->first < run.address + run.bytes; ++at) {
        segment.blocks.push_back({at->first, at->second->block->size, at->second->requested});
      }
    }
  }
  // A growable buffer is one block over what it has grown.
  for (const auto& [base, buffer] : growables_) {
    address_run range;
    if (!policy_.arena_range(buffer.key, range)) continue;
    for (address_run run : policy_.mapped_runs(range)) {
      std::uint64_t grown = policy_.grown_bytes(buffer.key);
      taken.segments.push_back({run.address, run.bytes, 0, {{base, grown, grown}}});
    }
  }
  std::sort(taken.segments.begin(), taken.segments.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  taken.events.reserve(history_.size());
  for (std::size_t i = 0; i < history_.size(); ++i) taken.events.push_back(history_[(history_next_ + i) % history_.size()]);
  taken.events_dropped = history_dropped_;
  return taken;
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

runtime_errc runtime::blocks_still_filled(std::string_view name, std::vector<address_run>& blocks) {
  std::lock_guard hold(lock_);
  blocks.clear();
  tag_state* tag = find_tag(name);
  if (tag == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(name) + "'");
  if (tag->stats.paused) return fail(runtime_errc::paused, "tag '" + std::string(name) + "' is paused: resume it first");
  std::uint8_t fill = options_.check_contents ? options_.check_fill : options_.discard_fill;
  std::uint32_t tag_id = static_cast<std::uint32_t>(tag - tags_.data());
  std::vector<std::uint8_t> chunk(std::min<std::uint64_t>(options_.copy_chunk_bytes, std::uint64_t{4} << 20));
  for (const auto& [address, held] : live_) {
    if (held.tag != tag_id) continue;
    bool filled = true;
    for (std::uint64_t at = address; filled && at < address + held.requested; at += chunk.size()) {
      std::uint64_t size = std::min<std::uint64_t>(chunk.size(), address + held.requested - at);
      if (device_errc code = gpu_.copy_to_host(chunk.data(), at, size); code != device_errc::ok) {
        return fail(runtime_errc::device_error, "reading a block: " + std::string(device_error_name(code)));
      }
      filled = std::all_of(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(size), [&](std::uint8_t byte) { return byte == fill; });
    }
    if (filled) blocks.push_back({address, held.block->size});
  }
  std::sort(blocks.begin(), blocks.end(), [](const address_run& a, const address_run& b) { return a.address < b.address; });
  return runtime_errc::ok;
}

std::string runtime::last_error() const { return calling_thread_error; }

}  // namespace rlmem
