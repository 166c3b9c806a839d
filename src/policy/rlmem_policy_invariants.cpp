// SPDX-License-Identifier: MIT
// What the rlmem policy keeps true between calls, checked: its counters, its pages and their
// users, and each arena's spans with the sets that index them.

#include <rlmem/policy/rlmem_policy.hpp>

#include <algorithm>
#include <string>
#include <unordered_map>

namespace rlmem {

namespace {

std::string hex(std::uint64_t value) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string text;
  do {
    text.insert(text.begin(), digits[value % 16]);
    value /= 16;
  } while (value != 0);
  return "0x" + text;
}

std::string count_mismatch(const std::string& what, std::uint64_t counted, std::uint64_t found) {
  return what + ": counted " + std::to_string(counted) + ", found " + std::to_string(found);
}

}  // namespace

std::optional<std::string> rlmem_policy::broken_invariant(invariant_scope scope) const {
  if (!fault_.empty()) return std::nullopt;
  if (mapped_pages_ + paused_pages_ != pages_.size()) {
    return count_mismatch("pages mapped and paused against the page map", mapped_pages_ + paused_pages_, pages_.size());
  }
  if (cached_pages_ > mapped_pages_) return count_mismatch("cached pages above the mapped ones", cached_pages_, mapped_pages_);
  if (options_.capacity_bytes > 0 && mapped_pages_ * page_bytes_ > options_.capacity_bytes) {
    return count_mismatch("mapped bytes past the capacity", mapped_pages_ * page_bytes_, options_.capacity_bytes);
  }
  if (allocated_bytes_ < 0) return "allocated bytes below 0: " + std::to_string(allocated_bytes_);
  std::uint64_t arena_pages = 0;
  for (const auto& [key, space] : arenas_) {
    arena_pages += space.mapped_pages;
    if (space.mapped_pages * page_bytes_ > space.size) {
      return "arena " + std::to_string(key) + " maps " + std::to_string(space.mapped_pages) + " pages in " + std::to_string(space.size) + " bytes";
    }
    if (space.growable && (space.grown_bytes % page_bytes_ != 0 || space.grown_bytes > space.size)) {
      return "growable arena " + std::to_string(key) + " grown to " + std::to_string(space.grown_bytes) + " bytes";
    }
  }
  if (arena_pages != mapped_pages_) return count_mismatch("mapped pages against the sum over arenas", mapped_pages_, arena_pages);
  if (scope == invariant_scope::totals) return std::nullopt;

  // The pages: what they count against the policy's and each arena's counters, and their runs.
  std::uint64_t mapped = 0;
  std::uint64_t paused = 0;
  std::uint64_t cached = 0;
  std::unordered_map<const arena*, std::uint64_t> mapped_by_arena;
  std::unordered_map<std::uint64_t, std::uint64_t> pages_by_run;
  for (const auto& [address, held] : pages_) {
    const std::string where = "page " + hex(address);
    if (address % page_bytes_ != 0) return where + " is not on the page grid";
    if (held.owner == nullptr || address < held.owner->base || address >= held.owner->base + held.owner->size) {
      return where + " lies outside the arena that owns it";
    }
    if (held.handle == 0) {
      ++paused;
      if (held.users == 0) return where + " is paused with no user (it should have been forgotten)";
      if (held.run != 0) return where + " is paused in a run";
      continue;
    }
    ++mapped;
    ++mapped_by_arena[held.owner];
    if (held.users == 0) ++cached;
    if (held.run == 0) continue;
    auto run = runs_.find(held.run);
    if (run == runs_.end() || address >= held.run + run->second.bytes) return where + " names a run that does not hold it";
    if (run->second.handle != held.handle) return where + " has another handle than its run";
    ++pages_by_run[held.run];
  }
  if (mapped != mapped_pages_) return count_mismatch("mapped pages", mapped_pages_, mapped);
  if (paused != paused_pages_) return count_mismatch("paused pages", paused_pages_, paused);
  if (cached != cached_pages_) return count_mismatch("cached pages (mapped, no user)", cached_pages_, cached);
  for (const auto& [start, run] : runs_) {
    if (run.bytes % page_bytes_ != 0 || pages_by_run[start] != run.bytes / page_bytes_) {
      return count_mismatch("pages of the run at " + hex(start), run.bytes / page_bytes_, pages_by_run[start]);
    }
  }

  // Each arena: its mapped pages, then its spans, the users they give their pages and the bytes
  // on mapped pages they cover (live or mapped free: all of each page).
  std::unordered_map<std::uint64_t, std::uint64_t> users;
  std::unordered_map<std::uint64_t, std::uint64_t> covered;
  std::int64_t allocated = 0;
  for (const auto& [key, space] : arenas_) {
    const std::string name = "arena " + std::to_string(key);
    if (mapped_by_arena[&space] != space.mapped_pages) {
      return count_mismatch(name + "'s mapped pages (mapped_pages * page_bytes is its reserved bytes)", space.mapped_pages, mapped_by_arena[&space]);
    }
    if (space.growable) {
      // Pages from the base up to grown_bytes, each used by the buffer alone.
      auto page_at = pages_.lower_bound(space.base);
      for (std::uint64_t address = space.base; address < space.base + space.grown_bytes; address += page_bytes_, ++page_at) {
        if (page_at == pages_.end() || page_at->first != address || page_at->second.users != 1) {
          return name + " (a growable buffer) lacks page " + hex(address) + " with one user";
        }
      }
      if (page_at != pages_.end() && page_at->first < space.base + space.size) return name + " (a growable buffer) has a page past its grown bytes";
      if (space.head.next != nullptr || !space.gaps_by_size.empty() || !space.mapped_free_by_size.empty()) return name + " (a growable buffer) has spans";
      continue;
    }
    if (space.head.start != space.base || space.head.end != space.base || !space.head.live || space.head.prev != nullptr) {
      return name + "'s head is not a live span of no bytes at its base";
    }
    std::uint64_t gaps = 0;
    std::uint64_t mapped_free = 0;
    bool cursor_seen = false;
    const span* last_live = &space.head;
    for (const span* at = &space.head; at != nullptr; at = at->next) {
      const std::string where = name + "'s span [" + hex(at->start) + ", " + hex(at->end) + ")";
      if (at->next != nullptr && at->next->prev != at) return where + " is not its successor's predecessor";
      if (at != &space.head && at->start >= at->end) return where + " is empty";
      if (at->start < space.base || at->end > space.base + space.size) return where + " lies outside the arena";
      if (at->next != nullptr && at->next->start < at->end) return where + " overlaps the span after it, or is out of address order";
      if (at->next != nullptr && !at->live && !at->next->live && at->next->start == at->end) {
        return where + " touches the next mapped free range (they should be one)";
      }
      if (!at->live) {
        ++mapped_free;
        if (space.mapped_free_by_size.find(at) == space.mapped_free_by_size.end() || *at->mapped_free_entry != at) {
          return where + ", mapped free, is not in the mapped free set";
        }
      } else {
        cursor_seen = cursor_seen || at == space.cursor;
        if (last_live != at) {
          // The gap of the live span before: the free bytes up to this one.
          if (last_live->gap_after != at->start - last_live->end) {
            return count_mismatch(name + "'s gap after " + hex(last_live->end), last_live->gap_after, at->start - last_live->end);
          }
        }
        if (at->gap_after > 0) {
          ++gaps;
          if (space.gaps_by_size.find(at) == space.gaps_by_size.end() || *at->gap_entry != at) return where + " has a gap but is not in the gap set";
        }
        last_live = at;
      }
      if (at == &space.head) continue;
      std::uint64_t first = at->start / page_bytes_ * page_bytes_;
      for (std::uint64_t page_start = first; page_start < at->end; page_start += page_bytes_) {
        std::uint64_t overlap = std::min(at->end, page_start + page_bytes_) - std::max(at->start, page_start);
        covered[page_start] += overlap;
        if (at->live) {
          ++users[page_start];
          continue;
        }
        auto held = pages_.find(page_start);
        if (held == pages_.end() || held->second.handle == 0) return where + ", mapped free, lies on page " + hex(page_start) + ", which is not mapped";
      }
      if (at->live) {
        const model_block& block = at->block;
        if (block.ptr != at->start || block.size != at->end - at->start || !block.in_use || block.stream != key) {
          return where + " is live but its block says otherwise";
        }
        if (at->first_page->first != first) return where + " keeps another page than its first";
        if (block.allocated) allocated += static_cast<std::int64_t>(block.size);
      }
    }
    if (last_live != space.highest) return name + "'s highest span is not its last live one";
    if (space.highest->gap_after != 0) return name + "'s highest span has a gap after it";
    if (!cursor_seen) return name + "'s cursor is not one of its live spans";
    if (gaps != space.gaps_by_size.size()) return count_mismatch(name + "'s gap set", space.gaps_by_size.size(), gaps);
    if (mapped_free != space.mapped_free_by_size.size()) return count_mismatch(name + "'s mapped free set", space.mapped_free_by_size.size(), mapped_free);
  }
  if (allocated != allocated_bytes_) return count_mismatch("allocated bytes against the live blocks", static_cast<std::uint64_t>(allocated_bytes_), static_cast<std::uint64_t>(allocated));
  for (const auto& [address, held] : pages_) {
    if (held.owner->growable) continue;
    if (held.users != users[address]) return count_mismatch("users of page " + hex(address) + " (live blocks on it)", held.users, users[address]);
    if (held.handle != 0 && covered[address] != page_bytes_) {
      return count_mismatch("bytes of mapped page " + hex(address) + " that live blocks and mapped free ranges cover", page_bytes_, covered[address]);
    }
  }
  for (const auto& [address, count] : users) {
    if (count > 0 && !pages_.contains(address)) return "page " + hex(address) + " under a live block is in no page map";
  }
  return std::nullopt;
}

}  // namespace rlmem
