// SPDX-License-Identifier: MIT
// `rlmem diff A B`: what grew and shrank between two snapshots, by site and by category.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "output_format.hpp"
#include "progress.hpp"

#include <rlmem/inspect/compare.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/snapshot/snapshot_reader.hpp>

#include <limits>
#include <memory>
#include <string>

namespace rlmem::cli {

namespace {

struct diff_arguments {
  std::string a;
  std::string b;
  std::int64_t device = -1;
  std::size_t top = 15;
  std::size_t width = 100;
  output_choice output;
};

int run_diff(const diff_arguments& args) {
  if (!output_available(args.output)) return exit_internal;
  inspect_options choices;
  choices.device = args.device;
  choices.top = std::numeric_limits<std::size_t>::max();  // every site, so nothing is missed
  std::vector<rank_result> both = inspect_ranks({args.a, args.b}, choices, 2);
  for (const rank_result& one : both) {
    if (!one.ok) {
      print_error(one.file + ": " + one.failure);
      return exit_bad_input;
    }
  }
  inspection_diff diff = diff_inspections(both[0].result, both[1].result);
  switch (args.output.format) {
    case output_format::text: return write_output(args.output, render_diff_text(diff, args.a, args.b, args.top, {0, args.width}));
    case output_format::json: return write_output(args.output, render_diff_json(diff, args.a, args.b));
    case output_format::html: break;
  }
  return write_output(args.output, render_diff_html(diff, args.a, args.b));  // as `rlmem report A B`
}

}  // namespace

void add_diff_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<diff_arguments>();
  CLI::App* command = app.add_subcommand("diff", "What grew and shrank between two snapshots, by site and category");
  command->add_option("A", args->a, "The snapshot before (or rank 0)")->required()->check(CLI::ExistingFile);
  command->add_option("B", args->b, "The snapshot after (or rank 7)")->required()->check(CLI::ExistingFile);
  command->add_option("--device", args->device, "CUDA device to compare (default: the longest trace)")->check(whole_number_in(device_option));
  command->add_option("--top", args->top, "Rows per table")->capture_default_str()->check(whole_number_in(top_option));
  command->add_option("--width", args->width, "Columns of the text report")->capture_default_str()->check(whole_number_in(min_width, max_width));
  add_output_options(*command, args->output,
                     {"Print JSON (schema: docs/schema/diff.schema.json)", "Write the page `rlmem report A B` makes to this file ('-': standard output)"});
  command->footer("Compares live memory at each snapshot's peak and at its end, by allocation site and by\n"
                  "category. Examples:\n"
                  "  rlmem diff before.pickle after.pickle\n"
                  "  rlmem diff snapshots/rank0.pickle snapshots/rank7.pickle --top 5");
  command->callback([&run, args] { run = [args] { return run_diff(*args); }; });
}

}  // namespace rlmem::cli
