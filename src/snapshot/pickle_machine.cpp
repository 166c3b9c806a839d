// SPDX-License-Identifier: MIT
// The restricted pickle machine: a value stack, a mark stack and a memo, nothing executable.

#include "pickle_machine.hpp"

#include "entry_scanner.hpp"
#include "page_prefaulter.hpp"
#include "pickle_opcodes.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace rlmem::detail {

namespace {

// The machine's value stack: a vector whose push is always inlined (about 60% of opcodes push),
// with growth kept out of the hot path. Its limit is checked only when it grows: a push past
// the limit raises `over_limit()` and asks the machine to look at the next opcode boundary.
class value_stack {
 public:
  value_stack(std::uint64_t max_values, std::uint32_t& poll_countdown)
      : max_values_(max_values), poll_countdown_(poll_countdown) {}

  [[gnu::always_inline]] void push_back(value item) {
    if (size_ == capacity_) [[unlikely]] grow();
    data_[size_++] = item;
  }
  value& back() { return data_[size_ - 1]; }
  void pop_back() { --size_; }
  std::size_t size() const { return size_; }
  void resize(std::size_t size) { size_ = size; }  // only ever shrinks
  value* data() { return data_.get(); }
  value& operator[](std::size_t index) { return data_[index]; }
  bool over_limit() const { return over_limit_; }

 private:
  [[gnu::noinline]] void grow() {
    if (size_ >= max_values_) {
      poll_countdown_ = 1;  // the machine fails at the next opcode boundary
      if (over_limit_) {
        // Only pushes run until then (a run of LONG_BINGET): overwrite the top, allocate nothing.
        --size_;
        return;
      }
      over_limit_ = true;
    }
    std::size_t capacity = capacity_ == 0 ? 4096 : capacity_ * 2;
    if (capacity_ < max_values_ && capacity > max_values_) capacity = static_cast<std::size_t>(max_values_);
    auto bigger = std::make_unique<value[]>(capacity);
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_ * sizeof(value));
    data_ = std::move(bigger);
    capacity_ = capacity;
  }
  std::unique_ptr<value[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::uint64_t max_values_;
  std::uint32_t& poll_countdown_;
  bool over_limit_ = false;
};

// The stacks of recent frame lists, by the bytes of their run of LONG_BINGET and BINGET (the
// memo references between MARK and APPENDS). Torch writes a
// few thousand distinct stacks millions of times, each as the same run of memo references to
// the same frames, so the bytes name the stack: a hit skips a memo lookup per frame and the
// stack's interning. That holds while the memo entries the run names keep their frames; the
// pickle machine clears the cache whenever an existing memo entry is overwritten (Python's
// pickler never does, but any pickle may). Entries are checked byte for byte, never by hash
// alone. Memory is bounded: `slots` entries and at most `arena_limit` bytes of runs.
class recent_stacks {
 public:
  static constexpr std::size_t slots = 1024;
  static constexpr std::size_t max_run_bytes = max_frame_run_bytes;
  static constexpr std::size_t arena_limit = std::size_t{1} << 20;

