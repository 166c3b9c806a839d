// SPDX-License-Identifier: MIT
// Torch's trace entries by a direct path: the pickle machine's EMPTY_DICT hands each entry here
// first, read from its bytes or from the entry scanner's note on it, and takes it back on the
// general path when the shortcut declines (see pickle_machine::read_trace_entry).

#include "pickle_machine_impl.hpp"

#include <cstdint>
#include <span>

namespace rlmem::detail {

namespace {

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

}  // namespace

// The memo opcode storing the value just read, when one comes next: appends `code` under the
// general path's rules (the next index, within the limit) and sets `index`; declines what the
// general path would handle differently (an index out of order, the memo's growth to pay for).
const std::byte* pickle_machine::shortcut_memo(const std::byte* at, const std::byte* end, std::uint32_t code, std::size_t& index) {
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
[[gnu::always_inline]] inline const std::byte* pickle_machine::shortcut_scalar(const std::byte* at, const std::byte* end, value& out) {
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
const std::byte* pickle_machine::shortcut_frames(const std::byte* at, const std::byte* end, std::size_t& list_memo) {
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
pickle_machine::shortcut pickle_machine::read_trace_entry() {
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
pickle_machine::shortcut pickle_machine::commit_trace_entry(std::size_t count, std::size_t frames_at, std::size_t entry_memo,
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
const std::uint64_t* pickle_machine::note_at(std::uint64_t offset) {
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
bool pickle_machine::append_memo(std::uint32_t code, std::size_t& index) {
  if (memo_.size() >= limits_.max_memo_entries || memo_.size() == memo_.capacity() || code == memo_table::escaped) {
    return false;
  }
  index = memo_.size();
  memo_.append_code(code);
  return true;
}

// A noted frame list, read as shortcut_frames reads its bytes.
bool pickle_machine::noted_frames(std::uint64_t frames, std::uint64_t run_name, const std::byte* entry, std::size_t& list_memo) {
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
pickle_machine::shortcut pickle_machine::read_noted_entry(const std::uint64_t* note) {
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
}  // namespace rlmem::detail
