// SPDX-License-Identifier: MIT
// libFuzzer target for the runtime's C ABI (rlmem_runtime.h) on a host-backed fake device. The
// input is a device and options (the first bytes), then up to 256 operations: allocate, free (of
// a live block or of an address never handed out), enter and leave regions, pause (keeping the
// contents in host memory or discarding them), resume, empty_cache, growable buffers (reserve,
// grow, release; sizes up to UINT64_MAX), writes and reads, host buffers, statistics and
// snapshot documents. Checked after every operation:
// - the call's status is one of rlmem.h's codes, with a one-line message exactly when it fails;
//   the fake device never fails, so RLMEM_E_DEVICE and RLMEM_E_INTERNAL never come;
// - the bytes written to a block read back bit-exact, also after a pause that kept them in host
//   memory and its resume; after a pause that discarded them they read as zeros; a paused
//   block cannot be read or written;
// - refusals with their bounds (issue 28): the input's options with more history_entries than
//   2^24 open nothing; a grow past the buffer's max_bytes (UINT64_MAX among them) changes
//   nothing and leaves *grown unwritten; host buffers past what a pause could back up (the
//   capacity, else the device) are refused;
// - the statistics document parses, and its allocated bytes (in all and per tag) are the sum of
//   the live blocks' sizes and growable buffers' grown bytes as this harness tracks them;
// - differential (DESIGN.md: one policy, one implementation): a plain rlmem_policy over a second
//   fake_device, driven by the same calls the runtime makes of its policy (arenas keyed by
//   (tag, stream) in order of first use, growable buffers taking the next key, pause and resume
//   releasing and restoring the same ranges in the same order), succeeds or fails alike, hands
//   out the same addresses and agrees on allocated and reserved bytes.
// The runtime is closed at the end of every input.

#include <rlmem/device/fake_device.hpp>
#include <rlmem/policy/rlmem_policy.hpp>
#include <rlmem/rlmem_runtime.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // unsetenv
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

// A broken invariant: its line on stderr (the replay main shows no stack), then the crash
// libFuzzer records. A macro for __LINE__: clang 14's libstdc++ has no std::source_location.
void check_at(bool holds, int line) {
  if (holds) return;
  std::fprintf(stderr, "fuzz_runtime_capi: check failed at line %d\n", line);
  __builtin_trap();
}
#define FUZZ_CHECK(condition) check_at((condition), __LINE__)

constexpr int ordinal = 11;                  // a device number no other fuzz target or test uses
constexpr std::size_t max_operations = 256;  // bounds the work per input: the corpus replays in a second
constexpr std::uint64_t max_access_bytes = 64 << 10;  // bytes tracked per block: a larger block's first 64 KiB
constexpr std::uint64_t uint64_max = ~std::uint64_t{0};
// Tags the input names. "libraries" is the runtime's own (torch's library workspaces): no region
// may enter it, no pause may name it. The last is never entered.
constexpr std::array<std::string_view, 6> tag_names{"default", "train", "rollout", "kv", "libraries", "never-entered"};
constexpr std::string_view library_tag = "libraries";

