// SPDX-License-Identifier: MIT
#pragma once
// The restricted pickle machine's state: a value stack, a mark stack and a memo, nothing
// executable, and what the trace-entry shortcut keeps between entries. pickle_machine.cpp runs
// the opcodes; trace_entry_shortcut.cpp reads torch's trace entries by a direct path.

#include "byte_source.hpp"
#include "entry_scanner.hpp"
#include "memo_table.hpp"
#include "page_prefaulter.hpp"
#include "pickle_machine.hpp"
#include "pickle_opcodes.hpp"
#include "recent_stacks.hpp"
#include "snapshot_builder.hpp"
#include "value.hpp"
#include "value_stack.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace rlmem::detail {

class pickle_machine {
 public:
  pickle_machine(input_window& input, const read_limits& limits, snapshot_builder& builder, error& failure,
                 std::uint64_t size_hint, bool trace_entry_shortcut, bool prefault)
      : in_(input), limits_(limits), builder_(builder), failure_(failure), stack_(limits.max_stack_values, until_poll_),
        shortcut_enabled_(trace_entry_shortcut) {
    // Torch's pickles memoize one value per 35 to 55 bytes; reserving avoids regrowth copies.
    // The hint is capped: a sparse file's size is no promise of content.
    std::uint64_t hinted = std::min<std::uint64_t>(size_hint, std::uint64_t{1} << 30) / 24;
    memo_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(hinted, limits.max_memo_entries)));
    builder_.track_memo(memo_);
    builder_.set_budget(limits, input);
    builder_.poll_on_budget(&until_poll_);
    if (prefault) {
      try {
        prefaulter_ = std::make_unique<page_prefaulter>();
        publish_to_prefaulter();
      } catch (...) {  // no memory for it: the parse takes its own page faults
        prefaulter_.reset();
      }
    }
  }

  ~pickle_machine() { builder_.poll_on_budget(nullptr); }
  pickle_machine(const pickle_machine&) = delete;
  pickle_machine& operator=(const pickle_machine&) = delete;

  bool run(value& root, const std::function<void()>& on_progress);

 private:
  bool fail(errc code, std::string detail, std::uint64_t offset) {
    failure_ = {code, offset, std::move(detail)};
    return false;
  }
  bool fail_here(errc code, std::string detail) { return fail(code, std::move(detail), opcode_offset_); }
  // Every 2^16 opcodes, and at once when the stack or the builder's budget goes over its limit.
  bool poll(const std::function<void()>& on_progress) {
    until_poll_ = 1u << 16;
    if (prefaulter_) publish_to_prefaulter();
    if (stack_.over_limit()) {
      return fail_here(errc::limit_stack_values, "more than " + std::to_string(limits_.max_stack_values) +
                                                     " values (read_limits::max_stack_values)");
    }
    if (const error* over = builder_.budget_failure()) {
      failure_ = *over;
      return false;
    }
    if (on_progress) on_progress();
    return true;
  }
  // Builder errors carry no offset: they belong to the opcode being run.
  bool builder_failed() {
    failure_.offset = opcode_offset_;
    return false;
  }

  // Reads `count` argument bytes, or fails with TRUNCATED (or the window's own error).
  [[gnu::always_inline]] const std::byte* argument(std::size_t count) {
    if (!in_.ensure(count)) [[unlikely]] {
      if (in_.failure().code != errc::ok) {
        failure_ = in_.failure();
      } else {
        fail(errc::truncated, std::string("inside ") + std::string(opcode_name(current_)), in_.offset());
      }
      return nullptr;
    }
    const std::byte* at = in_.cursor();
    in_.advance(count);
    return at;
  }
  // Peephole for the pickler's most common pairs: when the next opcode is `op`, consume it
  // now and return true. Saves a dispatch, the costliest part of the loop.
  [[gnu::always_inline]] bool take_next(unsigned char op) {
    if (!in_.ensure(1) || std::to_integer<unsigned char>(*in_.cursor()) != op) return false;
    opcode_offset_ = in_.offset();
    current_ = op;
    in_.advance(1);
    return true;
  }
  // The pickler memoizes every string and container right after pushing it.
  [[gnu::always_inline]] bool memoize_if_next() {
    return !take_next(MEMOIZE) || memo_put(memo_.size() + sparse_memo_.size());
  }
  std::size_t frame_base() const { return marks_.empty() ? 0 : marks_.back(); }
  bool need(std::size_t count) {
    if (stack_.size() - frame_base() >= count) return true;
    return fail_here(errc::stack_underflow, std::string(opcode_name(current_)) + " needs " +
                                                std::to_string(count) + " value(s)");
  }
  bool pop_mark(std::size_t& mark) {
    if (marks_.empty()) return fail_here(errc::missing_mark, std::string(opcode_name(current_)));
    mark = marks_.back();
    marks_.pop_back();
    return true;
  }
  bool consume_range(std::size_t from) {
    for (std::size_t i = from; i < stack_.size(); ++i) {
      if (!builder_.consume(stack_[i], failure_)) return builder_failed();
    }
    return true;
  }
  bool push_string(std::size_t length, bool is_bytes) {
    if (length > limits_.max_string_bytes) {
      return fail_here(errc::limit_string_bytes, std::to_string(length) + " bytes");
    }
    const std::byte* at = argument(length);
    if (at == nullptr) return false;
    stack_.push_back(builder_.make_string({reinterpret_cast<const char*>(at), length}, is_bytes));
    return true;
  }
  // LONG1/LONG4: little-endian two's complement. Values up to 2**64 - 1 are kept (torch writes
  // 2**64 - 1 as an unknown line number) as their 64-bit pattern; wider ones are refused.
  bool push_long(std::size_t width) {
    if (width > 16) return fail_here(errc::limit_integer_width, std::to_string(width) + "-byte integer");
    const std::byte* at = argument(width);
    if (at == nullptr) return false;
    auto byte_at = [&](std::size_t i) { return std::to_integer<unsigned>(at[i]); };
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < width && i < 8; ++i) raw |= std::uint64_t{byte_at(i)} << (8 * i);
    bool negative = width > 0 && (byte_at(width - 1) & 0x80) != 0;
    if (width < 8 && negative) raw |= ~std::uint64_t{0} << (8 * width);
    for (std::size_t i = 8; i < width; ++i) {
      bool sign_extension = negative ? byte_at(i) == 0xff && (raw >> 63) != 0 : byte_at(i) == 0;
      if (!sign_extension) return fail_here(errc::limit_integer_width, std::to_string(width) + "-byte integer");
    }
    stack_.push_back(builder_.make_integer(static_cast<std::int64_t>(raw)));
    return true;
  }
  bool memo_put(std::uint64_t index) {
    if (!need(1)) return false;
    value item = stack_.back();
    if (index <= memo_.size()) {
      if (index == memo_.size()) {
        if (memo_.size() >= limits_.max_memo_entries) return fail_here(errc::limit_memo_entries, std::to_string(memo_.size()));
        // The memo is paid for as it grows (a doubling of 4-byte codes), not per entry.
        if (memo_.size() == memo_.capacity() && !builder_.charge(std::max<std::size_t>(memo_.capacity(), 2048) / 2, "memo entries")) {
          failure_ = *builder_.budget_failure();
          return false;
        }
      }
      // An entry changes under runs recent_stacks knows: forget them all (never in torch's pickles).
      if (index < memo_.size()) {
        stacks_seen_.clear();
        known_keys_count_ = 0;
        known_runs_.fill({});
      }
      std::uint32_t code = builder_.memo_code(item, index);
      // An escaped entry keeps its full value in a hash node: key, value, next, hash.
      if (code == memo_table::escaped && !builder_.charge(4, "memo entries")) {
        failure_ = *builder_.budget_failure();
        return false;
      }
      memo_.store(static_cast<std::size_t>(index), code, item);
    } else {
      // Python's pickler numbers memo entries in order; anything else goes in a side table.
      if (sparse_memo_.size() >= limits_.max_memo_entries) return fail_here(errc::limit_memo_entries, std::to_string(index));
      auto [entry, inserted] = sparse_memo_.try_emplace(index, item);
      if (!inserted) {
        entry->second = item;
      } else if (!builder_.charge(4, "memo entries")) {  // a hash node: key, value, next, hash
        failure_ = *builder_.budget_failure();
        return false;
      }
    }
    return true;
  }
  [[gnu::always_inline]] bool memo_get(std::uint64_t index) {
    if (index < memo_.size()) [[likely]] {
      std::uint32_t code = memo_.code(static_cast<std::size_t>(index));
      switch (memo_table::kind_of(code)) {
        case vkind::string:
        case vkind::frame:
        case vkind::stack: stack_.push_back(value::make(memo_table::kind_of(code), memo_table::payload_of(code))); return true;
        case vkind::object: {
          value copy = builder_.object_in_slot(memo_table::payload_of(code));
          builder_.note_copied(copy);
          stack_.push_back(copy);
          return true;
        }
        case vkind::container: return push_memoized(memo_.escaped_value(static_cast<std::size_t>(index)));
        default: return push_memoized(value::make(memo_table::kind_of(code), memo_table::payload_of(code)));
      }
    }
    auto found = sparse_memo_.find(index);
    if (found == sparse_memo_.end()) return fail_here(errc::bad_memo_reference, "memo index " + std::to_string(index));
    return push_memoized(found->second);
  }
  // A trace entry is read once: referencing it again would let a small file list it millions
  // of times over.
  bool push_memoized(value item) {
    if (item.kind() == vkind::event) return fail_here(errc::container_reused, "a trace entry referenced twice");
    builder_.note_copied(item);
    stack_.push_back(item);
    return true;
  }
  bool fill_from_mark(container_type type) {
    std::size_t mark = 0;
    if (!pop_mark(mark)) return false;
    if (!consume_range(mark)) return false;
    std::span<const value> items(stack_.data() + mark, stack_.size() - mark);
    if (type == container_type::dict && items.size() % 2 != 0) return fail_here(errc::type_mismatch, "DICT with an odd number of items");
    value made = builder_.make_filled(type, items);
    stack_.resize(mark);
    stack_.push_back(made);
    return true;
  }
  bool extend_from_mark(bool pairs) {
    std::size_t mark = 0;
    if (!pop_mark(mark)) return false;
    if (mark == 0 || mark - 1 < frame_base()) return fail_here(errc::stack_underflow, std::string(opcode_name(current_)) + " has no target");
    if (pairs && (stack_.size() - mark) % 2 != 0) return fail_here(errc::type_mismatch, "SETITEMS with an odd number of items");
    if (!consume_range(mark)) return false;
    if (!builder_.extend(stack_[mark - 1], {stack_.data() + mark, stack_.size() - mark}, failure_)) return builder_failed();
    stack_.resize(mark);
    return true;
  }
  bool extend_top(std::size_t count) {
    if (!need(count + 1)) return false;
    if (!consume_range(stack_.size() - count)) return false;
    value& target = stack_[stack_.size() - count - 1];
    if (!builder_.extend(target, {stack_.data() + stack_.size() - count, count}, failure_)) return builder_failed();
    stack_.resize(stack_.size() - count);
    return true;
  }
  bool make_tuple(std::size_t count) {
    if (!need(count)) return false;
    std::size_t from = stack_.size() - count;
    if (!consume_range(from)) return false;
    value made = builder_.make_filled(container_type::tuple, {stack_.data() + from, count});
    stack_.resize(from);
    stack_.push_back(made);
    return true;
  }

  // Trace entries by a direct path. Torch writes millions of them the same way: EMPTY_DICT, a
  // memo entry, MARK, keys and scalar values (memo references, small ints, short strings) and
  // one list of memoized frames, SETITEMS. Reading such an entry straight into its record skips
  // the value stack, the container slots and a dispatch per opcode. The shortcut reads only
  // bytes already in the window and commits at the SETITEMS; before that its only effects are
  // memo entries it appended (dropped again) and strings it interned (the general path interns
  // the same strings in the same order), so on anything else it declines and the general path
  // reads the entry from its first byte, to the same result.
  enum class shortcut { taken, declined, failed };
  static constexpr std::size_t shortcut_window = 4096;
  static constexpr std::size_t max_shortcut_values = 32;  // keys and values of one entry
  static constexpr std::size_t max_shortcut_frames = 1000;  // the pickler's APPENDS batch

  shortcut read_trace_entry();
  // The same for an entry the entry scanner left a note on: the note says where each key and
  // value lies and what it is, so the bytes are not walked again here.
  shortcut read_noted_entry(const std::uint64_t* note);
  const std::uint64_t* note_at(std::uint64_t offset);
  bool noted_frames(std::uint64_t frames, std::uint64_t run_name, const std::byte* entry, std::size_t& list_memo);
  bool append_memo(std::uint32_t code, std::size_t& index);
  // Appends the frame memo entry `index` holds to the shortcut's frame list; false (decline)
  // when it holds no frame or the list is full. Both paths read frame references through it.
  bool take_frame(std::uint64_t index) {
    constexpr std::uint32_t frame_kind = std::uint32_t{static_cast<std::uint8_t>(vkind::frame)} << memo_table::payload_bits;
    if (index >= memo_.size() || shortcut_frame_count_ == max_shortcut_frames) return false;
    std::uint32_t code = memo_.code(static_cast<std::size_t>(index));
    if ((code & ~(memo_table::payload_limit - 1)) != frame_kind) return false;
    shortcut_frames_[shortcut_frame_count_++] = value::make(vkind::frame, memo_table::payload_of(code));
    return true;
  }
  // Declines an entry, dropping the memo entries appended for it since the memo had `size`.
  shortcut decline_since(std::size_t size) {
    memo_.truncate(size);
    return shortcut::declined;
  }
  shortcut commit_trace_entry(std::size_t count, std::size_t frames_at, std::size_t entry_memo, std::size_t list_memo,
                              std::size_t setitems);
  // Each takes the cursor by value and returns it moved past what it read, or null to decline:
  // a cursor passed by reference lived in memory, a store and a load per scalar.
  const std::byte* shortcut_memo(const std::byte* at, const std::byte* end, std::uint32_t code, std::size_t& index);
  const std::byte* shortcut_scalar(const std::byte* at, const std::byte* end, value& out);
  const std::byte* shortcut_frames(const std::byte* at, const std::byte* end, std::size_t& list_memo);

  input_window& in_;
  const read_limits& limits_;
  snapshot_builder& builder_;
  error& failure_;
  std::uint32_t until_poll_ = 1u << 16;
  value_stack stack_;
  std::vector<std::size_t> marks_;
  memo_table memo_;
  std::unordered_map<std::uint64_t, value> sparse_memo_;
  std::uint64_t opcode_offset_ = 0;
  unsigned char current_ = 0;
  bool shortcut_enabled_;
  std::array<value, max_shortcut_values> shortcut_values_;
  std::array<value, max_shortcut_frames> shortcut_frames_;
  std::size_t shortcut_frame_count_ = 0;
  recent_stacks stacks_seen_;
  // The frame list being read by the shortcut: its run of memo references, and its stack
  // when recent_stacks knew the run (then shortcut_frames_ is not filled).
  std::span<const std::byte> shortcut_run_;
  value shortcut_cached_stack_;
  std::uint64_t shortcut_run_hash_ = 0;
  // The keys of the last entry read from a note, when all were memo references to strings: the
  // item words naming them and the strings. Torch writes the same keys in the same order entry
  // after entry, so a note with the same words has the same keys, while no memo entry is
  // overwritten (memo_put forgets them then) and the memo never drops below an entry read.
  std::array<std::uint64_t, max_shortcut_values / 2> known_key_words_{};
  std::array<value, max_shortcut_values / 2> known_keys_{};
  std::size_t known_keys_count_ = 0;  // items of the entry they came from; 0: none known
  // The stacks of frame runs notes named (entry_note's run names), by the scanner's slot: a
  // name the slot holds is the same bytes, so the same stack while no memo entry is
  // overwritten (memo_put forgets them all then). noted_run_ is the name of the run being read
  // when its stack is not known yet (0 otherwise), for commit_trace_entry to keep.
  struct known_run {
    std::uint64_t name = 0;
    value stack;
  };
  std::array<known_run, entry_note::run_slots> known_runs_{};
  std::uint64_t noted_run_ = 0;
  // Where the next note may be among the window's notes (words), and which notes those are.
  std::size_t next_note_ = 0;
  std::uint64_t notes_serial_ = UINT64_MAX;
  // Large inputs: page faults of the trace entries and the memo taken on a second core.
  std::unique_ptr<page_prefaulter> prefaulter_;
  std::uint32_t until_prefault_publish_ = 0;
  void publish_to_prefaulter() {
    until_prefault_publish_ = 256;
    prefaulter_->publish(0, builder_.events_data(), builder_.events_size() * sizeof(trace_event),
                         builder_.events_capacity() * sizeof(trace_event));
    prefaulter_->publish(1, memo_.data(), memo_.size() * sizeof(std::uint32_t), memo_.capacity() * sizeof(std::uint32_t));
  }
};

}  // namespace rlmem::detail
