// SPDX-License-Identifier: MIT
// One conformance suite for every allocator policy (RMM's typed suites): torch's native
// allocator, with expandable segments, and the rlmem policy caching or releasing free pages,
// each driven through the allocator_policy seam by the same randomized workload. What any
// allocator owes its program: blocks that do not overlap and hold the request, counters that
// match the blocks and the memory the device maps, a refusal under a capacity or by the device
// that changes nothing, and memory back at the end.

#include "byte_units.hpp"
#include "fixtures.hpp"
#include "model/fixture_files.hpp"

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/model/trace_simulation.hpp>
#include <rlmem/device/fake_device.hpp>
#include <rlmem/policy/rlmem_policy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace rlmem {
namespace {

using testing::sizes::mib;

// A policy and the fake device it runs on, made with a capacity in bytes (0: none) and the
// device's options (a failure to inject).
struct native {
  fake_device gpu;
  std::unique_ptr<allocator_policy> policy;
  explicit native(std::uint64_t capacity, fake_device_options device = {})
      : gpu(device), policy(std::make_unique<caching_allocator_model>(gpu, allocator_settings{}, capacity)) {}
};

struct expandable {
  fake_device gpu;
  std::unique_ptr<allocator_policy> policy;
  explicit expandable(std::uint64_t capacity, fake_device_options device = {}) : gpu(device) {
    allocator_settings settings;
    settings.expandable_segments = true;
    policy = std::make_unique<caching_allocator_model>(gpu, settings, capacity);
  }
};

template <bool release>
struct rlmem_pages {
  fake_device gpu;
  std::unique_ptr<allocator_policy> policy;
  explicit rlmem_pages(std::uint64_t capacity, fake_device_options device = {}) : gpu(device) {
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
    ASSERT_EQ(static_cast<std::uint64_t>(policy.reserved_bytes()), made.gpu.mapped_bytes()) << "reserved is what the device maps, step " << step;
    ASSERT_EQ(made.gpu.used_bytes(), made.gpu.mapped_bytes()) << "no memory held unmapped, step " << step;
    ASSERT_EQ(policy.broken_invariant(invariant_scope::whole), std::nullopt) << "expected every invariant to hold, step " << step;
  }
  for (auto& [address, block] : live) policy.free_completed(block);
  EXPECT_EQ(policy.broken_invariant(invariant_scope::whole), std::nullopt) << "expected every invariant to hold with nothing live";
  EXPECT_EQ(policy.allocated_bytes(), 0);
  policy.empty_cache();
  EXPECT_EQ(policy.reserved_bytes(), 0) << "everything back after empty_cache";
  EXPECT_EQ(made.gpu.used_bytes(), 0u) << "and to the device";
  EXPECT_EQ(policy.fault(), "");
}

// A device call that fails (the fake fails the Nth) is an out-of-memory to the policy, at every
// call a run of requests makes: each request is served on a retry or refused, and a refusal
// leaves nothing behind: what the policy reserves is what the device maps, allocated bytes are
// the blocks served, and everything goes back at the end.
TYPED_TEST(policy_conformance, a_failed_device_call_is_an_out_of_memory_that_leaves_nothing_behind) {
  const std::vector<std::uint64_t> requests{30 * mib, 1 * mib, 500, 60 * mib, 3 * mib, 25 * mib, 700 * 1024};
  // The calls the requests make when none fails: each of them fails once below (the releases at
  // the end are not what this tests, and a driver's unmap does not run out of memory).
  std::uint64_t calls = 0;
  {
    TypeParam clean(0);
    for (std::uint64_t request : requests) ASSERT_NE(clean.policy->allocate(request, 1), nullptr);
    calls = clean.gpu.calls();
  }
  ASSERT_GE(calls, 8u) << "the requests make too few device calls to test";
  for (std::uint64_t call = 1; call <= calls; ++call) {
    fake_device_options device;
    device.fail_call = call;
    TypeParam made(0, device);
    allocator_policy& policy = *made.policy;
    std::vector<model_block*> held;
    std::int64_t allocated = 0;
    for (std::uint64_t request : requests) {
      model_block* block = policy.allocate(request, 1);
      if (block != nullptr) {
        held.push_back(block);
        allocated += static_cast<std::int64_t>(block->size);
      }
      ASSERT_EQ(policy.allocated_bytes(), allocated) << "failing call " << call << ", request " << request;
      ASSERT_EQ(static_cast<std::uint64_t>(policy.reserved_bytes()), made.gpu.mapped_bytes()) << "failing call " << call;
      ASSERT_EQ(made.gpu.used_bytes(), made.gpu.mapped_bytes()) << "failing call " << call << ": memory created and not mapped";
      ASSERT_EQ(policy.broken_invariant(invariant_scope::whole), std::nullopt) << "failing call " << call << ", request " << request
                                                                           << ": expected every invariant to hold";
    }
    EXPECT_EQ(policy.fault(), "") << "failing call " << call << ": an injected out_of_memory is no fault";
    for (model_block* block : held) policy.free_completed(block);
    policy.empty_cache();
    EXPECT_EQ(made.gpu.used_bytes(), 0u) << "failing call " << call;
    EXPECT_EQ(made.gpu.live_handles(), 0u) << "failing call " << call;
  }
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

// Every bundled recording replayed under torch's allocator (the recorded settings) and under the
// rlmem policy: the counted invariants hold after every event, and all of them (a walk of the
// whole structure) at trace start, after every 61st event and after the trace's last.
TEST(policy_invariants, hold_through_every_bundled_recording_under_each_policy) {
  const std::vector<std::pair<std::string, allocator_choice>> choices{{"torch", torch_allocator_options{}},
                                                                       {"rlmem", rlmem_policy_options{}}};
  std::size_t replayed = 0;
  for (const std::string& name : testing::snapshot_fixture_names()) {
    const snapshot& snap = testing::fixture(name);
    const device_trace* trace = snap.trace_for(default_device(snap));
    const std::size_t events = trace ? snap.events_of(*trace).size() : 0;
    for (const auto& [policy_name, choice] : choices) {
      SCOPED_TRACE(name + " under " + policy_name);
      trace_simulation_options options;
      options.allocator = choice;
      std::optional<std::string> broken;
      std::size_t walked = 0;
      trace_simulation result = simulate_trace(snap, options, [&](const simulation_step& step) {
        if (broken) return;
        bool whole = step.events_applied % 61 == 0 || step.events_applied == events;
        walked += whole ? 1 : 0;
        broken = step.model.broken_invariant(whole ? invariant_scope::whole : invariant_scope::totals);
        if (broken) *broken = "after " + std::to_string(step.events_applied) + " events: " + *broken;
      });
      if (!result.unsupported.empty()) continue;
      ++replayed;
      EXPECT_EQ(broken, std::nullopt) << "expected every invariant to hold";
      EXPECT_GT(walked, 0u) << "expected at least one whole walk";
    }
  }
  EXPECT_GE(replayed, 40u) << "expected most of the recordings to replay under both policies";
}

}  // namespace
}  // namespace rlmem
