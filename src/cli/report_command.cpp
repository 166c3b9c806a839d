// SPDX-License-Identifier: MIT
// `rlmem report FILE [-o out.html]`: the inspection and its views as one self-contained page;
// `rlmem report A B` the diff of two snapshots, `rlmem report DIR` a folder's ranks side by side.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "progress.hpp"

#include <rlmem/inspect/compare.hpp>
#include <rlmem/base/format.hpp>
#include <rlmem/inspect/inspect.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/inspect/views.hpp>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace rlmem::cli {

namespace {

struct report_arguments {
  std::vector<std::string> files;  // one snapshot or folder, or two snapshots
  std::string output;
  std::int64_t device = -1;
  std::size_t top = 10;
  std::size_t bands = view_options{}.bands;
  std::string step_marker;
  std::string limit;
  std::string categories_file;
  bool quiet = false;
};

// "run.pickle.zst" -> "run", "ranks/" -> "ranks".
std::string stem_of(const std::string& path) {
  std::filesystem::path whole(path);
  std::string name = (whole.has_filename() ? whole : whole.parent_path()).filename().string();
  for (std::string_view suffix : {".zst", ".zstd", ".gz", ".pickle", ".pkl"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) name.resize(name.size() - suffix.size());
  }
  return name;
}

// "run.html" for one snapshot or folder, "a-vs-b.html" for two, in the current directory.
std::string default_output(const std::vector<std::string>& files) {
  return files.size() == 2 ? stem_of(files[0]) + "-vs-" + stem_of(files[1]) + ".html" : stem_of(files[0]) + ".html";
}

// The options every form shares; false after the one line.
bool prepare_options(const report_arguments& args, inspect_options& choices) {
  choices.device = args.device;
  choices.top = args.top;
  choices.step_marker = args.step_marker;
  std::string message;
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

int write_and_tell(const report_arguments& args, const std::string& page) {
  std::string path = args.output.empty() ? default_output(args.files) : args.output;
  int written = write_whole_file(path, page);
  if (written == exit_ok && path != "-" && !args.quiet) {
    std::fprintf(stderr, "rlmem: wrote %s (%s)\n", printable_text(path).c_str(), format_bytes(page.size()).c_str());
  }
  return written;
}

int run_report_file(const report_arguments& args, const inspect_options& choices) {
  const std::string& file = args.files[0];
  snapshot snap;
  if (!load_snapshot(file, args.quiet, snap)) return exit_bad_input;
  auto checked = inspect_checked(snap, choices);
  if (!checked.ok()) {
    print_error(file + ": " + checked.failure().detail);
    return exit_bad_input;
  }
  const inspection& result = checked.value();
  view_options detail;
  detail.bands = args.bands;
  memory_views views = build_memory_views(snap, result, choices.category_rules, detail);
  return write_and_tell(args, render_inspection_html(snap, result, views, file));
}

// Two snapshots: what grew and shrank from the first to the second, as `rlmem diff` compares them.
int run_report_diff(const report_arguments& args, inspect_options choices) {
  choices.top = std::numeric_limits<std::size_t>::max();  // every site, so nothing is missed
  std::vector<rank_result> both = inspect_ranks({args.files[0], args.files[1]}, choices, 2);
  for (const rank_result& one : both) {
    if (!one.ok) {
      print_error(one.file + ": " + one.failure);
      return exit_bad_input;
    }
  }
  return write_and_tell(args, render_diff_html(diff_inspections(both[0].result, both[1].result), args.files[0], args.files[1]));
}

// A folder of per-rank snapshots, as `rlmem inspect DIR` reads it: the page shows the ranks that
// could not be read, and the exit code says so.
int run_report_folder(const report_arguments& args, const inspect_options& choices) {
  const std::string& folder = args.files[0];
  auto files = ranked_snapshot_files_in(folder);
  if (!files.ok()) {
    print_error(folder + ": " + files.failure().detail);
    return exit_bad_input;
  }
  std::vector<rank_result> ranks = inspect_ranks(files.value(), choices);
  if (int written = write_and_tell(args, render_ranks_html(ranks, measure_imbalance(ranks), folder)); written != exit_ok) return written;
  std::size_t failed = 0;
  for (const rank_result& one : ranks) failed += !one.ok;
  if (failed > 0) {
    print_error(std::to_string(failed) + " of " + std::to_string(ranks.size()) + " snapshots in " + folder + " could not be read (see the page)");
    return exit_bad_input;
  }
  return exit_ok;
}

int run_report(const report_arguments& args) {
  if (!html_pages_available()) return exit_internal;
  inspect_options choices;
  if (!prepare_options(args, choices)) return exit_bad_input;
  std::error_code status;
  if (args.files.size() == 2) {
    for (const std::string& file : args.files) {
      if (std::filesystem::is_directory(file, status)) {
        print_error(file + ": is a folder; rlmem report A B compares two snapshot files");
        return exit_bad_input;
      }
    }
    return run_report_diff(args, choices);
  }
  if (std::filesystem::is_directory(args.files[0], status)) return run_report_folder(args, choices);
  return run_report_file(args, choices);
}

}  // namespace

void add_report_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<report_arguments>();
  CLI::App* command = app.add_subcommand("report", "One self-contained HTML page to look at: timeline, active memory, the peak, leaks, fragmentation, OOMs");
  command->add_option("FILE", args->files,
                      "Snapshot from torch.cuda.memory._dump_snapshot (.pickle, .gz or .zst); two snapshots: their diff;\n"
                      "a folder of per-rank snapshots: the ranks side by side")
      ->required()
      ->expected(1, 2);
  command->add_option("-o,--output", args->output, "Where to write the page ('-': standard output)\n(default: FILE's name with .html, A-vs-B.html for two, in the current folder)");
  command->add_option("--device", args->device, "CUDA device to report (default: the one with the longest trace)")
      ->check(whole_number_in(device_option));
  command->add_option("--top", args->top, "Allocation sites listed at the peak")->capture_default_str()->check(whole_number_in(top_option));
  command->add_option("--bands", args->bands, "Largest allocations drawn in the active-memory view")
      ->capture_default_str()
      ->check(whole_number_in(1, 100'000));
  command->add_option("--step-marker", args->step_marker, "Regex on frames ('path:line function') whose allocations start a step");
  command->add_option("--limit", args->limit, "Memory limit for OOM verdicts, e.g. 2805590497 or 2.6GiB");
  command->add_option("--categories", args->categories_file, "Rules file replacing the built-in category table (see docs/inspect.md)")
      ->check(CLI::ExistingFile);
  command->add_flag("--quiet", args->quiet, "No progress or 'wrote' line on stderr");
  command->footer(
      "Writes one HTML file that opens from disk in any current browser, with no network at all:\n"
      "uPlot and the page script are inlined, and a Content-Security-Policy forbids every request.\n"
      "The page holds figures, not the trace (min/max per pixel column, the largest allocations,\n"
      "the peak's stacks as a tree) and rlmem inspect --json's document, so a 1 GB snapshot gives\n"
      "a page of about 1 MB.\n"
      "Views: Timeline (allocated/reserved, steps, peaks, OOMs, categories; drag to zoom,\n"
      "double-click to reset, hover for the stack of the column's largest allocation),\n"
      "Active memory (the largest allocations as bands; hover, click to pin), At the peak\n"
      "(live memory as an icicle of stacks), Leaks, Fragmentation and segments (a map of blocks\n"
      "and free gaps per segment at the peak of reserved and at each OOM), OOM (each verdict with\n"
      "its numbers and the simulations that prove it).\n"
      "Two snapshots give their diff (as rlmem diff); a folder of per-rank snapshots (as rlmem\n"
      "inspect DIR) the ranks side by side.\n"
      "Examples:\n"
      "  rlmem report snapshot.pickle                  # writes snapshot.html here\n"
      "  rlmem report oom.pickle.zst -o /tmp/oom.html --limit 2.6GiB\n"
      "  rlmem report run.pickle -o - | gzip > run.html.gz\n"
      "  rlmem report before.pickle after.pickle        # writes before-vs-after.html\n"
      "  rlmem report snapshots/                        # writes snapshots.html, one row per rank\n"
      "Exit codes: 0 written; 2 bad input (one line); 3 the page could not be written;\n"
      "1 this build has no page (node/npm missing when it was built) or an internal error.");
  command->callback([&run, args] { run = [args] { return run_report(*args); }; });
}

}  // namespace rlmem::cli
