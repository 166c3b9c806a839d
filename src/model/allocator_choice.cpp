// SPDX-License-Identifier: MIT
// The policies a simulation can run, made in one place.

#include <rlmem/model/allocator_choice.hpp>

#include <utility>

namespace rlmem {

namespace {

// One overload per alternative: a new policy that is not handled here does not compile.
struct make_for {
  allocator_context& context;
  std::unique_ptr<allocator_policy> operator()(const torch_allocator_options&) const {
    return std::make_unique<caching_allocator_model>(context.gpu, context.settings, context.capacity_bytes, std::move(context.recorded));
  }
  std::unique_ptr<allocator_policy> operator()(const rlmem_policy_options& options) const {
    rlmem_policy_options chosen = options;
    chosen.capacity_bytes = context.capacity_bytes;
    return std::make_unique<rlmem_policy>(context.gpu, chosen);
  }
};

struct name_of {
  std::string_view operator()(const torch_allocator_options&) const noexcept { return "torch"; }
  std::string_view operator()(const rlmem_policy_options&) const noexcept { return "rlmem"; }
};

struct places_itself {
  bool operator()(const torch_allocator_options&) const noexcept { return false; }
  bool operator()(const rlmem_policy_options&) const noexcept { return true; }
};

}  // namespace

std::string_view allocator_name(const allocator_choice& choice) noexcept { return std::visit(name_of{}, choice); }

bool places_existing_memory_itself(const allocator_choice& choice) noexcept { return std::visit(places_itself{}, choice); }

std::unique_ptr<allocator_policy> make_allocator(const allocator_choice& choice, allocator_context context) {
  return std::visit(make_for{context}, choice);
}

}  // namespace rlmem
