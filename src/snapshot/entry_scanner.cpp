// SPDX-License-Identifier: MIT
// Trace entries decoded on the read-ahead thread (see entry_scanner.hpp).

#include "entry_scanner.hpp"

#include "pickle_opcodes.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace rlmem::detail {

namespace {

constexpr std::size_t need_more = 0;        // the bytes given do not hold the opcode's header
constexpr std::size_t stop = SIZE_MAX;      // the machine stops here: nothing after it is read

// The bytes the opcode at `at` takes, argument included, from the `size` bytes there (at least
// one). Mirrors what the machine consumes; where it refuses an opcode, so does this (stop).
std::size_t opcode_bytes(const std::byte* at, std::size_t size) {
  auto header = [&](std::size_t bytes) { return size >= bytes; };
  auto sized = [&](std::size_t header_bytes, std::uint64_t length) -> std::size_t {
    if (length > (std::uint64_t{1} << 48)) return stop;  // far past every limit: refused anyway
    return header_bytes + static_cast<std::size_t>(length);
  };
  switch (std::to_integer<unsigned char>(*at)) {
    case MARK: case POP: case POP_MARK: case DUP: case NONE: case NEWTRUE: case NEWFALSE:
    case EMPTY_LIST: case EMPTY_DICT: case EMPTY_SET: case EMPTY_TUPLE: case TUPLE1: case TUPLE2:
    case TUPLE3: case TUPLE: case LIST: case DICT: case FROZENSET: case APPEND: case SETITEM:
    case APPENDS: case ADDITEMS: case SETITEMS: case MEMOIZE:
      return 1;
    case PROTO: case BININT1: case BINPUT: case BINGET: return header(2) ? 2 : need_more;
    case BININT2: return header(3) ? 3 : need_more;
    case BININT: case LONG_BINPUT: case LONG_BINGET: return header(5) ? 5 : need_more;
    case FRAME: case BINFLOAT: return header(9) ? 9 : need_more;
    case LONG1: case SHORT_BINUNICODE: case SHORT_BINBYTES: case SHORT_BINSTRING:
      return header(2) ? 2 + std::to_integer<std::size_t>(at[1]) : need_more;
    case BINUNICODE: case BINBYTES: return header(5) ? sized(5, load_le<std::uint32_t>(at + 1)) : need_more;
    case LONG4: case BINSTRING: {
      if (!header(5)) return need_more;
      std::int32_t length = load_le<std::int32_t>(at + 1);
      return length < 0 ? stop : sized(5, static_cast<std::uint64_t>(length));
    }
    case BINUNICODE8: case BINBYTES8: case BYTEARRAY8: return header(9) ? sized(9, load_le<std::uint64_t>(at + 1)) : need_more;
    default: return stop;  // STOP, refused and unknown opcodes
  }
}

// Reads one trace entry at `at` (its EMPTY_DICT) as the machine's shortcut would accept it,
// within `end`, into `notes`. Returns the entry's bytes, or 0 (and leaves `notes` as it was)
// when the bytes are anything else: the machine then reads them itself.
class note_writer {
 public:
  // `out`: room for entry_note::max_words.
  note_writer(const std::byte* entry, const std::byte* end, std::uint64_t* out, entry_scanner::frame_runs& runs)
      : entry_(entry), end_(std::min(end, entry + entry_note::max_entry_bytes)), start_(out), runs_(runs) {}

  // The entry's bytes, or 0 when there is no note to keep.
  std::size_t write(std::uint64_t offset) { return read_entry(offset); }
  std::size_t words() const { return words_; }

 private:
  using tag = entry_note::tag;
  static std::uint64_t item(tag kind, std::uint64_t payload) {
    return (std::uint64_t{static_cast<std::uint8_t>(kind)} << entry_note::tag_shift) | payload;
  }
  std::uint64_t relative(const std::byte* at) const { return static_cast<std::uint64_t>(at - entry_); }
  bool has(const std::byte* at, std::size_t bytes) const { return static_cast<std::size_t>(end_ - at) >= bytes; }
  bool is(const std::byte* at, opcode op) const { return at != end_ && *at == std::byte{op}; }

