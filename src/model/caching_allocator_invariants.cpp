// SPDX-License-Identifier: MIT
// What the model of torch's caching allocator keeps true between calls, checked: its byte
// counters, its blocks linked in address order, and the pools that hold exactly its free blocks.

#include <rlmem/model/caching_allocator.hpp>

#include <string>
#include <unordered_set>

namespace rlmem {

std::optional<std::string> caching_allocator_model::broken_invariant(invariant_scope scope) const {
  if (!fault_.empty()) return std::nullopt;
  if (allocated_bytes_ < 0 || allocated_bytes_ > reserved_bytes_) {
    return "allocated bytes " + std::to_string(allocated_bytes_) + " outside [0, reserved bytes " + std::to_string(reserved_bytes_) + "]";
  }
  if (scope == invariant_scope::totals) return std::nullopt;

  const std::unordered_set<const model_block*> recycled(recycled_.begin(), recycled_.end());
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  std::size_t free = 0;
  std::size_t unmapped = 0;
  for (const model_block& block : storage_) {
    if (recycled.contains(&block)) continue;
    const std::string where = "block at " + std::to_string(block.ptr) + " of " + std::to_string(block.size) + " bytes";
    if (block.next != nullptr && (block.next->prev != &block || block.ptr + block.size != block.next->ptr)) {
      return where + " is not followed, in its segment, by the block that names it as its predecessor and starts where it ends";
    }
    if (block.allocated && !block.in_use) return where + " is allocated but not in use";
    if (!block.mapped && block.in_use) return where + " is in use but not mapped";
    const bool in_pool = (block.small_pool ? small_free_ : large_free_).contains(const_cast<model_block*>(&block));
    const bool in_unmapped = (block.small_pool ? small_unmapped_ : large_unmapped_).contains(const_cast<model_block*>(&block));
    if (in_pool != (!block.in_use && block.mapped)) return where + (in_pool ? " is in its free pool but not free and mapped" : " is free and mapped but in no pool");
    if (in_unmapped != !block.mapped) return where + (in_unmapped ? " is among the unmapped blocks but mapped" : " is unmapped but not among the unmapped blocks");
    free += in_pool ? 1 : 0;
    unmapped += in_unmapped ? 1 : 0;
    if (block.allocated) allocated += static_cast<std::int64_t>(block.size);
    if (block.mapped) reserved += static_cast<std::int64_t>(block.size);
  }
  if (free != small_free_.size() + large_free_.size()) return "the free pools hold blocks that are not the model's";
  if (unmapped != small_unmapped_.size() + large_unmapped_.size()) return "the unmapped sets hold blocks that are not the model's";
  if (allocated != allocated_bytes_) {
    return "allocated bytes: counted " + std::to_string(allocated_bytes_) + ", the allocated blocks hold " + std::to_string(allocated);
  }
  if (reserved != reserved_bytes_) {
    return "reserved bytes: counted " + std::to_string(reserved_bytes_) + ", the mapped blocks hold " + std::to_string(reserved);
  }
  return std::nullopt;
}

}  // namespace rlmem
