// SPDX-License-Identifier: MIT
// `rlmem report FILE [-o out.html]`: the inspection and its views as one self-contained page.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "progress.hpp"

#include <rlmem/format.hpp>
#include <rlmem/inspect.hpp>
#include <rlmem/report.hpp>
#include <rlmem/views.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace rlmem::cli {

namespace {

struct report_arguments {
  std::string file;
  std::string output;
  std::int64_t device = -1;
  std::size_t top = 10;
  std::size_t bands = view_options{}.bands;
  std::string step_marker;
  std::string limit;
  std::string categories_file;
  bool quiet = false;
};

// "run.pickle.zst" -> "run.html", in the current directory.
std::string default_output(const std::string& snapshot_path) {
  std::string name = std::filesystem::path(snapshot_path).filename().string();
  for (std::string_view suffix : {".zst", ".gz", ".pickle", ".pkl"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) name.resize(name.size() - suffix.size());
  }
  return name + ".html";
}

// Writes the page next to its destination, then renames it over: a reader never finds half a
// page under the name. Returns exit_ok, or exit_cannot_write after the one line.
int write_page(const std::string& path, std::string_view page) {
  if (path == "-") return write_report(page);
  std::string partial = path + ".partial";
  int descriptor = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) {
    print_error("cannot write " + path + ": " + std::strerror(errno));
    return exit_cannot_write;
  }
  int error = 0;
  for (std::string_view rest = page; !rest.empty() && error == 0;) {
    ssize_t done = ::write(descriptor, rest.data(), rest.size());
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) {
      error = errno;
    } else {
      rest.remove_prefix(static_cast<std::size_t>(done));
    }
  }
  if (::close(descriptor) != 0 && error == 0 && errno != EINTR) error = errno;
  if (error == 0 && std::rename(partial.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(partial.c_str());
    print_error("cannot write " + path + ": " + std::strerror(error));
    return exit_cannot_write;
  }
  return exit_ok;
}

int run_report(const report_arguments& args) {
  if (!html_report_available()) {
    print_error("this rlmem was built without the report page's browser assets (node and npm were not found when it was "
                "configured): install nodejs and npm, configure and build again");
    return exit_internal;
  }
  std::error_code status;
  if (std::filesystem::is_directory(args.file, status)) {
    print_error(args.file + ": is a folder; rlmem report takes one snapshot file");
    return exit_bad_input;
  }
  inspect_options choices;
  choices.device = args.device;
  choices.top = args.top;
  choices.step_marker = args.step_marker;
  std::string message;
  if (!args.limit.empty() && !parse_size(args.limit, choices.limit_bytes, message)) {
    print_error("--limit " + message);
    return exit_bad_input;
  }
  if (!args.categories_file.empty() && !load_category_rules(args.categories_file, choices.category_rules, message)) {
    print_error("--categories " + message);
    return exit_bad_input;
  }
  snapshot snap;
  if (!load_snapshot(args.file, args.quiet, snap)) return exit_bad_input;
  inspection result;
  if (!inspect_checked(snap, choices, result, message)) {
    print_error(args.file + ": " + message);
    return exit_bad_input;
  }
  view_options detail;
  detail.bands = args.bands;
  memory_views views = build_memory_views(snap, result, choices.category_rules, detail);
  std::string page = render_inspection_html(snap, result, views, args.file);
  std::string path = args.output.empty() ? default_output(args.file) : args.output;
  int written = write_page(path, page);
  if (written == exit_ok && path != "-" && !args.quiet) {
    std::fprintf(stderr, "rlmem: wrote %s (%s)\n", printable_text(path).c_str(), format_bytes(page.size()).c_str());
  }
  return written;
}

}  // namespace

void add_report_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<report_arguments>();
  CLI::App* command = app.add_subcommand("report", "One self-contained HTML page to look at: timeline, active memory, the peak, leaks, fragmentation, OOMs");
  command->add_option("FILE", args->file, "Snapshot from torch.cuda.memory._dump_snapshot (.pickle, .gz or .zst)")->required();
  command->add_option("-o,--output", args->output, "Where to write the page ('-': standard output)\n(default: FILE's name with .html, in the current folder)");
  command->add_option("--device", args->device, "CUDA device to report (default: the one with the longest trace)")
      ->check(whole_number_in(0, max_device_index));
  command->add_option("--top", args->top, "Allocation sites listed at the peak")->capture_default_str()->check(whole_number_in(1, max_top));
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
      "the peak's stacks as a tree), so a 1 GB snapshot gives a page under 1 MB.\n"
      "Views: Timeline (allocated/reserved, steps, peaks, OOMs, categories; drag to zoom,\n"
      "double-click to reset, hover for the stack of the column's largest allocation),\n"
      "Active memory (the largest allocations as bands; hover, click to pin), At the peak\n"
      "(live memory as an icicle of stacks), Leaks, Fragmentation, OOM.\n"
      "Examples:\n"
      "  rlmem report snapshot.pickle                  # writes snapshot.html here\n"
      "  rlmem report oom.pickle.zst -o /tmp/oom.html --limit 2.6GiB\n"
      "  rlmem report run.pickle -o - | gzip > run.html.gz\n"
      "Exit codes: 0 written; 2 bad input (one line); 3 the page could not be written;\n"
      "1 this build has no page (node/npm missing when it was built) or an internal error.");
  command->callback([&run, args] { run = [args] { return run_report(*args); }; });
}

}  // namespace rlmem::cli
