// SPDX-License-Identifier: MIT
#pragma once
// Pickle opcodes and the little pieces of their decoding that the pickle machine and the
// entry scanner (which reads ahead on another thread) share.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace rlmem::detail {

enum opcode : unsigned char {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I',
  BININT = 'J', BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P',
  BINPERSID = 'Q', REDUCE = 'R', STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U',
  UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd',
  EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i', LONG_BINGET = 'j',
  LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85,
  TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  BINBYTES = 'B', SHORT_BINBYTES = 'C', SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90, FROZENSET = 0x91, NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95, BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
};

// Pickle integers are little-endian whatever the host.
template <class T>
T load_le(const std::byte* at) {
  if constexpr (std::endian::native == std::endian::little) {
    T loaded;
    std::memcpy(&loaded, at, sizeof(T));  // one load, not a loop over bytes
    return loaded;
  }
  std::make_unsigned_t<T> raw = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    raw = static_cast<std::make_unsigned_t<T>>(raw | (std::to_integer<std::make_unsigned_t<T>>(at[i]) << (8 * i)));
  }
  return static_cast<T>(raw);
}

/// The longest run of frame references a frame list's bytes are known by (256 frames).
inline constexpr std::size_t max_frame_run_bytes = 5 * 256;

/// The run of LONG_BINGET and BINGET at `at` (at most max_frame_run_bytes of it) and its hash,
/// in one pass: returns where the run ends. Each reference's index, tagged with its position,
/// is multiplied on its own and the products summed, so no multiply waits for the one before.
/// Users compare whole runs byte for byte, so a weak hash costs a miss, never a wrong stack.
[[gnu::noinline]] inline const std::byte* scan_frame_run(const std::byte* at, const std::byte* end, std::uint64_t& hash) {
  const std::byte* const start = at;
  std::uint64_t sum = 0;
  std::uint64_t position = 0;
  constexpr std::uint64_t multiplier = 0x9e3779b97f4a7c15ULL;
  while (static_cast<std::size_t>(at - start) < max_frame_run_bytes) {
    std::uint64_t index;
    if (end - at >= 5 && *at == std::byte{LONG_BINGET}) {
      index = load_le<std::uint32_t>(at + 1);
      at += 5;
    } else if (end - at >= 2 && *at == std::byte{BINGET}) {
      index = std::to_integer<std::uint64_t>(at[1]) | (std::uint64_t{1} << 32);
      at += 2;
    } else {
      break;
    }
    sum += (index + (position << 33)) * multiplier;
    ++position;
  }
  sum += static_cast<std::uint64_t>(at - start) * 0xff51afd7ed558ccdULL;
  hash = sum ^ (sum >> 29) ^ (sum >> 47);
  return at;
}

}  // namespace rlmem::detail
