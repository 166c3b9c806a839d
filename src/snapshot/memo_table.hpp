// SPDX-License-Identifier: MIT
#pragma once
// The pickle memo in 4 bytes an entry. Torch memoizes every trace entry, every frame list and
// many strings: tens of millions of entries in a 1 GB snapshot, nearly all of them records
// with small ids, so a 4-bit kind and a 28-bit payload hold them; the rest go to a side table.

#include "value.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace rlmem::detail {

class memo_table {
 public:
  static constexpr int payload_bits = 28;
  static constexpr std::uint64_t payload_limit = std::uint64_t{1} << payload_bits;

  /// The 4-byte form of `item`, or `escaped` when it does not fit. An object keeps only its
  /// container slot: the builder rewrites the entry before that slot holds another container.
  static std::uint32_t code_for(value item) {
    std::uint64_t payload = item.kind() == vkind::object ? item.payload() & 0xffffffffu : item.payload();
    if (payload >= payload_limit || item.kind() == vkind::container) return escaped;
    return (std::uint32_t{static_cast<std::uint8_t>(item.kind())} << payload_bits) | static_cast<std::uint32_t>(payload);
  }
  static vkind kind_of(std::uint32_t code) { return static_cast<vkind>(code >> payload_bits); }
  static std::uint32_t payload_of(std::uint32_t code) { return code & static_cast<std::uint32_t>(payload_limit - 1); }
  /// `container` never reaches the memo, so its code marks an escaped entry.
  static constexpr std::uint32_t escaped = std::uint32_t{static_cast<std::uint8_t>(vkind::container)} << payload_bits;

  std::size_t size() const { return codes_.size(); }
  std::size_t capacity() const { return codes_.capacity(); }
  std::uint32_t code(std::size_t index) const { return codes_[index]; }
  /// The full value of an escaped entry.
  value escaped_value(std::size_t index) const { return escaped_.at(index); }

  /// Stores `item` at `index` (at most size()) under `code`, code_for(item) or `escaped`.
  void store(std::size_t index, std::uint32_t code, value item) {
    if (index == codes_.size()) {
      codes_.push_back(code);
    } else {
      if (codes_[index] == escaped) escaped_.erase(index);
      codes_[index] = code;
    }
    if (code == escaped) escaped_[index] = item;
  }
  void reserve(std::size_t count) { codes_.reserve(count); }
  /// The codes' storage, for page_prefaulter and prefetches.
  const std::uint32_t* data() const { return codes_.data(); }

  /// An entry whose value is not known yet (the trace-entry shortcut's records-to-be): it
  /// reads as an escaped entry, so it must be set with store() or dropped before any lookup.
  static constexpr std::uint32_t pending = escaped + 1;
  /// Appends an entry whose code is `pending` or a code_for() other than `escaped`.
  void append_code(std::uint32_t code) { codes_.push_back(code); }
  /// Drops the entries from `size` on; none of them may be escaped.
  void truncate(std::size_t size) { codes_.resize(size); }

 private:
  std::vector<std::uint32_t> codes_;
  std::unordered_map<std::size_t, value> escaped_;
};

}  // namespace rlmem::detail