  // The stack of `run`, or a value of kind none when it is not known.
  [[gnu::always_inline]] value find(std::span<const std::byte> run, std::uint64_t hash) const {
    const slot& at = slots_[hash % slots];
    if (at.hash != hash || at.length != run.size() || at.length == 0) return value::make(vkind::none, 0);
    if (std::memcmp(arena_.data() + at.offset, run.data(), run.size()) != 0) return value::make(vkind::none, 0);
    return at.stack;
  }
  void remember(std::span<const std::byte> run, std::uint64_t hash, value stack) {
    if (run.empty() || run.size() > max_run_bytes) return;
    if (arena_.size() + run.size() > arena_limit) clear();
    if (arena_.capacity() == 0) arena_.reserve(arena_limit);
    slot& at = slots_[hash % slots];
    at = {hash, static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(run.size()), stack};
    arena_.insert(arena_.end(), run.begin(), run.end());
  }
  void clear() {
    slots_.fill({});
    arena_.clear();
  }
 private:
  struct slot {
    std::uint64_t hash = 0;
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
    value stack;
  };
  std::array<slot, slots> slots_{};
  std::vector<std::byte> arena_;
};

class machine {
 public:
  machine(input_window& input, const read_limits& limits, snapshot_builder& builder, error& failure,
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

  ~machine() { builder_.poll_on_budget(nullptr); }
  machine(const machine&) = delete;
  machine& operator=(const machine&) = delete;

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

// The value of a memo entry the shortcut takes as it is: a scalar or a record the general path
// would push unchanged; false for containers, trace entries, escaped and pending entries.
[[gnu::always_inline]] inline bool shortcut_memo_value(std::uint32_t code, value& out) {
  switch (memo_table::kind_of(code)) {
    case vkind::none: case vkind::boolean: case vkind::integer: case vkind::big_integer: case vkind::real:
    case vkind::string: case vkind::bytes: case vkind::empty_list: case vkind::frame: case vkind::stack:
      out = value::make(memo_table::kind_of(code), memo_table::payload_of(code));
      return true;
    default:
      return false;
  }
}

// An integer the value holds in line, as snapshot_builder::make_integer makes it, without the
// call (the shortcut reads three or four per entry).
[[gnu::always_inline]] inline value small_integer(std::int64_t number) {
  static_assert(std::int64_t{INT32_MIN} >= value::inline_min && std::int64_t{INT32_MAX} <= value::inline_max);
  return value::make(vkind::integer, static_cast<std::uint64_t>(number));
}

// The memo opcode storing the value just read, when one comes next: appends `code` under the
// general path's rules (the next index, within the limit) and sets `index`; declines what the
// general path would handle differently (an index out of order, the memo's growth to pay for).
const std::byte* machine::shortcut_memo(const std::byte* at, const std::byte* end, std::uint32_t code, std::size_t& index) {
  index = SIZE_MAX;
  if (at == end) return at;
  auto op = std::to_integer<unsigned char>(*at);
  std::uint64_t wanted = 0;
  std::size_t length = 1;
  if (op == MEMOIZE) {
    wanted = memo_.size();
  } else if (op == BINPUT && end - at >= 2) {
    wanted = std::to_integer<std::uint64_t>(at[1]);
    length = 2;
  } else if (op == LONG_BINPUT && end - at >= 5) {
    wanted = load_le<std::uint32_t>(at + 1);
    length = 5;
  } else {
    return op != BINPUT && op != LONG_BINPUT ? at : nullptr;  // no memo opcode: nothing to store
  }
  if (wanted != memo_.size() || !append_memo(code, index)) return nullptr;
  return at + length;
}

// One key or scalar value: a memo reference to a scalar or a record the general path would
// push as is, a small int, None, a bool, or a string (with its memo entry).
[[gnu::always_inline]] inline const std::byte* machine::shortcut_scalar(const std::byte* at, const std::byte* end, value& out) {
  if (at == end) return nullptr;
  auto left = static_cast<std::size_t>(end - at);
  switch (std::to_integer<unsigned char>(*at)) {
    case BINGET:
    case LONG_BINGET: {
      std::size_t width = *at == std::byte{BINGET} ? 1 : 4;
      if (left <= width) return nullptr;
      std::uint64_t index = width == 1 ? std::to_integer<std::uint64_t>(at[1]) : load_le<std::uint32_t>(at + 1);
      if (index >= memo_.size() || !shortcut_memo_value(memo_.code(static_cast<std::size_t>(index)), out)) return nullptr;
      return at + 1 + width;
    }
    case BININT1:
      if (left < 2) return nullptr;
      out = small_integer(std::to_integer<std::uint8_t>(at[1]));
      return at + 2;
    case BININT2:
      if (left < 3) return nullptr;
      out = small_integer(load_le<std::uint16_t>(at + 1));
      return at + 3;
    case BININT:
      if (left < 5) return nullptr;
      out = small_integer(load_le<std::int32_t>(at + 1));
      return at + 5;
    case LONG1: {
      if (left < 2) return nullptr;
      std::size_t width = std::to_integer<std::size_t>(at[1]);
      if (width == 0 || width > 8 || left < 2 + width) return nullptr;
      std::uint64_t raw = 0;
      if (left >= 10) {  // one load, its bytes past the integer masked off
        raw = load_le<std::uint64_t>(at + 2);
        if (width < 8) raw &= (std::uint64_t{1} << (8 * width)) - 1;
      } else {
        for (std::size_t i = 0; i < width; ++i) raw |= std::to_integer<std::uint64_t>(at[2 + i]) << (8 * i);
      }
      if (width < 8 && (std::to_integer<unsigned>(at[1 + width]) & 0x80) != 0) raw |= ~std::uint64_t{0} << (8 * width);
      auto number = static_cast<std::int64_t>(raw);
      if (number < value::inline_min || number > value::inline_max) return nullptr;  // wide ones take a table entry
      out = small_integer(number);
      return at + 2 + width;
    }
    case NONE: out = value::make(vkind::none, 0); return at + 1;
    case NEWTRUE: out = value::make(vkind::boolean, 1); return at + 1;
    case NEWFALSE: out = value::make(vkind::boolean, 0); return at + 1;
    case SHORT_BINUNICODE:
    case BINUNICODE: {
      std::size_t header = *at == std::byte{SHORT_BINUNICODE} ? 2 : 5;
      if (left < header) return nullptr;
      std::size_t length = header == 2 ? std::to_integer<std::size_t>(at[1]) : load_le<std::uint32_t>(at + 1);
      if (length > limits_.max_string_bytes || left - header < length) return nullptr;
      out = builder_.make_string({reinterpret_cast<const char*>(at + header), length}, false);
      std::size_t index = 0;
      return shortcut_memo(at + header + length, end, memo_table::code_for(out), index);
    }
    default:
      return nullptr;
  }
}

// An entry's frame list: EMPTY_LIST and its memo entry, then MARK, memoized frames and
// APPENDS, or one frame and APPEND, or nothing (an empty list).
const std::byte* machine::shortcut_frames(const std::byte* at, const std::byte* end, std::size_t& list_memo) {
  ++at;  // EMPTY_LIST
  if (!(at = shortcut_memo(at, end, memo_table::pending, list_memo))) return nullptr;
  shortcut_frame_count_ = 0;
  shortcut_run_ = {};
  noted_run_ = 0;
  shortcut_cached_stack_ = value::make(vkind::none, 0);
  if (at == end) return nullptr;
  value frame;
  if (*at == std::byte{MARK}) {
    ++at;
    // A run of LONG_BINGET and BINGET and its APPENDS, as torch writes a list of memoized
    // frames: when recent_stacks knows the run, its stack is known without reading the frames.
    std::uint64_t run_hash = 0;
    const std::byte* run_end = scan_frame_run(at, end, run_hash);
    if (run_end != at && run_end != end && *run_end == std::byte{APPENDS}) {
      shortcut_run_ = {at, static_cast<std::size_t>(run_end - at)};
      shortcut_run_hash_ = run_hash;
      shortcut_cached_stack_ = stacks_seen_.find(shortcut_run_, shortcut_run_hash_);
      if (shortcut_cached_stack_.kind() == vkind::stack) return run_end + 1;
    }
    // Runs of LONG_BINGET to frames are most of a snapshot's bytes: read them in line.
    while (end - at >= 5 && *at == std::byte{LONG_BINGET}) {
      if (!take_frame(load_le<std::uint32_t>(at + 1))) return nullptr;
      at += 5;
    }
    while (at != end && *at != std::byte{APPENDS}) {
      if (shortcut_frame_count_ == max_shortcut_frames) return nullptr;
      if (!(at = shortcut_scalar(at, end, frame)) || frame.kind() != vkind::frame) return nullptr;
      shortcut_frames_[shortcut_frame_count_++] = frame;
    }
    if (at == end || shortcut_frame_count_ == 0) return nullptr;
    ++at;
  } else if (*at == std::byte{BINGET} || *at == std::byte{LONG_BINGET}) {
    if (!(at = shortcut_scalar(at, end, frame)) || frame.kind() != vkind::frame) return nullptr;
    if (at == end || *at != std::byte{APPEND}) return nullptr;
    ++at;
    shortcut_frames_[shortcut_frame_count_++] = frame;
  }
  return at;
}

// Called with the cursor right after an EMPTY_DICT.
machine::shortcut machine::read_trace_entry() {
  if (!sparse_memo_.empty()) return shortcut::declined;
  if (in_.available() < shortcut_window && !in_.ensure(shortcut_window) && in_.failure().code != errc::ok) {
    return shortcut::declined;  // the general path meets the error where it lies
  }
  const std::byte* start = in_.cursor();
  const std::byte* end = start + in_.available();
  const std::byte* at = start;
  auto decline = [this, memo_before = memo_.size()] { return decline_since(memo_before); };
  std::size_t entry_memo = SIZE_MAX;
  std::size_t list_memo = SIZE_MAX;
  if (!(at = shortcut_memo(at, end, memo_table::pending, entry_memo))) return decline();
  if (at == end || *at != std::byte{MARK}) return decline();
  ++at;
  std::size_t count = 0;
  std::size_t frames_at = SIZE_MAX;
  while (at != end && *at != std::byte{SETITEMS}) {
    if (count == max_shortcut_values) return decline();
    if (count % 2 == 1 && *at == std::byte{EMPTY_LIST} && frames_at == SIZE_MAX) {
      if (!(at = shortcut_frames(at, end, list_memo))) return decline();
      frames_at = count++;
      continue;
    }
    // Keys are memo references to strings: tested for first, without the scalar dispatch.
    if (count % 2 == 0 && end - at > 4) {
      std::uint64_t index = SIZE_MAX;
      std::size_t length = 0;
      if (*at == std::byte{LONG_BINGET}) {
        index = load_le<std::uint32_t>(at + 1);
        length = 5;
      } else if (*at == std::byte{BINGET}) {
        index = std::to_integer<std::uint64_t>(at[1]);
        length = 2;
      }
      if (index < memo_.size()) {
        std::uint32_t code = memo_.code(static_cast<std::size_t>(index));
        if (memo_table::kind_of(code) == vkind::string) {
          shortcut_values_[count++] = value::make(vkind::string, memo_table::payload_of(code));
          at += length;
          continue;
        }
      }
    }
    if (!(at = shortcut_scalar(at, end, shortcut_values_[count]))) return decline();
    ++count;
  }
  if (at == end || count % 2 != 0) return decline();
  if (!builder_.is_trace_entry({shortcut_values_.data(), count})) return decline();
  return commit_trace_entry(count, frames_at, entry_memo, list_memo, static_cast<std::size_t>(at - start));
}

// What the general path does at the entry's SETITEMS, `setitems` bytes past the cursor, when
// it seals the entry: the frame list becomes a stack, the entry a record, and both take the
// memo entries reserved for them.
machine::shortcut machine::commit_trace_entry(std::size_t count, std::size_t frames_at, std::size_t entry_memo,
                                              std::size_t list_memo, std::size_t setitems) {
  std::span<const value> pairs(shortcut_values_.data(), count);
  opcode_offset_ = in_.offset() + setitems;
  if (frames_at != SIZE_MAX) {
    value list = value::make(vkind::empty_list, 0);
    if (shortcut_cached_stack_.kind() == vkind::stack) {
      list = shortcut_cached_stack_;
    } else if (shortcut_frame_count_ != 0) {
      list = builder_.make_stack({shortcut_frames_.data(), shortcut_frame_count_});
      // The frames were read from exactly the run's bytes: remember its stack.
      if (!shortcut_run_.empty()) stacks_seen_.remember(shortcut_run_, shortcut_run_hash_, list);
      if (noted_run_ != 0) known_runs_[entry_note::run_slot(noted_run_)] = {noted_run_, list};
    }
    shortcut_values_[frames_at] = list;
    if (list_memo != SIZE_MAX) memo_.store(list_memo, memo_table::code_for(list), list);
  }
  value entry;
  if (!builder_.make_event(pairs, entry, failure_)) {
    failure_.offset = opcode_offset_;
    return shortcut::failed;
  }
  if (entry_memo != SIZE_MAX) memo_.store(entry_memo, memo_table::code_for(entry), entry);
  in_.advance(setitems + 1);
  stack_.push_back(entry);
  if (prefaulter_ && --until_prefault_publish_ == 0) publish_to_prefaulter();
  return shortcut::taken;
}

// The note on the entry at stream `offset`, or null. Notes come in stream order and the
// machine's opcodes only move forward, so the search resumes where it stopped.
const std::uint64_t* machine::note_at(std::uint64_t offset) {
  std::span<const std::uint64_t> notes = in_.notes();
  if (in_.notes_serial() != notes_serial_) {
    notes_serial_ = in_.notes_serial();
    next_note_ = 0;
  }
  while (next_note_ < notes.size() && notes[next_note_] < offset) next_note_ += entry_note::words(&notes[next_note_]);
  if (next_note_ < notes.size() && notes[next_note_] == offset) {
    // Notes were written on another core: ask for them a few entries ahead. And the entry
    // after the next one often names a stack from far back in the memo: fetch it now.
    __builtin_prefetch(notes.data() + next_note_ + 128);
    std::size_t next = next_note_ + entry_note::words(&notes[next_note_]);
    if (next < notes.size()) next += entry_note::words(&notes[next]);
    if (next < notes.size()) {
      std::uint64_t far = entry_note::far_reference(&notes[next]);
      if (far != 0 && far <= memo_.size()) __builtin_prefetch(memo_.data() + far - 1);
    }
    return &notes[next_note_];
  }
  return nullptr;
}

// A memo entry appended for the shortcut; false for what the general path handles differently
// (the limit, the memo's growth to pay for, an entry that needs the side table).
bool machine::append_memo(std::uint32_t code, std::size_t& index) {
  if (memo_.size() >= limits_.max_memo_entries || memo_.size() == memo_.capacity() || code == memo_table::escaped) {
    return false;
  }
  index = memo_.size();
  memo_.append_code(code);
  return true;
}

// A noted frame list, read as shortcut_frames reads its bytes.
bool machine::noted_frames(std::uint64_t frames, std::uint64_t run_name, const std::byte* entry, std::size_t& list_memo) {
  if ((frames & entry_note::memoized_bit) != 0 && !append_memo(memo_table::pending, list_memo)) return false;
  shortcut_frame_count_ = 0;
  shortcut_run_ = {};
  noted_run_ = 0;
  shortcut_cached_stack_ = value::make(vkind::none, 0);
  switch (entry_note::form_of(frames)) {
    case entry_note::frames_form::empty: return true;
    case entry_note::frames_form::single: return take_frame(frames & 0xffffffffu);
    case entry_note::frames_form::run: {
      std::span<const std::byte> run(entry + entry_note::relative_of(frames), entry_note::length_of(frames));
      if ((frames & entry_note::whole_run_bit) != 0) {
        const known_run& known = known_runs_[entry_note::run_slot(run_name)];
        if (known.name == run_name) {
          shortcut_cached_stack_ = known.stack;
          return true;
        }
        noted_run_ = run_name;
      }
      // The scanner saw only LONG_BINGET and BINGET here.
      for (const std::byte* at = run.data(); at != run.data() + run.size();) {
        bool wide = *at == std::byte{LONG_BINGET};
        if (!take_frame(wide ? load_le<std::uint32_t>(at + 1) : std::to_integer<std::uint64_t>(at[1]))) return false;
        at += wide ? 5 : 2;
      }
      return true;
    }
  }
  return false;
}

// Called with the cursor right after the EMPTY_DICT the note is on. Every check of
// read_trace_entry that depends on the parse so far is made here, in the same order, so the
// result is the same as reading the bytes.
machine::shortcut machine::read_noted_entry(const std::uint64_t* note) {
  std::size_t bytes = entry_note::entry_bytes(note);
  if (!sparse_memo_.empty() || in_.available() + 1 < bytes) return shortcut::declined;
  const std::byte* entry = in_.cursor() - 1;
  auto decline = [this, memo_before = memo_.size()] { return decline_since(memo_before); };
  std::size_t entry_memo = SIZE_MAX;
  std::size_t list_memo = SIZE_MAX;
  if (entry_note::entry_memoized(note) && !append_memo(memo_table::pending, entry_memo)) return decline();
  std::size_t count = entry_note::item_count(note);
  unsigned frames_index = entry_note::frames_index(note);
  const std::uint64_t* items = note + 2;
  bool keys_known = count == known_keys_count_;
  bool keys_all_references = true;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t word = items[i];
    value& out = shortcut_values_[i];
    if (i % 2 == 0) {
      if (keys_known && word == known_key_words_[i / 2]) {
        out = known_keys_[i / 2];
        continue;
      }
      keys_known = false;
      keys_all_references = keys_all_references && entry_note::tag_of(word) == entry_note::tag::memo_reference;
    }
    switch (entry_note::tag_of(word)) {
      case entry_note::tag::memo_reference: {
        std::uint64_t index = entry_note::payload_of(word);
        if (index >= memo_.size() || !shortcut_memo_value(memo_.code(static_cast<std::size_t>(index)), out)) return decline();
        break;
      }
      case entry_note::tag::integer: out = value::make(vkind::integer, entry_note::payload_of(word)); break;
      case entry_note::tag::none: out = value::make(vkind::none, 0); break;
      case entry_note::tag::true_value: out = value::make(vkind::boolean, 1); break;
      case entry_note::tag::false_value: out = value::make(vkind::boolean, 0); break;
      case entry_note::tag::string: {
        std::size_t length = entry_note::length_of(word);
        if (length > limits_.max_string_bytes) return decline();
        out = builder_.make_string({reinterpret_cast<const char*>(entry + entry_note::relative_of(word)), length}, false);
        std::size_t index = 0;
        if ((word & entry_note::memoized_bit) != 0 && !append_memo(memo_table::code_for(out), index)) return decline();
        break;
      }
      case entry_note::tag::frames:
        // The run's name follows the items when the run is whole (and only then).
        if (!noted_frames(word, (word & entry_note::whole_run_bit) != 0 ? items[count] : 0, entry, list_memo)) return decline();
        break;
      default:
        return decline();
    }
  }
  if (!keys_known) {
    if (!builder_.is_trace_entry({shortcut_values_.data(), count})) return decline();
    known_keys_count_ = 0;
    if (keys_all_references) {
      for (std::size_t i = 0; i < count; i += 2) {
        known_key_words_[i / 2] = items[i];
        known_keys_[i / 2] = shortcut_values_[i];
      }
      known_keys_count_ = count;
    }
  }
  std::size_t frames_at = frames_index == entry_note::no_frames ? SIZE_MAX : frames_index;
  return commit_trace_entry(count, frames_at, entry_memo, list_memo, bytes - 2);
}

bool machine::run(value& root, const std::function<void()>& on_progress) {
  bool protocol_seen = false;
  for (;;) {
    if (--until_poll_ == 0 && !poll(on_progress)) return false;
    opcode_offset_ = in_.offset();
    if (!in_.ensure(1)) {
      if (in_.failure().code != errc::ok) {
        failure_ = in_.failure();
        return false;
      }
      return fail(errc::truncated, "input ends before STOP", opcode_offset_);
    }
    current_ = std::to_integer<unsigned char>(*in_.cursor());
    in_.advance(1);
    if (!protocol_seen && current_ != PROTO) return fail_here(errc::unknown_format, "a pickle starts with PROTO");
    const std::byte* at = nullptr;
    switch (current_) {
      case PROTO: {
        if (!(at = argument(1))) return false;
        unsigned version = std::to_integer<unsigned>(*at);
        if (version < 2 || version > 5) return fail_here(errc::unsupported_protocol, "protocol " + std::to_string(version));
        protocol_seen = true;
        break;
      }
      case FRAME:
        if (!argument(8)) return false;  // framing only groups opcodes; nothing to do
        break;
      case STOP: {
        if (!poll(on_progress) || !need(1)) return false;
        root = stack_.back();
        if (!builder_.consume(root, failure_)) return builder_failed();
        if (!in_.at_end()) {
          if (in_.failure().code != errc::ok) {
            failure_ = in_.failure();
            return false;
          }
          return fail(errc::trailing_data, "bytes follow STOP", in_.offset());
        }
        return true;
      }
      case MARK:
        if (marks_.size() >= limits_.max_depth) return fail_here(errc::limit_depth, std::to_string(marks_.size()) + " nested MARKs");
        marks_.push_back(stack_.size());
        break;
      case POP:
        if (stack_.size() > frame_base()) {
          stack_.pop_back();
        } else {
          std::size_t mark = 0;
          if (!pop_mark(mark)) return false;
        }
        break;
      case POP_MARK: {
        std::size_t mark = 0;
        if (!pop_mark(mark)) return false;
        stack_.resize(mark);
        break;
      }
      case DUP:
        if (!need(1)) return false;
        builder_.note_copied(stack_.back());
        stack_.push_back(stack_.back());
        break;
      case NONE: stack_.push_back(value::make(vkind::none, 0)); break;
      case NEWTRUE: stack_.push_back(value::make(vkind::boolean, 1)); break;
      case NEWFALSE: stack_.push_back(value::make(vkind::boolean, 0)); break;
      case BININT1:
        if (!(at = argument(1))) return false;
        stack_.push_back(builder_.make_integer(std::to_integer<std::uint8_t>(*at)));
        break;
      case BININT2:
        if (!(at = argument(2))) return false;
        stack_.push_back(builder_.make_integer(load_le<std::uint16_t>(at)));
        break;
      case BININT:
        if (!(at = argument(4))) return false;
        stack_.push_back(builder_.make_integer(load_le<std::int32_t>(at)));
        break;
      case LONG1:
        if (!(at = argument(1))) return false;
        if (!push_long(std::to_integer<std::size_t>(*at))) return false;
        break;
      case LONG4: {
        if (!(at = argument(4))) return false;
        std::int32_t width = load_le<std::int32_t>(at);
        if (width < 0) return fail_here(errc::invalid_value, "negative LONG4 length");
        if (!push_long(static_cast<std::size_t>(width))) return false;
        break;
      }
      case BINFLOAT: {
        if (!(at = argument(8))) return false;
        // BINFLOAT is big-endian.
        std::uint64_t raw = 0;
        for (int i = 0; i < 8; ++i) raw = (raw << 8) | std::to_integer<std::uint64_t>(at[i]);
        stack_.push_back(builder_.make_real(std::bit_cast<double>(raw)));
        break;
      }
      case SHORT_BINUNICODE:
      case SHORT_BINBYTES:
      case SHORT_BINSTRING:
        if (!(at = argument(1))) return false;
        if (!push_string(std::to_integer<std::size_t>(*at), current_ == SHORT_BINBYTES)) return false;
        if (!memoize_if_next()) return false;
        break;
      case BINUNICODE:
      case BINBYTES:
        if (!(at = argument(4))) return false;
        if (!push_string(load_le<std::uint32_t>(at), current_ == BINBYTES)) return false;
        if (!memoize_if_next()) return false;
        break;
      case BINSTRING: {
        if (!(at = argument(4))) return false;
        std::int32_t length = load_le<std::int32_t>(at);
        if (length < 0) return fail_here(errc::invalid_value, "negative BINSTRING length");
        if (!push_string(static_cast<std::size_t>(length), false)) return false;
        break;
      }
      case BINUNICODE8:
      case BINBYTES8:
      case BYTEARRAY8: {
        if (!(at = argument(8))) return false;
        std::uint64_t length = load_le<std::uint64_t>(at);
        if (length > limits_.max_string_bytes) return fail_here(errc::limit_string_bytes, std::to_string(length) + " bytes");
        if (!push_string(static_cast<std::size_t>(length), current_ != BINUNICODE8)) return false;
        break;
      }
      case EMPTY_LIST:
        stack_.push_back(builder_.new_container(container_type::list));
        if (!memoize_if_next()) return false;
        break;
      case EMPTY_DICT:
        if (shortcut_enabled_) {
          const std::uint64_t* note = in_.notes().empty() ? nullptr : note_at(opcode_offset_);
          shortcut outcome = note != nullptr ? read_noted_entry(note) : read_trace_entry();
          if (outcome == shortcut::failed) return false;
          if (outcome == shortcut::taken) break;
        }
        stack_.push_back(builder_.new_container(container_type::dict));
        if (!memoize_if_next()) return false;
        break;
      case EMPTY_SET: stack_.push_back(builder_.new_container(container_type::set)); break;
      case EMPTY_TUPLE: stack_.push_back(builder_.make_filled(container_type::tuple, {})); break;
      case TUPLE1: if (!make_tuple(1)) return false; break;
      case TUPLE2: if (!make_tuple(2)) return false; break;
      case TUPLE3: if (!make_tuple(3)) return false; break;
      case TUPLE: if (!fill_from_mark(container_type::tuple)) return false; break;
      case LIST: if (!fill_from_mark(container_type::list)) return false; break;
      case DICT: if (!fill_from_mark(container_type::dict)) return false; break;
      case FROZENSET: if (!fill_from_mark(container_type::set)) return false; break;
      case APPEND: if (!extend_top(1)) return false; break;
      case SETITEM: if (!extend_top(2)) return false; break;
      case APPENDS:
      case ADDITEMS:
        if (!extend_from_mark(false)) return false;
        break;
      case SETITEMS: if (!extend_from_mark(true)) return false; break;
      case MEMOIZE: if (!memo_put(memo_.size() + sparse_memo_.size())) return false; break;
      case BINPUT:
        if (!(at = argument(1))) return false;
        if (!memo_put(std::to_integer<std::uint64_t>(*at))) return false;
        break;
      case LONG_BINPUT:
        if (!(at = argument(4))) return false;
        if (!memo_put(load_le<std::uint32_t>(at))) return false;
        break;
      case BINGET:
        if (!(at = argument(1))) return false;
        if (!memo_get(std::to_integer<std::uint64_t>(*at))) return false;
        break;
      case LONG_BINGET:
        // Frame lists are long runs of LONG_BINGET: stay in this loop while they last.
        do {
          if (!(at = argument(4))) return false;
          if (!memo_get(load_le<std::uint32_t>(at))) return false;
        } while (take_next(LONG_BINGET));
        break;
      case GLOBAL: case STACK_GLOBAL: case REDUCE: case BUILD: case INST: case OBJ: case NEWOBJ:
      case NEWOBJ_EX: case EXT1: case EXT2: case EXT4: case PERSID: case BINPERSID:
        return fail_here(errc::forbidden_opcode,
                         std::string(opcode_name(current_)) + " would import or call code; refused");
      case FLOAT: case INT: case LONG: case STRING: case UNICODE: case GET: case PUT:
        return fail_here(errc::unsupported_opcode, std::string(opcode_name(current_)) + " (a protocol 0 text opcode)");
      case NEXT_BUFFER: case READONLY_BUFFER:
        return fail_here(errc::unsupported_opcode, std::string(opcode_name(current_)) + " (out-of-band buffer)");
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", current_);
        return fail_here(errc::invalid_opcode, std::string("byte ") + hex);
      }
    }
  }
}

}  // namespace