  // The word being written is passed along as `out`, a local, not a member: held in a register
  // through the inlined readers instead of incremented in memory per item.
  [[gnu::noinline]] std::size_t read_entry(std::uint64_t offset) {
    std::uint64_t* out = start_;
    const std::byte* at = entry_ + 1;
    bool memoized = is(at, MEMOIZE);
    if (memoized) ++at;
    if (!is(at, MARK)) return 0;
    ++at;
    *out++ = offset;
    ++out;  // written last
    std::size_t count = 0;
    unsigned frames_at = entry_note::no_frames;
    std::uint64_t run_name = 0;
    bool named = false;
    std::uint64_t far = 0;
    while (at != end_ && *at != std::byte{SETITEMS}) {
      if (count == entry_note::max_items) return 0;
      if (count % 2 == 1 && *at == std::byte{EMPTY_LIST} && frames_at == entry_note::no_frames) {
        if (!(at = read_frames(at, out, run_name, named))) return 0;
        frames_at = static_cast<unsigned>(count++);
        continue;
      }
      if (!(at = read_scalar(at, out))) return 0;
      if (count % 2 == 1 && entry_note::tag_of(out[-1]) == tag::memo_reference) {
        std::uint64_t index = entry_note::payload_of(out[-1]);
        far = index < entry_note::max_far_reference ? index + 1 : 0;
      }
      ++count;
    }
    if (at == end_ || count % 2 != 0) return 0;
    if (named) *out++ = run_name;
    std::size_t bytes = static_cast<std::size_t>(at - entry_) + 1;
    start_[1] = bytes | (std::uint64_t{count} << 16) | (std::uint64_t{frames_at} << 24) |
                        (std::uint64_t{memoized} << 32) | (std::uint64_t{named} << 33) | (far << 34);
    words_ = static_cast<std::size_t>(out - start_);
    return bytes;
  }

  // A key or scalar value, as the machine's shortcut_scalar takes it.
  const std::byte* read_scalar(const std::byte* at, std::uint64_t*& out) {
    switch (std::to_integer<unsigned char>(*at)) {
      case BINGET:
        if (!has(at, 2)) return nullptr;
        *out++ = item(tag::memo_reference, std::to_integer<std::uint64_t>(at[1]));
        return at + 2;
      case LONG_BINGET:
        if (!has(at, 5)) return nullptr;
        *out++ = item(tag::memo_reference, load_le<std::uint32_t>(at + 1));
        return at + 5;
      case BININT1:
        if (!has(at, 2)) return nullptr;
        return integer(std::to_integer<std::uint8_t>(at[1]), at + 2, out);
      case BININT2:
        if (!has(at, 3)) return nullptr;
        return integer(load_le<std::uint16_t>(at + 1), at + 3, out);
      case BININT:
        if (!has(at, 5)) return nullptr;
        return integer(load_le<std::int32_t>(at + 1), at + 5, out);
      case LONG1: {
        if (!has(at, 2)) return nullptr;
        std::size_t width = std::to_integer<std::size_t>(at[1]);
        if (width == 0 || width > 8 || !has(at, 2 + width)) return nullptr;
        std::uint64_t raw = 0;
        for (std::size_t i = 0; i < width; ++i) raw |= std::to_integer<std::uint64_t>(at[2 + i]) << (8 * i);
        if (width < 8 && (std::to_integer<unsigned>(at[1 + width]) & 0x80) != 0) raw |= ~std::uint64_t{0} << (8 * width);
        auto number = static_cast<std::int64_t>(raw);
        // Wider than a value holds in line: the machine's shortcut declines those.
        if (number < -(std::int64_t{1} << 59) || number >= (std::int64_t{1} << 59)) return nullptr;
        return integer(number, at + 2 + width, out);
      }
      case NONE: *out++ = item(tag::none, 0); return at + 1;
      case NEWTRUE: *out++ = item(tag::true_value, 0); return at + 1;
      case NEWFALSE: *out++ = item(tag::false_value, 0); return at + 1;
      case SHORT_BINUNICODE:
      case BINUNICODE: {
        std::size_t header = *at == std::byte{SHORT_BINUNICODE} ? 2 : 5;
        if (!has(at, header)) return nullptr;
        std::uint64_t length = header == 2 ? std::to_integer<std::uint64_t>(at[1]) : load_le<std::uint32_t>(at + 1);
        if (length > entry_note::max_entry_bytes || !has(at + header, static_cast<std::size_t>(length))) return nullptr;
        const std::byte* after = at + header + length;
        std::uint64_t memoized = 0;
        if (is(after, MEMOIZE)) {
          memoized = entry_note::memoized_bit;
          ++after;
        } else if (is(after, BINPUT) || is(after, LONG_BINPUT)) {
          return nullptr;  // numbered memo entries: the machine checks those on its byte path
        }
        *out++ = item(tag::string, memoized | relative(at + header) | (length << 16));
        return after;
      }
      default:
        return nullptr;
    }
  }
  static const std::byte* integer(std::int64_t number, const std::byte* after, std::uint64_t*& out) {
    *out++ = item(tag::integer, static_cast<std::uint64_t>(number) & ((std::uint64_t{1} << 60) - 1));
    return after;
  }