// The input's bytes, front to back; zeros once they run out.
class input_reader {
 public:
  input_reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const noexcept { return at_ >= size_; }
  std::uint8_t byte() noexcept { return at_ < size_ ? data_[at_++] : 0; }
  std::uint64_t bytes(int count) noexcept {
    std::uint64_t value = 0;
    for (int i = 0; i < count; ++i) value |= std::uint64_t{byte()} << (8 * i);
    return value;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// Runs `call(&error)`, one C call, and checks its status and message: a known code, a message
// exactly on failure, one line.
template <typename Call>
int checked(Call call) {
  char* error = nullptr;
  int status = call(&error);
  FUZZ_CHECK(status <= RLMEM_OK && status >= RLMEM_E_DEVICE);
  FUZZ_CHECK(status != RLMEM_E_INTERNAL && status != RLMEM_E_DEVICE);  // the fake device never fails
  FUZZ_CHECK((status == RLMEM_OK) == (error == nullptr));
  if (error != nullptr) {
    FUZZ_CHECK(error[0] != '\0' && std::strchr(error, '\n') == nullptr);
    rlmem_string_free(error);
  }
  return status;
}

struct live_block {
  std::uint64_t size = 0;       // as the policy rounded it: what allocated_bytes counts
  std::uint64_t requested = 0;
  std::uint32_t tag = 0;
  rlmem::model_block* reference = nullptr;
  std::vector<std::uint8_t> contents;  // per requested byte, valid where known
  std::vector<std::uint8_t> known;     // 1: written (or zeroed by a discard) since allocation
};

struct growable_buffer {
  std::uint64_t key = 0;
  std::uint32_t tag = 0;
  std::uint64_t grown = 0;
  std::uint64_t max_bytes = 0;
};

struct tag_model {
  std::string name;
  bool paused = false;
  std::vector<std::uint64_t> arena_keys;     // in the order the runtime adds them
  std::vector<rlmem::address_run> backup;    // the pieces a keep-host pause copied, in order
};

// What the runtime does with its policy, on a second device, and what this harness expects.
class model {
 public:
  model(const rlmem::fake_device_options& device, const rlmem::rlmem_policy_options& policy, std::uint64_t copy_chunk)
      : gpu_(device), policy_(gpu_, policy) {
    copy_chunk_ = std::max(policy_.page_bytes(), copy_chunk / policy_.page_bytes() * policy_.page_bytes());
    tag_id(std::string(tag_names[0]));     // the runtime's tags from the start, in its order
    tag_id(std::string(library_tag));
  }

  std::uint32_t tag_id(const std::string& name) {
    for (std::uint32_t id = 0; id < tags_.size(); ++id) {
      if (tags_[id].name == name) return id;
    }
    tags_.push_back({name, false, {}, {}});
    return static_cast<std::uint32_t>(tags_.size() - 1);
  }
  std::optional<std::uint32_t> find_tag(std::string_view name) const {
    for (std::uint32_t id = 0; id < tags_.size(); ++id) {
      if (tags_[id].name == name) return id;
    }
    return std::nullopt;
  }
  std::uint32_t current_tag() const { return regions.empty() ? 0 : regions.back(); }

  // runtime::allocate after its argument and pause checks: the arena of (tag, stream), then the policy.
  rlmem::model_block* allocate(std::uint64_t bytes, std::uint64_t stream) {
    std::uint32_t tag = current_tag();
    auto [at, made] = arena_keys_.try_emplace({tag, stream}, next_key_);
    if (made) {
      ++next_key_;
      tags_[tag].arena_keys.push_back(at->second);
    }
    rlmem::model_block* block = policy_.allocate(bytes, at->second);
    FUZZ_CHECK(policy_.fault().empty());
    return block;
  }
  void free(rlmem::model_block* block) {
    policy_.free_completed(block);
    FUZZ_CHECK(policy_.fault().empty());
  }

  // runtime::pause: with keep-host, the used pages cut into copy chunks and those into pieces
  // that fill pinned slabs, each released once copied; then every range of the tag.
  void pause(std::uint32_t tag, bool keep_host) {
    tag_model& paused = tags_[tag];
    if (keep_host) {
      std::vector<rlmem::address_run> chunks;
      for (std::uint64_t key : paused.arena_keys) {
        rlmem::address_run range;
        if (!policy_.arena_range(key, range)) continue;
        for (rlmem::address_run run : policy_.used_runs(range)) {
          for (std::uint64_t at = run.address; at < run.address + run.bytes; at += copy_chunk_) {
            chunks.push_back({at, std::min(copy_chunk_, run.address + run.bytes - at)});
          }
        }
      }
      std::uint64_t slab_used = copy_chunk_;
      for (rlmem::address_run chunk : chunks) {
        while (chunk.bytes > 0) {
          if (slab_used == copy_chunk_) slab_used = 0;
          rlmem::address_run piece{chunk.address, std::min(chunk.bytes, copy_chunk_ - slab_used)};
          paused.backup.push_back(piece);
          slab_used += piece.bytes;
          chunk.address += piece.bytes;
          chunk.bytes -= piece.bytes;
        }
      }
      for (rlmem::address_run piece : paused.backup) FUZZ_CHECK(policy_.release_range(piece, true));
    }
    for (std::uint64_t key : paused.arena_keys) {
      rlmem::address_run range;
      if (policy_.arena_range(key, range)) FUZZ_CHECK(policy_.release_range(range, true));
    }
    paused.paused = true;
  }

  // runtime::resume: the backed-up pieces, then every range of the tag; short of memory, all
  // released again and the tag stays paused.
  bool resume(std::uint32_t tag) {
    tag_model& paused = tags_[tag];
    std::vector<rlmem::address_run> restored_ranges;
    std::vector<rlmem::address_run> restored;
    bool short_of_memory = false;
    for (rlmem::address_run piece : paused.backup) {
      if (!policy_.restore_range(piece, restored)) {
        short_of_memory = true;
        break;
      }
      restored_ranges.push_back(piece);
    }
    for (std::size_t index = 0; index < paused.arena_keys.size() && !short_of_memory; ++index) {
      rlmem::address_run range;
      if (!policy_.arena_range(paused.arena_keys[index], range)) continue;
      if (!policy_.restore_range(range, restored)) {
        short_of_memory = true;
        break;
      }
      restored_ranges.push_back(range);
    }
    FUZZ_CHECK(policy_.fault().empty());
    if (short_of_memory) {
      for (rlmem::address_run range : restored_ranges) policy_.release_range(range);
      FUZZ_CHECK(policy_.fault().empty());
      return false;
    }
    paused.backup.clear();
    paused.paused = false;
    return true;
  }

  void empty_cache() {
    policy_.empty_cache();
    FUZZ_CHECK(policy_.fault().empty());
  }

  // runtime::reserve_growable: the next key, taken only when the reservation is made.
  std::optional<std::uint64_t> reserve_growable(std::uint64_t max_bytes, std::uint64_t& base) {
    std::uint64_t key = next_key_;
    bool made = policy_.reserve_growable(key, max_bytes, base);
    FUZZ_CHECK(policy_.fault().empty());
    if (!made) return std::nullopt;
    ++next_key_;
    tags_[current_tag()].arena_keys.push_back(key);
    return key;
  }
  bool grow(std::uint64_t key, std::uint64_t bytes) {
    bool grown = policy_.grow(key, bytes);
    FUZZ_CHECK(policy_.fault().empty());
    return grown;
  }
  std::uint64_t grown_bytes(std::uint64_t key) const { return policy_.grown_bytes(key); }
  void release_growable(std::uint64_t key, std::uint32_t tag) {
    policy_.release_growable(key);
    FUZZ_CHECK(policy_.fault().empty());
    std::erase(tags_[tag].arena_keys, key);
  }

  std::int64_t allocated_bytes() const { return policy_.allocated_bytes(); }
  std::int64_t reserved_bytes() const { return policy_.reserved_bytes(); }
  std::uint64_t page_bytes() const { return policy_.page_bytes(); }
  const std::vector<tag_model>& tags() const { return tags_; }
  tag_model& tag(std::uint32_t id) { return tags_[id]; }

  std::vector<std::uint32_t> regions;                   // open regions, innermost last
  std::map<std::uint64_t, live_block> blocks;           // by address
  std::map<std::uint64_t, growable_buffer> growables;   // by base address

 private:
  rlmem::fake_device gpu_;
  rlmem::rlmem_policy policy_;
  std::uint64_t copy_chunk_ = 0;
  std::vector<tag_model> tags_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> arena_keys_;  // (tag, stream)
  std::uint64_t next_key_ = 1;
};

std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t at) {
  return static_cast<std::uint8_t>((seed * 0x9E3779B97F4A7C15ull + at * 0xBF58476D1CE4E5B9ull) >> 56);
}

// The statistics document against the model: allocated bytes in all and per tag, paused flags,
// and the reserved bytes of the reference policy.
void check_statistics(model& expected) {
  char* json = nullptr;
  FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_statistics_json(ordinal, &json, error); }) == RLMEM_OK && json != nullptr);
  nlohmann::json document = nlohmann::json::parse(json, nullptr, false);
  rlmem_string_free(json);
  FUZZ_CHECK(!document.is_discarded());
  std::vector<std::uint64_t> per_tag(expected.tags().size(), 0);
  std::uint64_t blocks_bytes = 0;
  for (const auto& [address, block] : expected.blocks) {
    per_tag[block.tag] += block.size;
    blocks_bytes += block.size;
  }
  FUZZ_CHECK(static_cast<std::int64_t>(blocks_bytes) == expected.allocated_bytes());
  for (const auto& [base, buffer] : expected.growables) per_tag[buffer.tag] += buffer.grown;
  std::uint64_t total = 0;
  for (std::uint64_t each : per_tag) total += each;
  const nlohmann::json& tags = document.at("tags");
  FUZZ_CHECK(tags.size() == expected.tags().size());
  for (std::size_t id = 0; id < tags.size(); ++id) {
    FUZZ_CHECK(tags[id].at("name").get<std::string>() == expected.tags()[id].name);
    FUZZ_CHECK(tags[id].at("paused").get<bool>() == expected.tags()[id].paused);
    FUZZ_CHECK(tags[id].at("allocated_bytes").at("current").get<std::uint64_t>() == per_tag[id]);
  }
  const nlohmann::json& totals = document.at("totals");
  FUZZ_CHECK(totals.at("allocated_bytes").at("current").get<std::uint64_t>() == total);
  FUZZ_CHECK(totals.at("allocations").at("current").get<std::uint64_t>() == expected.blocks.size());
  FUZZ_CHECK(totals.at("reserved_bytes").at("current").get<std::int64_t>() == expected.reserved_bytes());
}

