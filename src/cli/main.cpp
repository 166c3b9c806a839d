// SPDX-License-Identifier: MIT
// The rlmem executable: parses the command line and runs one subcommand.

#include "commands.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  CLI::App app{"rlmem: GPU memory of PyTorch jobs (RL fine-tuning above all), measured rather than guessed.\n"
               "Reads torch.cuda.memory._dump_snapshot() files safely: nothing in them is ever executed.",
               "rlmem"};
  app.set_version_flag("--version", "rlmem 0.1.0");
  app.require_subcommand(1);
  app.footer("Record a snapshot in your job:\n"
             "  torch.cuda.memory._record_memory_history(max_entries=1_000_000)\n"
             "  ...  # run a few steps\n"
             "  torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")\n"
             "then: rlmem inspect snapshot.pickle");
  rlmem::cli::command_body run;
  rlmem::cli::add_inspect_command(app, run);
  rlmem::cli::add_diff_command(app, run);
  rlmem::cli::add_replay_command(app, run);
  rlmem::cli::add_plan_command(app, run);
  rlmem::cli::add_watch_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& failure) {
    std::fprintf(stderr, "rlmem: %s (try rlmem --help)\n", failure.what());
    return rlmem::cli::exit_bad_input;
  }
  try {
    return run ? run() : rlmem::cli::exit_bad_input;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "rlmem: out of memory\n");
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "rlmem: internal error: %s\n", failure.what());
  }
  return rlmem::cli::exit_internal;
}