  // The entry's frame list, as the machine's shortcut_frames takes it.
  const std::byte* read_frames(const std::byte* at, std::uint64_t*& out, std::uint64_t& run_name, bool& named) {
    ++at;  // EMPTY_LIST
    std::uint64_t word = item(tag::frames, 0);
    if (is(at, MEMOIZE)) {
      word |= entry_note::memoized_bit;
      ++at;
    } else if (is(at, BINPUT) || is(at, LONG_BINPUT)) {
      return nullptr;
    }
    if (at == end_) return nullptr;
    auto form = [](entry_note::frames_form f) { return std::uint64_t{static_cast<std::uint8_t>(f)} << entry_note::form_shift; };
    if (*at == std::byte{MARK}) {
      ++at;
      const std::byte* run = at;
      std::uint64_t run_hash = 0;
      const std::byte* scanned = scan_frame_run(at, end_, run_hash);
      at = scanned;
      // The hash's scan covers at most 642 references (max_frame_run_bytes), fewer than
      // max_frames: they are counted only when the run goes on past them.
      std::size_t frames = scanned == run ? 0 : 1;
      if (!is(at, APPENDS) && at != run) {
        frames = 0;
        for (const std::byte* counted = run; counted != scanned; counted += *counted == std::byte{LONG_BINGET} ? 5 : 2) ++frames;
      }
      while (at != end_ && *at != std::byte{APPENDS}) {
        if (frames == entry_note::max_frames) return nullptr;
        if (*at == std::byte{LONG_BINGET} && has(at, 5)) {
          at += 5;
        } else if (*at == std::byte{BINGET} && has(at, 2)) {
          at += 2;
        } else {
          return nullptr;  // only memo references can be frames
        }
        ++frames;
      }
      if (at == end_ || frames == 0) return nullptr;
      std::uint64_t whole = scanned == at ? entry_note::whole_run_bit : 0;
      *out++ = word | form(entry_note::frames_form::run) | whole | relative(run) |
                       (static_cast<std::uint64_t>(at - run) << 16);
      if (whole != 0) {
        run_name = runs_.name({run, static_cast<std::size_t>(at - run)}, run_hash);
        named = true;
      }
      return at + 1;
    }
    if (*at == std::byte{BINGET} || *at == std::byte{LONG_BINGET}) {
      std::size_t width = *at == std::byte{BINGET} ? 1 : 4;
      if (!has(at, 1 + width)) return nullptr;
      std::uint64_t index = width == 1 ? std::to_integer<std::uint64_t>(at[1]) : load_le<std::uint32_t>(at + 1);
      at += 1 + width;
      if (!is(at, APPEND)) return nullptr;
      *out++ = word | form(entry_note::frames_form::single) | index;
      return at + 1;
    }
    *out++ = word | form(entry_note::frames_form::empty);
    return at;
  }