std::string_view opcode_name(unsigned char code) noexcept {
  switch (code) {
    case MARK: return "MARK"; case STOP: return "STOP"; case POP: return "POP"; case POP_MARK: return "POP_MARK";
    case DUP: return "DUP"; case FLOAT: return "FLOAT"; case INT: return "INT"; case BININT: return "BININT";
    case BININT1: return "BININT1"; case LONG: return "LONG"; case BININT2: return "BININT2"; case NONE: return "NONE";
    case PERSID: return "PERSID"; case BINPERSID: return "BINPERSID"; case REDUCE: return "REDUCE";
    case STRING: return "STRING"; case BINSTRING: return "BINSTRING"; case SHORT_BINSTRING: return "SHORT_BINSTRING";
    case UNICODE: return "UNICODE"; case BINUNICODE: return "BINUNICODE"; case APPEND: return "APPEND";
    case BUILD: return "BUILD"; case GLOBAL: return "GLOBAL"; case DICT: return "DICT"; case EMPTY_DICT: return "EMPTY_DICT";
    case APPENDS: return "APPENDS"; case GET: return "GET"; case BINGET: return "BINGET"; case INST: return "INST";
    case LONG_BINGET: return "LONG_BINGET"; case LIST: return "LIST"; case EMPTY_LIST: return "EMPTY_LIST";
    case OBJ: return "OBJ"; case PUT: return "PUT"; case BINPUT: return "BINPUT"; case LONG_BINPUT: return "LONG_BINPUT";
    case SETITEM: return "SETITEM"; case TUPLE: return "TUPLE"; case EMPTY_TUPLE: return "EMPTY_TUPLE";
    case SETITEMS: return "SETITEMS"; case BINFLOAT: return "BINFLOAT"; case PROTO: return "PROTO";
    case NEWOBJ: return "NEWOBJ"; case EXT1: return "EXT1"; case EXT2: return "EXT2"; case EXT4: return "EXT4";
    case TUPLE1: return "TUPLE1"; case TUPLE2: return "TUPLE2"; case TUPLE3: return "TUPLE3";
    case NEWTRUE: return "NEWTRUE"; case NEWFALSE: return "NEWFALSE"; case LONG1: return "LONG1"; case LONG4: return "LONG4";
    case BINBYTES: return "BINBYTES"; case SHORT_BINBYTES: return "SHORT_BINBYTES";
    case SHORT_BINUNICODE: return "SHORT_BINUNICODE"; case BINUNICODE8: return "BINUNICODE8";
    case BINBYTES8: return "BINBYTES8"; case EMPTY_SET: return "EMPTY_SET"; case ADDITEMS: return "ADDITEMS";
    case FROZENSET: return "FROZENSET"; case NEWOBJ_EX: return "NEWOBJ_EX"; case STACK_GLOBAL: return "STACK_GLOBAL";
    case MEMOIZE: return "MEMOIZE"; case FRAME: return "FRAME"; case BYTEARRAY8: return "BYTEARRAY8";
    case NEXT_BUFFER: return "NEXT_BUFFER"; case READONLY_BUFFER: return "READONLY_BUFFER";
    default: return {};
  }
}

bool run_pickle(input_window& input, const read_limits& limits, snapshot_builder& builder, value& root,
                error& failure, const std::function<void()>& on_progress, std::uint64_t size_hint,
                bool trace_entry_shortcut, std::uint64_t prefault_from_bytes) {
  builder.reserve_for_input(size_hint);
  machine vm(input, limits, builder, failure, size_hint, trace_entry_shortcut, size_hint >= prefault_from_bytes);
  return vm.run(root, on_progress);
}

}  // namespace rlmem::detail