// A live block picked by the input, or nullptr when there is none.
std::pair<const std::uint64_t, live_block>* pick_block(model& expected, input_reader& in) {
  if (expected.blocks.empty()) return nullptr;
  auto at = expected.blocks.begin();
  std::advance(at, in.byte() % expected.blocks.size());
  return &*at;
}

// An address no live block or growable buffer starts at.
std::uint64_t bogus_address(const model& expected, input_reader& in) {
  static constexpr std::array<std::uint64_t, 5> candidates{0, 1, uint64_max, std::uint64_t{0x7f00} << 32, 512};
  std::uint64_t address = candidates[in.byte() % candidates.size()];
  if (!expected.blocks.empty() && (address & 1) == 0) address += expected.blocks.begin()->first;
  while (expected.blocks.contains(address) || expected.growables.contains(address)) address += 512;
  return address;
}

std::uint64_t allocation_size(input_reader& in, std::uint64_t page) {
  switch (in.byte() % 8) {
    case 0: return 0;
    case 1: return uint64_max;
    case 2: return std::uint64_t{1} << 63;
    case 3: return page * (1 + in.byte() % 6) + in.byte() % 3;
    default: return 1 + in.bytes(2) * (1 + in.byte() % 16);  // up to 1 MiB
  }
}

std::uint64_t growable_size(input_reader& in, std::uint64_t page, std::uint64_t total) {
  switch (in.byte() % 8) {
    case 0: return 0;
    case 1: return uint64_max;
    case 2: return uint64_max - page + 2;  // rounds up past 2^64 to a page
    case 3: return std::uint64_t{1} << 63;
    case 4: return total * (1 + in.byte() % 4);
    default: return 1 + in.bytes(1) * page / 16 + page * (in.byte() % 4);
  }
}

