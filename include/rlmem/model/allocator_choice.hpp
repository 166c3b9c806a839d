// SPDX-License-Identifier: MIT
#pragma once
// Which allocator policy decides a simulation (replay, inspect's OOM judgement), with its
// options, and the one place that makes it. A new policy is its own file (an allocator_policy,
// allocator_policy.hpp), one alternative of allocator_choice with its name, one case in
// make_allocator(), and its fixture in the policies' conformance suite
// (tests/model/policy_conformance_test.cpp).

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/policy/rlmem_policy.hpp>

#include <cstdint>
#include <memory>
#include <string_view>
#include <variant>

namespace rlmem {

class device;

/// PyTorch's caching allocator, configured by the simulation's allocator_settings.
struct torch_allocator_options {
  /// Always equal: the options are the simulation's allocator_settings, not here.
  bool operator==(const torch_allocator_options&) const = default;
};

/// The policy and its options; torch's allocator unless chosen otherwise.
using allocator_choice = std::variant<torch_allocator_options, rlmem_policy_options>;

/// "torch" or "rlmem": the policy's name, as `rlmem replay --allocator` takes it.
std::string_view allocator_name(const allocator_choice& choice) noexcept;

/// Whether the policy places the memory a recording held before its trace its own way, rather
/// than in the recording's segments (the rlmem policy always does; torch's allocator keeps them,
/// unless a what-if turns cudaMalloc segments into expandable ones).
bool places_existing_memory_itself(const allocator_choice& choice) noexcept;

/// What every policy is built with besides its options.
struct allocator_context {
  device& gpu;                        ///< the device it runs over (replay's is the fake)
  allocator_settings settings;        ///< torch's settings (request rounding for any policy)
  std::uint64_t capacity_bytes = 0;   ///< the most it may hold (a memory fraction); 0: none
  recorded_addresses recorded;        ///< where the recording's segments went (torch's allocator)
};

/// The chosen policy over `context.gpu`.
std::unique_ptr<allocator_policy> make_allocator(const allocator_choice& choice, allocator_context context);

}  // namespace rlmem