  const std::byte* entry_;
  const std::byte* end_;
  std::uint64_t* start_;
  std::size_t words_ = 0;
  entry_scanner::frame_runs& runs_;
};

}  // namespace

std::uint64_t entry_scanner::frame_runs::name(std::span<const std::byte> run, std::uint64_t hash) {
  std::size_t index = static_cast<std::size_t>(hash % entry_note::run_slots);
  slot& at = slots[index];
  if (at.serial != 0 && at.length == run.size() && std::memcmp(arena.data() + at.offset, run.data(), run.size()) == 0) {
    return (at.serial << entry_note::run_slot_bits) | index;
  }
  constexpr std::size_t arena_limit = std::size_t{1} << 20;
  if (arena.size() + run.size() > arena_limit) {  // forget them all; their serials are never given again
    slots.fill({});
    arena.clear();
  }
  if (arena.capacity() == 0) arena.reserve(arena_limit);
  at = {next_serial++, static_cast<std::uint32_t>(arena.size()), static_cast<std::uint32_t>(run.size())};
  arena.insert(arena.end(), run.begin(), run.end());
  return (at.serial << entry_note::run_slot_bits) | index;
}

void entry_scanner::scan(std::span<const std::byte> data, std::uint64_t offset, block_notes& notes) noexcept {
  if (stopped_ || data.empty()) return;
  try {
    std::size_t position = 0;
    if (carried_ > 0) {
      // An opcode the last block cut inside its header: finish the header from this block.
      std::byte joined[sizeof carry_ * 2];
      std::size_t taken = std::min(sizeof carry_, data.size());
      std::copy_n(carry_, carried_, joined);
      std::copy_n(data.data(), taken, joined + carried_);
      std::size_t bytes = opcode_bytes(joined, carried_ + taken);
      if (bytes == stop) {
        stopped_ = true;
        return;
      }
      if (bytes == need_more) {  // this block is shorter than the header's rest
        std::copy_n(data.data(), data.size(), carry_ + carried_);
        carried_ += data.size();
        return;
      }
      std::size_t rest = bytes - carried_;
      carried_ = 0;
      if (rest > data.size()) {
        skip_ = rest - data.size();
        return;
      }
      position = rest;
    } else if (skip_ > 0) {
      if (skip_ >= data.size()) {
        skip_ -= data.size();
        return;
      }
      position = static_cast<std::size_t>(skip_);
      skip_ = 0;
    }
    scan_from(data.data(), data.size(), position, offset, notes);
  } catch (const std::bad_alloc&) {  // no memory for notes: the machine reads the bytes itself
    notes.clear();
    stopped_ = true;
  }
}

void entry_scanner::scan_from(const std::byte* data, std::size_t size, std::size_t position, std::uint64_t offset,
                              block_notes& notes) {
  while (position < size) {
    const std::byte* at = data + position;
    if (*at == std::byte{EMPTY_DICT}) {
      note_writer writer(at, data + size, notes.room(entry_note::max_words), runs_);
      std::size_t entry = writer.write(offset + position);
      if (entry > 0) notes.add(writer.words());
      position += entry > 0 ? entry : 1;
      continue;
    }
    std::size_t left = size - position;
    std::size_t bytes = opcode_bytes(at, left);
    if (bytes == stop) {
      stopped_ = true;
      return;
    }
    if (bytes == need_more) {  // fewer than 9 bytes: the header continues in the next block
      std::copy_n(at, left, carry_);
      carried_ = left;
      return;
    }
    if (bytes > left) {
      skip_ = bytes - left;
      return;
    }
    position += bytes;
  }
}

}  // namespace rlmem::detail
