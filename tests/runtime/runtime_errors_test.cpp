// SPDX-License-Identifier: MIT
// The runtime's error table has one distinct NAME and a message per code; real refusals carry the
// expected code and their reason in one line; and a success costs no heap allocation for its
// result (allocate and free run per tensor).

#include <rlmem/device/fake_device.hpp>
#include <rlmem/runtime/runtime.hpp>

#include "error_table_checks.hpp"
#include "runtime_checks.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>

namespace {

// Heap allocations this thread makes while `counting` is on: the whole binary's operator new
// goes through here, and counts only where a test asks.
thread_local bool counting = false;
thread_local std::uint64_t allocations = 0;

}  // namespace

void* operator new(std::size_t size) {
  if (counting) ++allocations;
  if (void* made = std::malloc(size == 0 ? 1 : size)) return made;
  throw std::bad_alloc();
}
// GCC 12 takes the replacement operator new for the standard one and reports its malloc'd pointer
// freed here as mismatched once the two meet in one translation unit (the sanitize build's).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::size_t) noexcept { std::free(pointer); }
#pragma GCC diagnostic pop

namespace rlmem {
namespace {

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

fake_device_options small_device() {
  fake_device_options options;
  options.total_bytes = 16 * mib;
  options.granularity = 2 * mib;
  options.host_backed = true;
  return options;
}

runtime_options small_runtime() {
  runtime_options options;
  options.policy.reservation_bytes = 16 * mib;
  return options;
}

TEST(runtime_errors, every_code_has_a_distinct_name_and_a_message) {
  testing::expect_every_code_named<runtime_errc>();
  EXPECT_EQ(error_name(runtime_errc::ok), "OK");
  EXPECT_EQ(error_name(runtime_errc::unknown_pointer), "UNKNOWN_POINTER");
}

TEST(runtime_errors, real_refusals_carry_their_code_and_one_line) {
  fake_device gpu(small_device());
  runtime rt(gpu, small_runtime());
  std::vector<runtime_failure> seen;
  auto keep = [&](const result<void, runtime_errc>& outcome) { seen.push_back(outcome.failure()); };
  EXPECT_TRUE(refused(rt.free(12345), runtime_errc::unknown_pointer, "did not hand out"));
  keep(rt.free(12345));
  EXPECT_TRUE(refused(rt.resume("nowhere"), runtime_errc::unknown_tag, "no tag 'nowhere'"));
  keep(rt.resume("nowhere"));
  EXPECT_TRUE(refused(rt.leave_region(), runtime_errc::invalid_argument, "no region is open"));
  keep(rt.leave_region());
  EXPECT_TRUE(refused(rt.allocate(32 * mib, 0), runtime_errc::out_of_memory, "33554432 bytes requested"));
  EXPECT_TRUE(refused(rt.reserve_growable(0), runtime_errc::invalid_argument, "0 bytes"));
  for (const runtime_failure& failure : seen) {
    EXPECT_NE(failure.code, runtime_errc::ok);
    EXPECT_FALSE(failure.detail.empty()) << error_name(failure.code) << " without a reason";
    EXPECT_EQ(failure.detail.find('\n'), std::string::npos) << "one line: " << failure.detail;
  }
}

TEST(runtime_errors, allocate_and_free_allocate_nothing_on_the_heap_for_their_results) {
  fake_device gpu(small_device());
  runtime rt(gpu, small_runtime());
  // The page mapped and cached, and the runtime's map of live blocks grown, before counting.
  for (int i = 0; i < 4; ++i) {
    auto made = rt.allocate(4096, 0);
    ASSERT_TRUE(succeeded(made));
    ASSERT_TRUE(succeeded(rt.free(made.value())));
  }
  counting = true;
  auto made = rt.allocate(4096, 0);
  std::uint64_t by_allocate = allocations;
  bool freed = made.ok() && rt.free(made.value()).ok();
  counting = false;
  ASSERT_TRUE(succeeded(made));
  EXPECT_TRUE(freed);
  EXPECT_LE(by_allocate, 1u) << "expected at most the node of the runtime's map of live blocks";
  EXPECT_EQ(allocations, by_allocate) << "expected a free to allocate nothing";
}

}  // namespace
}  // namespace rlmem
