// SPDX-License-Identifier: MIT
// One conformance suite for every allocator policy (RMM's typed suites): torch's native
// allocator, with expandable segments, and the rlmem policy caching or releasing free pages,
// each driven through the allocator_policy seam by the same randomized workload. What any
// allocator owes its program: blocks that do not overlap and hold the request, counters that
// match the blocks, a refusal under a capacity that changes nothing, and memory back at the end.

#include <rlmem/allocator_policy.hpp>
#include <rlmem/caching_allocator.hpp>
#include <rlmem/fake_device.hpp>
#include <rlmem/rlmem_policy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace rlmem {
namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

// Addresses for the native model's new segments, never reused.
struct segment_addresses {
  std::uint64_t next = std::uint64_t{1} << 40;
  std::uint64_t operator()(std::uint64_t size) {
    std::uint64_t address = next;
    next += (size + 2 * mib - 1) / (2 * mib) * (2 * mib);
    return address;
  }
};

// A policy and what it runs over, made with a capacity in bytes (0: none).
// (torch's model keeps its own segment bookkeeping; only the rlmem policy runs over the device.)
struct native {
  std::unique_ptr<allocator_policy> policy;
  explicit native(std::uint64_t capacity) : policy(std::make_unique<caching_allocator_model>(allocator_settings{}, capacity, segment_addresses{})) {}
};

struct expandable {
  std::unique_ptr<allocator_policy> policy;
  explicit expandable(std::uint64_t capacity) {
    allocator_settings settings;
    settings.expandable_segments = true;
    policy = std::make_unique<caching_allocator_model>(settings, capacity, segment_addresses{});
  }
};

template <bool release>
struct rlmem_pages {
  fake_device gpu;
  std::unique_ptr<allocator_policy> policy;
  explicit rlmem_pages(std::uint64_t capacity) {
    rlmem_policy_options options;
    options.capacity_bytes = capacity;
    options.release_free_pages = release;
    policy = std::make_unique<rlmem_policy>(gpu, options);
  }
};

template <typename Policy>
class policy_conformance : public ::testing::Test {};

using policies = ::testing::Types<native, expandable, rlmem_pages<false>, rlmem_pages<true>>;
class policy_names {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, native>) return "torch_native";
    if (std::is_same_v<T, expandable>) return "torch_expandable_segments";
    if (std::is_same_v<T, rlmem_pages<false>>) return "rlmem_caching";
    return "rlmem_releasing";
  }
};
TYPED_TEST_SUITE(policy_conformance, policies, policy_names);

// Random requests from 1 B to 48 MiB on two streams, two in five freed, then everything freed.
TYPED_TEST(policy_conformance, live_blocks_never_overlap_and_the_counters_match_them) {
  TypeParam made(0);
  allocator_policy& policy = *made.policy;
  std::mt19937 random(20261124);
  std::map<std::uint64_t, model_block*> live;  // by address
  std::int64_t allocated = 0;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && random() % 5 < 2) {
      auto victim = std::next(live.begin(), static_cast<std::ptrdiff_t>(random() % live.size()));
      allocated -= static_cast<std::int64_t>(victim->second->size);
      policy.free_completed(victim->second);
      live.erase(victim);
      continue;
    }
    std::uint64_t request = random() % 4 == 0 ? 1 + random() % (48 * mib) : 1 + random() % 65536;
    model_block* block = policy.allocate(request, 1 + random() % 2);
    ASSERT_NE(block, nullptr) << "step " << step << ": " << request << " B with no capacity set";
    EXPECT_GE(block->size, request);
    EXPECT_EQ(block->ptr % 512, 0u) << "blocks are 512-byte aligned";
    auto after = live.lower_bound(block->ptr);
    if (after != live.end()) {
      ASSERT_LE(block->ptr + block->size, after->first) << "overlaps the block after, step " << step;
    }
    if (after != live.begin()) {
      auto before = std::prev(after);
      ASSERT_LE(before->first + before->second->size, block->ptr) << "overlaps the block before, step " << step;
    }
    live.emplace(block->ptr, block);
    allocated += static_cast<std::int64_t>(block->size);
    ASSERT_EQ(policy.allocated_bytes(), allocated) << "step " << step;
    ASSERT_GE(policy.reserved_bytes(), policy.allocated_bytes()) << "step " << step;
  }
  for (auto& [address, block] : live) policy.free_completed(block);
  EXPECT_EQ(policy.allocated_bytes(), 0);
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), 0) << "everything back after empty_cache";
}

// Under a capacity a request that cannot be served is refused and changes nothing; once the
// memory is freed, it is served.
TYPED_TEST(policy_conformance, a_refusal_under_a_capacity_changes_nothing) {
  TypeParam made(64 * mib);
  allocator_policy& policy = *made.policy;
  model_block* held = policy.allocate(40 * mib, 1);
  ASSERT_NE(held, nullptr);
  std::int64_t allocated = policy.allocated_bytes();
  EXPECT_EQ(policy.allocate(40 * mib, 1), nullptr) << "80 MiB under a 64 MiB capacity";
  EXPECT_EQ(policy.allocated_bytes(), allocated);
  EXPECT_LE(policy.reserved_bytes(), static_cast<std::int64_t>(64 * mib));
  policy.free_completed(held);
  model_block* again = policy.allocate(40 * mib, 1);
  EXPECT_NE(again, nullptr) << "served once the first block is freed";
  if (again != nullptr) policy.free_completed(again);
}

// A freed block's memory serves a new request of the same size on the same stream without
// reserving more: every policy caches or reuses.
TYPED_TEST(policy_conformance, freed_memory_serves_the_next_request_of_its_size) {
  TypeParam made(0);
  allocator_policy& policy = *made.policy;
  model_block* first = policy.allocate(30 * mib, 1);
  ASSERT_NE(first, nullptr);
  std::int64_t reserved = policy.reserved_bytes();
  policy.free_completed(first);
  model_block* second = policy.allocate(30 * mib, 1);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(policy.reserved_bytes(), reserved) << "no more memory taken for the same request again";
  policy.free_completed(second);
}

}  // namespace
}  // namespace rlmem