void allocate(model& expected, input_reader& in) {
  std::uint64_t size = allocation_size(in, expected.page_bytes());
  static constexpr std::array<std::uint64_t, 4> streams{0, 1, 7, uint64_max};
  std::uint64_t stream = streams[in.byte() % streams.size()];
  std::uint64_t address = 0;
  int status = checked([&](char** error) { return rlmem_runtime_allocate(ordinal, size, stream, &address, error); });
  std::uint32_t tag = expected.current_tag();
  if (size == 0) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  if (expected.tags()[tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_STATE);
    return;
  }
  rlmem::model_block* reference = expected.allocate(size, stream);
  FUZZ_CHECK((status == RLMEM_OK) == (reference != nullptr));
  if (status != RLMEM_OK) {
    FUZZ_CHECK(status == RLMEM_E_NO_MEMORY);
    return;
  }
  FUZZ_CHECK(reference->ptr == address && !expected.blocks.contains(address));
  live_block& made = expected.blocks[address];
  made.size = reference->size;
  made.requested = size;
  made.tag = tag;
  made.reference = reference;
  std::uint64_t tracked = std::min(size, max_access_bytes);
  made.contents.assign(tracked, 0);
  made.known.assign(tracked, 0);
}

void free_block(model& expected, input_reader& in, bool bogus) {
  auto* picked = bogus ? nullptr : pick_block(expected, in);
  if (picked == nullptr) {
    std::uint64_t address = bogus_address(expected, in);
    FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_free(ordinal, address, error); }) == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  std::uint64_t address = picked->first;
  FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_free(ordinal, address, error); }) == RLMEM_OK);
  expected.free(picked->second.reference);
  expected.blocks.erase(address);
}

