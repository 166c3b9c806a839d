// SPDX-License-Identifier: MIT
// Pause and resume of a tag: the pinned host slabs its contents go through, the host buffers'
// limit, poisoning paused memory, and the check that a resumed tag's blocks hold what was kept.
#include <rlmem/runtime/runtime.hpp>

#include "runtime_helpers.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <new>

#include <unistd.h>  // sysconf: the host's physical memory

namespace rlmem {

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

host_buffers_bound runtime::host_buffers_limit() const {
  std::uint64_t device_bytes = options_.policy.capacity_bytes != 0 ? options_.policy.capacity_bytes : gpu_.config().total_bytes;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGESIZE);
  // A host that does not say (sysconf fails) is bounded by the device alone.
  std::uint64_t host_half = pages > 0 && page_bytes > 0 ? static_cast<std::uint64_t>(pages) / 2 * static_cast<std::uint64_t>(page_bytes)
                                                        : UINT64_MAX;
  if (host_half < device_bytes) return {host_half, "half the host's physical memory"};
  return {device_bytes, options_.policy.capacity_bytes != 0 ? "the runtime's capacity, the most a pause backs up"
                                                            : "the device's memory, the most a pause backs up"};
}

result<void, runtime_errc> runtime::reserve_host_buffers(std::uint64_t bytes) {
  std::lock_guard hold(lock_);
  if (host_buffers_bound limit = host_buffers_limit(); bytes > limit.bytes) {
    return fail(runtime_errc::invalid_argument, "reserving " + std::to_string(bytes) + " bytes of pinned host memory: more than " +
                                                    std::to_string(limit.bytes) + " (" + mib(limit.bytes) + ", " + std::string(limit.why) +
                                                    "); nothing pinned");
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
  return {};
}

runtime_failure runtime::refuse_unproven(const tag_state& tag) {
  const std::pair<const std::uint64_t, live_block>* first = nullptr;
  for (const auto& each : live_) {
    bool in_tag = !each.second.unproven.empty() && &tags_[each.second.tag] == &tag;
    if (in_tag && (first == nullptr || each.first < first->first)) first = &each;
  }
  char where[64];
  std::snprintf(where, sizeof where, "0x%llx on stream 0x%llx", static_cast<unsigned long long>(first->first),
                static_cast<unsigned long long>(first->second.stream));
  std::string others = tag.unproven_blocks > 1 ? " (and " + std::to_string(tag.unproven_blocks - 1) + " more such)" : "";
  return fail(runtime_errc::invalid_argument, "tag '" + tag.stats.name + "' is not paused: it holds " + std::to_string(first->second.block->size) +
                                                  " bytes at " + where + others + " that may be memory a library keeps for itself (" +
                                                  first->second.unproven + "); pausing it could break that library's next call");
}

result<void, runtime_errc> runtime::pause(std::string_view name, keep_contents keep) {
  std::unique_lock hold(lock_);
  tag_state* tag = find_tag(name);
  if (tag == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(name) + "': nothing was allocated in it");
  if (name == library_tag) {
    return fail(runtime_errc::invalid_argument, "tag '" + std::string(library_tag) +
                                                    "' holds what torch's libraries keep for themselves (cuBLAS workspaces, used by "
                                                    "every later GEMM): it is never paused");
  }
  if (tag->stats.paused) return fail(runtime_errc::already_paused, "tag '" + std::string(name) + "' is already paused");
  if (tag->unproven_blocks > 0) return refuse_unproven(*tag);
  auto start = std::chrono::steady_clock::now();
  // Every stream may still be using the tag's memory: fence before copying or unmapping.
  if (device_errc code = gpu_.synchronize(); code != device_errc::ok) {
    return fail(runtime_errc::device_error, "synchronize before pause: " + std::string(error_name(code)));
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
                  "backing up tag '" + std::string(name) + "' to host memory: " + std::string(error_name(code)) + "; nothing paused");
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
        return paused_part_way("backup copy: " + std::string(error_name(enqueued)));
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
        why = "backup copy: " + std::string(error_name(waited));
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
    if (auto poisoned = poison(*tag); !poisoned.ok()) return poisoned;
  }
  tag->stats.last_pause_seconds = seconds_since(start);
  return {};
}

