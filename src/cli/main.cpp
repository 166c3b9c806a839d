// SPDX-License-Identifier: MIT
// The rlmem executable: parses the command line and runs one subcommand.

#include "commands.hpp"
#include "output.hpp"
#include "parse_errors.hpp"

#include <rlmem/version.h>

#include <exception>
#include <new>
#include <string>

int main(int argc, char** argv) {
  rlmem::cli::hold_standard_descriptors();
  CLI::App app{"rlmem: GPU memory of PyTorch jobs (RL fine-tuning above all), measured rather than guessed.\n"
               "Reads torch.cuda.memory._dump_snapshot() files safely: nothing in them is ever executed.",
               "rlmem"};
  app.set_version_flag("--version", "rlmem " RLMEM_VERSION_STRING);
  app.require_subcommand(1);
  app.footer("Record a snapshot in your job:\n"
             "  torch.cuda.memory._record_memory_history(max_entries=1_000_000)\n"
             "  ...  # run a few steps\n"
             "  torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")\n"
             "then: rlmem inspect snapshot.pickle\n"
             "Exit codes: 0 done; 1 internal error or out of memory; 2 bad input or usage (one line on stderr);\n"
             "3 the report could not be written (disk full, stdout closed; no message when its reader left early).");
  rlmem::cli::command_body run;
  rlmem::cli::add_inspect_command(app, run);
  rlmem::cli::add_report_command(app, run);
  rlmem::cli::add_diff_command(app, run);
  rlmem::cli::add_replay_command(app, run);
  rlmem::cli::add_plan_command(app, run);
  rlmem::cli::add_watch_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return rlmem::cli::finish_output(app.exit(help));
  } catch (const CLI::CallForAllHelp& help) {
    return rlmem::cli::finish_output(app.exit(help));
  } catch (const CLI::CallForVersion& version) {
    return rlmem::cli::finish_output(app.exit(version));
  } catch (const CLI::ParseError& failure) {
    rlmem::cli::print_error(rlmem::cli::plain_parse_error(failure, app));
    return rlmem::cli::exit_bad_input;
  }
  if (const std::string refusal = rlmem::cli::empty_value_refusal(app); !refusal.empty()) {
    rlmem::cli::print_error(refusal);
    return rlmem::cli::exit_bad_input;
  }
  // Reports are built whole before the one write, so a failure here leaves stdout empty.
  try {
    return rlmem::cli::finish_output(run ? run() : rlmem::cli::exit_bad_input);
  } catch (const std::bad_alloc&) {
    rlmem::cli::print_error("out of memory");
  } catch (const std::exception& failure) {
    rlmem::cli::print_error(std::string("internal error: ") + failure.what());
  }
  return rlmem::cli::exit_internal;
}