void enter_region(model& expected, input_reader& in) {
  std::string name(tag_names[in.byte() % (tag_names.size() - 1)]);
  int status = checked([&](char** error) { return rlmem_runtime_enter_region(ordinal, name.c_str(), error); });
  if (name == library_tag) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  FUZZ_CHECK(status == RLMEM_OK);
  expected.regions.push_back(expected.tag_id(name));
}

void leave_region(model& expected) {
  int status = checked([&](char** error) { return rlmem_runtime_leave_region(ordinal, error); });
  FUZZ_CHECK(status == (expected.regions.empty() ? RLMEM_E_INVALID_ARGUMENT : RLMEM_OK));
  if (!expected.regions.empty()) expected.regions.pop_back();
}

void pause(model& expected, input_reader& in) {
  std::string name(tag_names[in.byte() % tag_names.size()]);
  bool keep_host = (in.byte() & 1) != 0;
  int status = checked([&](char** error) { return rlmem_runtime_pause(ordinal, name.c_str(), keep_host ? 1 : 0, error); });
  std::optional<std::uint32_t> tag = expected.find_tag(name);
  if (name == library_tag) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  if (!tag || expected.tags()[*tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_STATE);
    return;
  }
  FUZZ_CHECK(status == RLMEM_OK);
  expected.pause(*tag, keep_host);
  if (keep_host) return;
  // Discarded: resume fills the tag's memory with zeros.
  for (auto& [address, block] : expected.blocks) {
    if (block.tag != *tag) continue;
    std::fill(block.contents.begin(), block.contents.end(), 0);
    std::fill(block.known.begin(), block.known.end(), 1);
  }
}

void resume(model& expected, input_reader& in) {
  std::string name(tag_names[in.byte() % tag_names.size()]);
  int status = checked([&](char** error) { return rlmem_runtime_resume(ordinal, name.c_str(), error); });
  std::optional<std::uint32_t> tag = expected.find_tag(name);
  if (!tag || !expected.tags()[*tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_STATE);
    return;
  }
  FUZZ_CHECK(status == (expected.resume(*tag) ? RLMEM_OK : RLMEM_E_NO_MEMORY));
}

void reserve_growable(model& expected, input_reader& in, std::uint64_t total) {
  std::uint64_t max_bytes = growable_size(in, expected.page_bytes(), total);
  std::uint64_t address = 0;
  int status = checked([&](char** error) { return rlmem_runtime_growable_reserve(ordinal, max_bytes, &address, error); });
  std::uint32_t tag = expected.current_tag();
  if (max_bytes == 0 || max_bytes >= std::uint64_t{1} << 63) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  if (expected.tags()[tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_STATE);
    return;
  }
  std::uint64_t base = 0;
  std::optional<std::uint64_t> key = expected.reserve_growable(max_bytes, base);
  FUZZ_CHECK((status == RLMEM_OK) == key.has_value());
  if (!key) {
    FUZZ_CHECK(status == RLMEM_E_NO_MEMORY);
    return;
  }
  FUZZ_CHECK(base == address && !expected.growables.contains(address));
  expected.growables[address] = {*key, tag, 0, max_bytes};
}

void grow(model& expected, input_reader& in, std::uint64_t total) {
  growable_buffer* buffer = nullptr;
  std::uint64_t address = 0;
  if (!expected.growables.empty() && (in.byte() & 7) != 0) {
    auto at = expected.growables.begin();
    std::advance(at, in.byte() % expected.growables.size());
    address = at->first;
    buffer = &at->second;
  } else {
    address = bogus_address(expected, in);
  }
  std::uint64_t bytes = growable_size(in, expected.page_bytes(), total);
  std::uint64_t grown = 12345;
  int status = checked([&](char** error) { return rlmem_runtime_grow(ordinal, address, bytes, &grown, error); });
  if (buffer == nullptr) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  if (expected.tags()[buffer->tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_STATE && grown == buffer->grown);
    return;
  }
  if (bytes > buffer->max_bytes) {  // UINT64_MAX among them: it once "succeeded" growing nothing
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT && grown == 12345);
    return;
  }
  bool made = expected.grow(buffer->key, bytes);
  FUZZ_CHECK(status == (made ? RLMEM_OK : RLMEM_E_NO_MEMORY));
  FUZZ_CHECK(grown == expected.grown_bytes(buffer->key));
  if (made) FUZZ_CHECK(grown >= bytes);  // never less than asked for
  buffer->grown = grown;
}

