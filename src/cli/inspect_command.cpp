// SPDX-License-Identifier: MIT
// `rlmem inspect FILE`: timeline, peak and what held it.

#include "commands.hpp"
#include "progress.hpp"

#include <rlmem/inspect.hpp>
#include <rlmem/report.hpp>
#include <rlmem/snapshot_reader.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

namespace rlmem::cli {

namespace {

struct inspect_arguments {
  std::string file;
  std::int64_t device = -1;
  std::size_t top = 10;
  std::size_t frames = 0;
  std::size_t width = 100;
  bool json = false;
  bool quiet = false;
};

int run_inspect(const inspect_arguments& args) {
  read_options options;
  options.progress = make_progress(args.file, !args.quiet);
  auto read = read_snapshot_file(args.file, options);
  end_progress();
  if (!read.ok()) {
    std::fprintf(stderr, "rlmem: %s: %s\n", args.file.c_str(), describe(read.failure()).c_str());
    return exit_bad_input;
  }
  const snapshot& snap = read.value();
  inspect_options choices;
  choices.device = args.device;
  choices.top = args.top;
  inspection result = inspect(snap, choices);
  if (args.device >= 0 && std::find(result.devices.begin(), result.devices.end(), args.device) == result.devices.end()) {
    std::string known;
    for (std::int64_t device : result.devices) known += (known.empty() ? "" : ", ") + std::to_string(device);
    std::fprintf(stderr, "rlmem: %s has no device %lld (devices: %s)\n", args.file.c_str(),
                 static_cast<long long>(args.device), known.empty() ? "none" : known.c_str());
    return exit_bad_input;
  }
  std::string text = args.json ? render_inspection_json(snap, result, args.file)
                               : render_inspection_text(snap, result, args.file, {args.frames, args.width});
  std::fwrite(text.data(), 1, text.size(), stdout);
  return exit_ok;
}

}  // namespace

void add_inspect_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<inspect_arguments>();
  CLI::App* command = app.add_subcommand("inspect", "What held GPU memory: timeline, peaks, and the allocation sites at peak");
  command->add_option("FILE", args->file, "Snapshot from torch.cuda.memory._dump_snapshot (.pickle, .gz or .zst)")
      ->required();
  command->add_option("--device", args->device, "CUDA device to report (default: the one with the longest trace)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--top", args->top, "Allocation sites to list at the peak")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--frames", args->frames, "Stack frames to print under each site (innermost first)")
      ->capture_default_str();
  command->add_option("--width", args->width, "Columns of the text report")->capture_default_str()->check(CLI::Range(60, 1000));
  command->add_flag("--json", args->json, "Print JSON (schema: docs/schema/inspect.schema.json) instead of text");
  command->add_flag("--quiet", args->quiet, "No progress line on stderr");
  command->footer("Example: rlmem inspect snapshot.pickle --top 15 --frames 8\n"
                  "Memory allocated before recording began is derived by undoing the trace against the\n"
                  "segments in the file, as PyTorch's own viewer does.");
  command->callback([&run, args] { run = [args] { return run_inspect(*args); }; });
}

}  // namespace rlmem::cli
