// SPDX-License-Identifier: MIT
// `rlmem plan --handoff`, `--wake-order`, `--sync-bucket`, `--gpus-per-node`, `--host-memory`.

#include "plan_handoff_options.hpp"

#include "arguments.hpp"
#include "output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

namespace rlmem::cli {

namespace {

// A size option's value: at least 1 MiB (a bare number is bytes; under 1 MiB is a missing unit).
bool size_of(const char* flag, const std::string& text, std::uint64_t& out) {
  std::int64_t bytes = 0;
  std::string message;
  if (!parse_size(text, bytes, message) || bytes < (std::int64_t{1} << 20)) {
    return refuse(fmt::format("{} '{}': expected a size of 1 MiB or more, like 512MiB or 256GB", flag, text.substr(0, 40)));
  }
  out = static_cast<std::uint64_t>(bytes);
  return true;
}

// The node a default covers: the job's GPUs, up to the eight of an HGX or DGX node.
constexpr std::uint64_t default_node_gpus = 8;

}  // namespace

void add_handoff_options(CLI::App* command, handoff_arguments& handoff) {
  auto* group = "Colocated hand-off and host memory";
  command->add_option("--handoff", handoff.handoff,
                      "grpo-step with an engine, each transition a phase: keep (the\n"
                      "trainer stays on the GPU) | offload (weights and optimizer to host\n"
                      "while the engine is awake: verl) | rlmem-pause (keep=\"host\")")
      ->group(group);
  command->add_option("--wake-order", handoff.wake_order,
                      "--handoff: staged (default: weights, sync, then KV) | together\n"
                      "(weights and KV woken before the sync)")
      ->group(group);
  command->add_option("--sync-bucket", handoff.sync_bucket,
                      "--handoff: the sync sends buckets of this size (verl's\n"
                      "update_weights_bucket_megabytes; default: all weights at once)")
      ->group(group);
  command->add_option("--gpus-per-node", handoff.gpus_per_node, "GPUs sharing a host's memory (default: --gpus, at most 8)")
      ->check(whole_number_in(1, 1u << 20))
      ->group(group);
  command->add_option("--host-memory", handoff.host_memory,
                      "A node's host memory (256GB, 2TiB), checked by the report and\n"
                      "--fit: offloaded state and pinned backups of every GPU")
      ->group(group);
}

bool build_handoff_knobs(const handoff_arguments& args, const CLI::App& command, plan_knobs& knobs, std::uint64_t& host_memory_bytes) {
  const bool handoff = command.count("--handoff") > 0;
  if (handoff) {
    std::optional<handoff_kind> mode = value_named(handoff_kind_names, args.handoff);
    if (!mode || *mode == handoff_kind::unmodelled) {
      return refuse(fmt::format("--handoff '{}': expected one of keep, offload, rlmem-pause", args.handoff.substr(0, 40)));
    }
    knobs.handoff = *mode;
  }
  for (const char* flag : {"--wake-order", "--sync-bucket"}) {
    if (command.count(flag) > 0 && !handoff) {
      return refuse(fmt::format("{} shapes the transitions of --handoff; give --handoff keep, offload or rlmem-pause", flag));
    }
  }
  if (command.count("--wake-order") > 0) {
    std::optional<wake_order_kind> order = value_named(wake_order_kind_names, args.wake_order);
    if (!order) return refuse(fmt::format("--wake-order '{}': expected staged or together", args.wake_order.substr(0, 40)));
    knobs.wake_order = *order;
  }
  if (command.count("--sync-bucket") > 0 && !size_of("--sync-bucket", args.sync_bucket, knobs.sync_bucket_bytes)) return false;
  host_memory_bytes = 0;
  if (command.count("--host-memory") > 0 && !size_of("--host-memory", args.host_memory, host_memory_bytes)) return false;
  if (command.count("--gpus-per-node") > 0) {
    if (args.gpus_per_node > knobs.gpus) {
      return refuse(fmt::format("--gpus-per-node {} is more than the job's --gpus {}: a node holds at most the job's GPUs", args.gpus_per_node,
                              knobs.gpus));
    }
    knobs.gpus_per_node = args.gpus_per_node;
  } else if (handoff || host_memory_bytes != 0) {
    knobs.gpus_per_node = std::min(knobs.gpus, default_node_gpus);
  }
  if (const auto handoff_checked = validate_handoff_knobs(knobs); !handoff_checked.ok()) return refuse(handoff_checked.failure().detail);
  return true;
}

}  // namespace rlmem::cli