void release_growable(model& expected, input_reader& in) {
  if (expected.growables.empty() || (in.byte() & 7) == 0) {
    std::uint64_t address = bogus_address(expected, in);
    FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_growable_release(ordinal, address, error); }) ==
          RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  auto at = expected.growables.begin();
  std::advance(at, in.byte() % expected.growables.size());
  std::uint64_t address = at->first;
  FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_growable_release(ordinal, address, error); }) == RLMEM_OK);
  expected.release_growable(at->second.key, at->second.tag);
  expected.growables.erase(at);
}

// A range of a live block's tracked bytes picked by the input.
struct block_range {
  std::uint64_t address = 0;
  live_block* block = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

std::optional<block_range> pick_range(model& expected, input_reader& in) {
  auto* picked = pick_block(expected, in);
  if (picked == nullptr || picked->second.contents.empty()) return std::nullopt;
  std::uint64_t tracked = picked->second.contents.size();
  std::uint64_t offset = in.bytes(2) % tracked;
  std::uint64_t length = 1 + in.bytes(2) % (tracked - offset);
  return block_range{picked->first, &picked->second, offset, length};
}

void write(model& expected, input_reader& in) {
  std::optional<block_range> range = pick_range(expected, in);
  if (!range) return;
  std::uint64_t seed = in.byte();
  std::vector<std::uint8_t> bytes(range->length);
  for (std::uint64_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern_byte(seed, range->offset + i);
  int status = checked([&](char** error) {
    return rlmem_runtime_write(ordinal, range->address + range->offset, bytes.data(), bytes.size(), error);
  });
  if (expected.tags()[range->block->tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);  // its pages are released
    return;
  }
  FUZZ_CHECK(status == RLMEM_OK);
  std::copy(bytes.begin(), bytes.end(), range->block->contents.begin() + static_cast<std::ptrdiff_t>(range->offset));
  std::fill_n(range->block->known.begin() + static_cast<std::ptrdiff_t>(range->offset), bytes.size(), 1);
}

void read_back(model& expected, input_reader& in) {
  std::optional<block_range> range = pick_range(expected, in);
  if (!range) return;
  std::vector<std::uint8_t> bytes(range->length);
  int status = checked([&](char** error) {
    return rlmem_runtime_read(ordinal, range->address + range->offset, bytes.data(), bytes.size(), error);
  });
  if (expected.tags()[range->block->tag].paused) {
    FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
    return;
  }
  FUZZ_CHECK(status == RLMEM_OK);
  for (std::uint64_t i = 0; i < bytes.size(); ++i) {
    if (range->block->known[range->offset + i] != 0) FUZZ_CHECK(bytes[i] == range->block->contents[range->offset + i]);
  }
}

// Reads and writes at addresses nothing maps.
void access_unmapped(input_reader& in) {
  static constexpr std::array<std::uint64_t, 4> addresses{0, 4096, uint64_max - 7, std::uint64_t{1} << 62};
  std::uint64_t address = addresses[in.byte() % addresses.size()];
  std::array<std::uint8_t, 8> bytes{};
  bool reading = (in.byte() & 1) != 0;
  int status = checked([&](char** error) {
    return reading ? rlmem_runtime_read(ordinal, address, bytes.data(), bytes.size(), error)
                   : rlmem_runtime_write(ordinal, address, bytes.data(), bytes.size(), error);
  });
  FUZZ_CHECK(status == RLMEM_E_INVALID_ARGUMENT);
}

// Host buffers (a few slabs at most, or more than a pause could back up: refused, nothing
// pinned), peaks, the snapshot document.
void other_calls(model& expected, input_reader& in, std::uint64_t host_buffers_limit) {
  switch (in.byte() % 4) {
    case 0: {
      std::uint8_t choice = in.byte();
      std::uint64_t bytes = choice == 255 ? uint64_max : expected.page_bytes() * (choice % 9);
      int status = checked([&](char** error) { return rlmem_runtime_reserve_host_buffers(ordinal, bytes, error); });
      FUZZ_CHECK(status == (bytes > host_buffers_limit ? RLMEM_E_INVALID_ARGUMENT : RLMEM_OK));
      break;
    }
    case 1: FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_release_host_buffers(ordinal, error); }) == RLMEM_OK); break;
    case 2: FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_reset_peaks(ordinal, error); }) == RLMEM_OK); break;
    default: {
      char* json = nullptr;
      FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_snapshot_json(ordinal, &json, error); }) == RLMEM_OK);
      nlohmann::json document = nlohmann::json::parse(json, nullptr, false);
      rlmem_string_free(json);
      FUZZ_CHECK(!document.is_discarded() && document.at("device_traces").size() == static_cast<std::size_t>(ordinal) + 1);
      break;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The checking mode backs paused memory with a page of 0xFF and refills discards with it: the
  // model here is of the runtime as it runs by default.
  ::unsetenv("RLMEM_CHECK_PAUSED");
  input_reader in(data, size);
  // The device: pages of 4 KiB to 2 MiB, 2 to 32 of them (8 of 2 MiB), host-backed.
  static constexpr std::array<std::uint64_t, 4> pages{4096, 16384, 65536, std::uint64_t{2} << 20};
  std::uint64_t page = pages[in.byte() % pages.size()];
  std::uint64_t page_count = 2 + in.byte() % 31;
  if (page == pages.back()) page_count = std::min<std::uint64_t>(page_count, 8);
  std::uint64_t total = page * page_count;
  // The options, each field from the input.
  std::uint8_t flags = in.byte();
  rlmem_runtime_options options;
  rlmem_runtime_options_init(&options);
  options.release_free_pages = flags & 1;
  options.keep_host_buffers = (flags >> 1) & 1;
  if ((flags & 4) != 0) options.capacity_bytes = page * (1 + in.byte() % page_count);
  if ((flags & 8) != 0) options.reservation_bytes = page * (1 + in.byte() % (2 * page_count)) - in.byte() % 2;
  static constexpr std::array<std::uint64_t, 4> chunk_pages{1, 2, 4, 16};
  options.copy_chunk_bytes = page * chunk_pages[(flags >> 4) & 3];
  static constexpr std::array<std::uint64_t, 4> history{0, 4, 64, 0};
  options.history_entries = history[(flags >> 6) & 3];

  if (rlmem_runtime_is_open(ordinal) != 0) rlmem_runtime_close(ordinal);
  // The same options keeping more events than the runtime's bound: refused, nothing opened.
  rlmem_runtime_options too_much_history = options;
  too_much_history.history_entries = (std::uint64_t{1} << 24) + 1 + flags;
  FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_open_fake(ordinal, total, page, &too_much_history, error); }) ==
             RLMEM_E_INVALID_ARGUMENT);
  FUZZ_CHECK(rlmem_runtime_is_open(ordinal) == 0);
  FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_open_fake(ordinal, total, page, &options, error); }) == RLMEM_OK);
  // What a pause could ever back up (the fake device is far below half of any host's memory).
  std::uint64_t host_buffers_limit = options.capacity_bytes != 0 ? options.capacity_bytes : total;

  rlmem::fake_device_options device;
  device.total_bytes = total;
  device.granularity = page;
  rlmem::rlmem_policy_options policy;
  policy.capacity_bytes = options.capacity_bytes;
  policy.release_free_pages = options.release_free_pages != 0;
  policy.reservation_bytes = options.reservation_bytes != 0 ? options.reservation_bytes : total;
  policy.keep_segment_events = false;  // as the runtime runs it
  model expected(device, policy, options.copy_chunk_bytes);

  for (std::size_t operation = 0; operation < max_operations && !in.empty(); ++operation) {
    switch (in.byte() % 20) {
      case 0:
      case 1:
      case 2:
      case 3: allocate(expected, in); break;
      case 4:
      case 5: free_block(expected, in, false); break;
      case 6: free_block(expected, in, true); break;
      case 7: enter_region(expected, in); break;
      case 8: leave_region(expected); break;
      case 9: pause(expected, in); break;
      case 10: resume(expected, in); break;
      case 11:
        FUZZ_CHECK(checked([&](char** error) { return rlmem_runtime_empty_cache(ordinal, error); }) == RLMEM_OK);
        expected.empty_cache();
        break;
      case 12: reserve_growable(expected, in, total); break;
      case 13: grow(expected, in, total); break;
      case 14: release_growable(expected, in); break;
      case 15:
      case 16: write(expected, in); break;
      case 17: read_back(expected, in); break;
      case 18: access_unmapped(in); break;
      default: other_calls(expected, in, host_buffers_limit); break;
    }
    check_statistics(expected);
  }
  FUZZ_CHECK(rlmem_runtime_close(ordinal) == RLMEM_OK);
  return 0;
}