result<void, runtime_errc> runtime::poison(tag_state& tag) {
  std::uint64_t page = policy_.page_bytes();
  bool fresh = tag.poison == 0;
  if (fresh) {
    if (device_errc code = gpu_.create(page, tag.poison); code != device_errc::ok) {
      tag.poison = 0;
      return fail(runtime_errc::device_error, "checking mode: a page to back paused memory: " + std::string(error_name(code)));
    }
  }
  for (std::uint64_t key : tag.arena_keys) {
    address_run range;
    if (!policy_.arena_range(key, range)) continue;
    for (address_run run : policy_.used_runs(range)) {
      for (std::uint64_t at = run.address; at < run.address + run.bytes; at += page) {
        if (device_errc code = gpu_.map(at, page, tag.poison); code != device_errc::ok) {
          return fail(runtime_errc::device_error, "checking mode: mapping the check page: " + std::string(error_name(code)));
        }
        tag.poisoned.push_back(at);
      }
      if (device_errc code = gpu_.set_access(run.address, run.bytes); code != device_errc::ok) {
        return fail(runtime_errc::device_error, "checking mode: access to the check page: " + std::string(error_name(code)));
      }
    }
  }
  if (fresh && !tag.poisoned.empty()) {
    device_errc code = gpu_.fill_async(tag.poisoned.front(), page, options_.check_fill);
    if (code == device_errc::ok) code = gpu_.wait_copies();
    if (code != device_errc::ok) {
      return fail(runtime_errc::device_error, "checking mode: filling the check page: " + std::string(error_name(code)));
    }
  }
  return {};
}

result<void, runtime_errc> runtime::unpoison(tag_state& tag, address_run within) {
  if (tag.poisoned.empty()) return {};
  std::uint64_t page = policy_.page_bytes();
  if (device_errc code = gpu_.synchronize(); code != device_errc::ok) {
    return fail(runtime_errc::device_error, "synchronize before unmapping the check page: " + std::string(error_name(code)));
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
      return fail(runtime_errc::device_error, "checking mode: unmapping the check page: " + std::string(error_name(code)));
    }
    at = tag.poisoned.erase(at);
  }
  return {};
}

result<void, runtime_errc> runtime::resume(std::string_view name) {
  std::lock_guard hold(lock_);
  tag_state* tag = find_tag(name);
  if (tag == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(name) + "': nothing was allocated in it");
  if (!tag->stats.paused) return fail(runtime_errc::not_paused, "tag '" + std::string(name) + "' is not paused");
  if (tag->pausing) return fail(runtime_errc::not_paused, "tag '" + std::string(name) + "' is being paused by another thread");
  auto start = std::chrono::steady_clock::now();
  if (auto unpoisoned = unpoison(*tag); !unpoisoned.ok()) return unpoisoned;
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
    if (options_.check_contents) (void)poison(*tag);  // the resume's own failure is the one to report
    if (short_of_memory) {
      return fail(runtime_errc::out_of_memory, "resume of tag '" + std::string(name) + "': not enough free device memory (" +
                                                   mib(static_cast<std::uint64_t>(policy_.reserved_bytes())) +
                                                   " mapped by rlmem); the tag stays paused");
    }
    return fail(runtime_errc::device_error, "resume of tag '" + std::string(name) + "': " +
                                                (fault.empty() ? std::string(error_name(code)) : fault) + "; the tag stays paused");
  }
  free_backup(*tag);
  tag->stats.paused = false;
  ++tag->stats.resumes;
  refresh_mapped(*tag);
  tag->stats.last_resume_copied_bytes = copied;
  tag->stats.last_resume_seconds = seconds_since(start);
  return {};
}

result<std::vector<address_run>, runtime_errc> runtime::blocks_still_filled(std::string_view name) {
  std::lock_guard hold(lock_);
  tag_state* tag = find_tag(name);
  if (tag == nullptr) return fail(runtime_errc::unknown_tag, "no tag '" + std::string(name) + "'");
  if (tag->stats.paused) return fail(runtime_errc::paused, "tag '" + std::string(name) + "' is paused: resume it first");
  std::uint8_t fill = options_.check_contents ? options_.check_fill : options_.discard_fill;
  std::uint32_t tag_id = static_cast<std::uint32_t>(tag - tags_.data());
  std::vector<std::uint8_t> chunk(std::min<std::uint64_t>(options_.copy_chunk_bytes, std::uint64_t{4} << 20));
  std::vector<address_run> blocks;
  for (const auto& [address, held] : live_) {
    if (held.tag != tag_id) continue;
    bool filled = true;
    for (std::uint64_t at = address; filled && at < address + held.requested; at += chunk.size()) {
      std::uint64_t size = std::min<std::uint64_t>(chunk.size(), address + held.requested - at);
      if (device_errc code = gpu_.copy_to_host(chunk.data(), at, size); code != device_errc::ok) {
        return fail(runtime_errc::device_error, "reading a block: " + std::string(error_name(code)));
      }
      filled = std::all_of(chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(size), [&](std::uint8_t byte) { return byte == fill; });
    }
    if (filled) blocks.push_back({address, held.block->size});
  }
  std::sort(blocks.begin(), blocks.end(), [](const address_run& a, const address_run& b) { return a.address < b.address; });
  return blocks;
}

}  // namespace rlmem
