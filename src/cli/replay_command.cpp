// SPDX-License-Identifier: MIT
// `rlmem replay FILE`: re-run the trace through the caching allocator model; what-ifs.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "output_format.hpp"
#include "progress.hpp"

#include <rlmem/report/report.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <memory>
#include <string>

namespace rlmem::cli {

namespace {

struct replay_arguments {
  std::string file;
  std::string alloc_conf;
  bool alloc_conf_given = false;
  std::string capacity;
  std::int64_t device = -1;
  bool min_capacity = false;
  bool compare = false;
  std::string allocator = "torch";
  bool release_free_pages = false;
  output_choice output;
  bool quiet = false;
};

int run_replay(const replay_arguments& args) {
  if (!output_available(args.output)) return exit_internal;
  replay_options options;
  options.device = args.device;
  if (!args.capacity.empty()) {
    std::int64_t bytes = 0;
    std::string message;
    if (!parse_size(args.capacity, bytes, message)) {
      print_error("--capacity " + message);
      return exit_bad_input;
    }
    options.capacity_bytes = static_cast<std::uint64_t>(bytes);
  }
  if (args.alloc_conf_given) {
    auto settings = parse_alloc_conf(args.alloc_conf);
    if (!settings.ok()) {
      print_error("--alloc-conf: " + settings.failure().detail);
      return exit_bad_input;
    }
    options.settings = std::move(settings).value();
  }
  if (args.release_free_pages && args.allocator != "rlmem") {
    print_error("--release-free-pages applies to --allocator rlmem only");
    return exit_bad_input;
  }
  if (args.allocator == "rlmem") {
    rlmem_policy_options policy;
    policy.release_free_pages = args.release_free_pages;
    options.allocator = policy;
  }
  snapshot snap;
  if (!load_snapshot(args.file, args.quiet, snap)) return exit_bad_input;
  replay_report report;
  report.file = args.file;
  report.device = options.device >= 0 ? options.device : default_device(snap);
  report.settings = options.settings.value_or(settings_of(snap));
  report.settings_recorded = report.settings == settings_of(snap);
  report.allocator = options.allocator;
  report.result = replay(snap, options);
  report.capacity_bytes = report.result.capacity_bytes;
  if (!report.result.unsupported.empty()) {
    print_error(args.file + ": cannot replay: " + report.result.unsupported);
    return exit_bad_input;
  }
  if (args.min_capacity) report.min_capacity_bytes = min_capacity(snap, options);
  if (args.compare) report.comparison = compare_settings(snap, options);
  switch (args.output.format) {
    case output_format::text: return write_output(args.output, render_replay_text(report));
    case output_format::json: return write_output(args.output, render_replay_json(report));
    case output_format::html: break;
  }
  return write_output(args.output, render_replay_html(report));
}

}  // namespace

void add_replay_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<replay_arguments>();
  CLI::App* command = app.add_subcommand("replay", "Re-run the trace through a model of PyTorch's caching allocator: what-ifs");
  command->add_option("FILE", args->file, "Snapshot from torch.cuda.memory._dump_snapshot (.pickle, .gz or .zst)")->required();
  command->add_option("--alloc-conf", args->alloc_conf,
                      "PYTORCH_CUDA_ALLOC_CONF to replay under, e.g. \"max_split_size_mb:128\"\n"
                      "(default: the settings recorded in the snapshot; '' for torch's defaults)")
      ->each([args](const std::string&) { args->alloc_conf_given = true; });
  command->add_option("--capacity", args->capacity,
                      "Memory limit (set_per_process_memory_fraction): 2805590497, 40GiB, ...");
  command->add_option("--device", args->device, "CUDA device (default: the one with the longest trace)")->check(whole_number_in(device_option));
  command->add_option("--allocator", args->allocator,
                      "torch: PyTorch's caching allocator under --alloc-conf (default);\n"
                      "rlmem: the rlmem runtime's policy (pages mapped under blocks)")
      ->check(CLI::IsMember({"torch", "rlmem"}));
  command->add_flag("--release-free-pages", args->release_free_pages,
                    "With --allocator rlmem: unmap a page once no block uses it\n"
                    "(default: keep it until memory runs short or empty_cache())");
  command->add_flag("--min-capacity", args->min_capacity, "Also find the smallest capacity (to 2 MiB) under which it completes");
  command->add_flag("--compare", args->compare,
                    "Also compare the recorded settings, expandable segments,\n"
                    "max_split_size_mb 64..512 and the rlmem policy: peak reserved and\n"
                    "smallest capacity of each, and the floor (peak allocated)");
  add_output_options(*command, args->output,
                     {"Print JSON (schema: docs/schema/replay.schema.json)",
                      "Write the result as one self-contained HTML page to this file\n"
                      "('-': standard output); with --compare, each setting's figures as bars"});
  command->add_flag("--quiet", args->quiet, "No progress line on stderr");
  command->footer("The trace's allocation sequence does not depend on the allocator, so its decisions can be\n"
                  "replayed on a CPU. Under the recorded settings the report says how many of the recorded\n"
                  "segment events (cudaMalloc, cudaFree) the model reproduced. Examples:\n"
                  "  rlmem replay run.pickle --capacity 40GiB                # would it fit in 40 GiB?\n"
                  "  rlmem replay oom.pickle --capacity 2805590497 --compare\n"
                  "  rlmem replay oom.pickle --capacity 2805590497 --compare --html oom-replay.html\n"
                  "  rlmem replay run.pickle --alloc-conf max_split_size_mb:256 --min-capacity\n"
                  "  rlmem replay run.pickle --allocator rlmem --release-free-pages --min-capacity");
  command->callback([&run, args] { run = [args] { return run_replay(*args); }; });
}

}  // namespace rlmem::cli
