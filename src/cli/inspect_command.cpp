// SPDX-License-Identifier: MIT
// `rlmem inspect FILE`: timeline, peak and what held it.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "output_format.hpp"
#include "progress.hpp"

#include <rlmem/inspect/compare.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>
#include <rlmem/inspect/views.hpp>

#include <filesystem>
#include <string>

namespace rlmem::cli {

namespace {

struct inspect_arguments {
  std::string file;
  std::int64_t device = -1;
  std::size_t top = 10;
  std::size_t frames = 0;
  std::size_t width = 100;
  output_choice output;
  bool quiet = false;
  std::string step_marker;
  std::string limit;
  std::string categories_file;
};

// Checks the options that need more than CLI11's checks; prints one line and returns false.
bool prepare_options(const inspect_arguments& args, inspect_options& choices) {
  std::string message;
  choices.device = args.device;
  choices.top = args.top;
  choices.step_marker = args.step_marker;
  if (!args.limit.empty() && !parse_size(args.limit, choices.limit_bytes, message)) {
    print_error("--limit " + message);
    return false;
  }
  if (!args.categories_file.empty() && !load_category_rules(args.categories_file, choices.category_rules, message)) {
    print_error("--categories " + message);
    return false;
  }
  return true;
}

// A folder: every snapshot in it, one row per rank, read in parallel.
int run_inspect_folder(const inspect_arguments& args, const inspect_options& choices) {
  auto files = ranked_snapshot_files_in(args.file);
  if (!files.ok()) {
    print_error(args.file + ": " + files.failure().detail);
    return exit_bad_input;
  }
  std::vector<rank_result> ranks = inspect_ranks(files.value(), choices);
  rank_imbalance imbalance = measure_imbalance(ranks);
  std::string text;
  switch (args.output.format) {
    case output_format::text: text = render_ranks_text(ranks, imbalance, args.file, {args.frames, args.width}); break;
    case output_format::json: text = render_ranks_json(ranks, imbalance, args.file); break;
    case output_format::html: text = render_ranks_html(ranks, imbalance, args.file); break;
  }
  if (int written = write_output(args.output, text); written != exit_ok) return written;
  std::size_t failed = 0;
  for (const rank_result& one : ranks) failed += !one.ok;
  if (failed > 0) {
    print_error(std::to_string(failed) + " of " + std::to_string(ranks.size()) + " snapshots in " + args.file + " could not be read (see the table)");
    return exit_bad_input;
  }
  return exit_ok;
}

int run_inspect(const inspect_arguments& args) {
  if (!output_available(args.output)) return exit_internal;
  std::error_code status;
  if (std::filesystem::is_directory(args.file, status)) {
    inspect_options choices;
    if (!prepare_options(args, choices)) return exit_bad_input;
    return run_inspect_folder(args, choices);
  }
  snapshot snap;
  if (!load_snapshot(args.file, args.quiet, snap)) return exit_bad_input;
  inspect_options choices;
  if (!prepare_options(args, choices)) return exit_bad_input;
  auto checked = inspect_checked(snap, choices);
  if (!checked.ok()) {
    print_error(args.file + ": " + checked.failure().detail);
    return exit_bad_input;
  }
  const inspection& result = checked.value();
  switch (args.output.format) {
    case output_format::text: return write_output(args.output, render_inspection_text(snap, result, args.file, {args.frames, args.width}));
    case output_format::json: return write_output(args.output, render_inspection_json(snap, result, args.file));
    case output_format::html: break;
  }
  // The page `rlmem report FILE` writes.
  memory_views views = build_memory_views(snap, result, choices.category_rules, view_options{});
  return write_output(args.output, render_inspection_html(snap, result, views, args.file));
}

}  // namespace

void add_inspect_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<inspect_arguments>();
  CLI::App* command = app.add_subcommand("inspect", "What held GPU memory: timeline, peaks, and the allocation sites at peak");
  command->add_option("FILE", args->file,
                      "Snapshot from torch.cuda.memory._dump_snapshot (.pickle, .gz or .zst), or a folder of\n"
                      "per-rank snapshots (one row per rank and the imbalance across ranks)")
      ->required();
  command->add_option("--device", args->device, "CUDA device to report (default: the one with the longest trace)")
      ->check(whole_number_in(device_option));
  command->add_option("--top", args->top, "Allocation sites to list at the peak")->capture_default_str()->check(whole_number_in(top_option));
  command->add_option("--frames", args->frames, "Stack frames to print under each site: the user's code outwards, the frames\n"
                      "inside it (torch, libraries) folded into one line")
      ->capture_default_str()
      ->check(whole_number_in(0, max_frames));
  command->add_option("--width", args->width, "Columns of the text report")->capture_default_str()->check(whole_number_in(min_width, max_width));
  command->add_option("--step-marker", args->step_marker,
                      "Regex on frames ('path:line function') whose allocations start a step\n"
                      "(default: ProfilerStep or optimizer annotations, then optimizer frames)");
  command->add_option("--limit", args->limit,
                      "Memory limit for OOM verdicts, e.g. 2805590497 or 2.6GiB\n"
                      "(default: bounded from what the trace reserved and the failed request)");
  command->add_option("--categories", args->categories_file,
                      "Rules file replacing the built-in category table (see docs/inspect.md)")
      ->check(CLI::ExistingFile);
  add_output_options(*command, args->output,
                     {"Print JSON (schema: docs/schema/inspect.schema.json) instead of text",
                      "Write the page `rlmem report` makes to this file ('-': standard output)"});
  command->add_flag("--quiet", args->quiet, "No progress line on stderr");
  command->footer("Reports the peak and what held it, the steps, LEAKs (sites that grow every step),\n"
                  "a verdict for each OOM (fragmentation or capacity), fragmentation, and categories.\n"
                  "Examples:\n"
                  "  rlmem inspect snapshot.pickle --top 15 --frames 8\n"
                  "  rlmem inspect oom.pickle --limit 2805590497     # the cap set_per_process_memory_fraction gave\n"
                  "  rlmem inspect run.pickle --step-marker 'train.py:[0-9]+ train_step'\n"
                  "  rlmem inspect snapshots/                         # one row per rank, files read in parallel\n"
                  "Memory allocated before recording began is derived by undoing the trace against the\n"
                  "segments in the file, as PyTorch's own viewer does.");
  command->callback([&run, args] { run = [args] { return run_inspect(*args); }; });
}

}  // namespace rlmem::cli
