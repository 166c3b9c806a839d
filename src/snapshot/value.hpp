// SPDX-License-Identifier: MIT
#pragma once
// The 8-byte value the pickle machine moves around: a 4-bit kind and a 60-bit payload.

#include <cstdint>

namespace rlmem::detail {

enum class vkind : std::uint8_t {
  none,
  boolean,
  integer,      // payload: 60-bit two's complement
  big_integer,  // payload: index into the builder's wide integers
  real,         // payload: index into the builder's doubles
  string,       // payload: string_id
  bytes,        // payload: string_id
  object,       // payload: object id; what it is now lives in the object table
  container,    // object table only: payload indexes an open or generic container
  empty_list,   // a list sealed with no items
  frame,        // payload: frame_id
  stack,        // payload: stack_id
  event,        // payload: index of a trace_event
  block,        // payload: index of a block
  segment,      // payload: index of a segment
  annotation,   // payload: index of an annotation
};

struct value {
  std::uint64_t bits = 0;

  static constexpr int payload_bits = 60;
  static constexpr std::uint64_t payload_mask = (std::uint64_t{1} << payload_bits) - 1;
  static constexpr std::int64_t inline_min = -(std::int64_t{1} << (payload_bits - 1));
  static constexpr std::int64_t inline_max = (std::int64_t{1} << (payload_bits - 1)) - 1;

  static constexpr value make(vkind kind, std::uint64_t payload) {
    return value{(std::uint64_t{static_cast<std::uint8_t>(kind)} << payload_bits) | (payload & payload_mask)};
  }
  constexpr vkind kind() const { return static_cast<vkind>(bits >> payload_bits); }
  constexpr std::uint64_t payload() const { return bits & payload_mask; }
  constexpr std::uint32_t index() const { return static_cast<std::uint32_t>(payload()); }
  /// Sign-extends an inline integer.
  constexpr std::int64_t inline_integer() const {
    return static_cast<std::int64_t>(bits << (64 - payload_bits)) >> (64 - payload_bits);
  }
};

// How error messages name a value's kind ("a str", "a list of frames").
inline const char* kind_name(vkind kind) {
  switch (kind) {
    case vkind::none: return "None";
    case vkind::boolean: return "a bool";
    case vkind::integer:
    case vkind::big_integer: return "an int";
    case vkind::real: return "a float";
    case vkind::string: return "a str";
    case vkind::bytes: return "bytes";
    case vkind::frame: return "a frame";
    case vkind::stack: return "a list of frames";
    case vkind::event: return "a trace entry";
    case vkind::block: return "a block";
    case vkind::segment: return "a segment";
    case vkind::annotation: return "an annotation";
    case vkind::empty_list: return "an empty list";
    default: return "a container";
  }
}

}  // namespace rlmem::detail
