// SPDX-License-Identifier: MIT
// `rlmem watch`: every GPU through NVML and a StepMonitor log, redrawn in place on a terminal.

#include "arguments.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "output_format.hpp"

#include <rlmem/report/report.hpp>
#include <rlmem/watch/watch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <poll.h>  // ppoll: a sleep that a signal ends without a race
#include <string>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace rlmem::cli {

namespace {

struct watch_arguments {
  std::string log;
  double interval = 2.0;
  std::size_t width = 0;  // 0: the terminal's width, or 100 when not a terminal
  bool once = false;
  output_choice output;
};

// Set by SIGINT and SIGTERM, read between refreshes: a signal handler can reach nothing else.
volatile std::sig_atomic_t stop_requested = 0;

extern "C" void request_stop(int) { stop_requested = 1; }

constexpr double min_interval = 0.1;
constexpr double max_interval = 86400;

// A log that exists must be a readable file; one that does not exist yet is waited for, but only
// in a folder that exists (a typo should not wait forever) and not with --once.
bool check_log_path(const std::string& path, bool once) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) return refuse("--log " + path + " is a folder; give the file StepMonitor writes");
    if (!S_ISREG(info.st_mode)) return refuse("--log " + path + " is not a regular file");
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return refuse("--log " + path + ": " + std::generic_category().message(errno));
    ::close(fd);
    return true;
  }
  if (errno != ENOENT) return refuse("--log " + path + ": " + std::generic_category().message(errno));
  if (once) return refuse("--log " + path + " does not exist (without --once, watch waits for it to appear)");
  std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code ignored;
  if (!folder.empty() && !std::filesystem::is_directory(folder, ignored)) {
    return refuse("--log " + path + ": the folder " + folder.string() + " does not exist");
  }
  return true;
}

struct terminal_size {
  std::size_t columns = 0;
  std::size_t rows = 0;
};

terminal_size size_of_terminal() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return {};
  return {size.ws_col, size.ws_row};
}

// A frame for redrawing in place: each line clears what a longer earlier frame left to its right,
// the end clears below, and a frame taller than the terminal is cut (a last newline on the last
// row would scroll the screen, which is what redrawing in place must never do).
std::string for_redraw(const std::string& frame, std::size_t rows) {
  std::string out = "\033[H";
  std::size_t start = 0;
  std::size_t lines = 0;
  std::size_t total = static_cast<std::size_t>(std::count(frame.begin(), frame.end(), '\n'));
  std::size_t room = rows > 1 ? rows - 1 : total;
  bool cut = total > room;
  std::size_t keep = cut ? room - 1 : total;
  while (start < frame.size() && lines < keep) {
    std::size_t end = frame.find('\n', start);
    out += frame.substr(start, end - start) + "\033[K\n";
    start = end + 1;
    ++lines;
  }
  if (cut) out += "(" + std::to_string(total - keep) + " more lines: a taller terminal shows them, or rlmem watch --once)\033[K\n";
  return out + "\033[J";
}

// Sleeps until `deadline` or a stop signal, whichever comes first. The signals are blocked
// between the check and ppoll, which unblocks them atomically: one that arrives in between
// still ends the sleep.
void sleep_until(std::chrono::steady_clock::time_point deadline) {
  sigset_t stops;
  sigset_t previous;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  while (true) {
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return;
    auto nanoseconds = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec timeout{static_cast<time_t>(nanoseconds / 1'000'000'000), static_cast<long>(nanoseconds % 1'000'000'000)};
    sigprocmask(SIG_BLOCK, &stops, &previous);
    bool stop = stop_requested != 0;
    if (!stop) ::ppoll(nullptr, 0, &timeout, &previous);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (stop || stop_requested != 0) return;
  }
}

// Hides the cursor while frames are redrawn and shows it again however the command ends.
class cursor_guard {
 public:
  explicit cursor_guard(bool active) : active_(active) {
    if (active_) (void)write_all("\033[?25l\033[2J");
  }
  ~cursor_guard() {
    if (active_) (void)write_all("\033[?25h");
  }
  cursor_guard(const cursor_guard&) = delete;
  cursor_guard& operator=(const cursor_guard&) = delete;

 private:
  bool active_;
};

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int run_watch(const watch_arguments& args) {
  if (!args.log.empty() && !check_log_path(args.log, args.once)) return exit_bad_input;
  gpu_status status;
  std::string library = nvml_library_path();
  std::unique_ptr<gpu_source> gpus = open_nvml_gpu_source(library, status);
  if (!gpus && args.log.empty()) {
    if (status.code == gpu_status::static_program) {
      refuse(status.message + ": use the dynamically linked build for the GPU view; rlmem watch --log FILE shows a "
           "StepMonitor log without it");
    } else {
      refuse("NVML is unavailable (" + status.message +
           "): no NVIDIA driver on this machine? rlmem watch --log FILE shows a StepMonitor log without it");
    }
    return exit_bad_input;
  }
  watch_options options;
  options.log_path = args.log;
  watch_session session(std::move(gpus), status.message, options);

  struct sigaction stop {};
  stop.sa_handler = request_stop;  // no SA_RESTART: a signal ends the sleep at once
  sigemptyset(&stop.sa_mask);
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  const bool json = args.output.format == output_format::json;
  const bool redraw = terminal && !args.once && !json;
  cursor_guard cursor(redraw);
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(args.interval));
  auto next = std::chrono::steady_clock::now();
  bool first = true;
  while (true) {
    watch_frame frame = session.refresh(unix_now());
    std::string text;
    if (json) {
      text = render_watch_json(frame);
    } else {
      terminal_size size = terminal ? size_of_terminal() : terminal_size{};
      std::size_t width = args.width != 0 ? args.width : size.columns != 0 ? std::clamp<std::size_t>(size.columns, 40, 1000) : 100;
      text = render_watch_text(frame, {width, 4, args.once ? 0.0 : args.interval});
      if (redraw) {
        text = for_redraw(text, size.rows);
      } else if (!first) {
        text = "\n" + text;  // not a terminal: frames one after another, a blank line between
      }
    }
    first = false;
    if (int error = write_all(text); error != 0) {
      // A stream ends when its reader leaves (`rlmem watch --json | head`); a single report cut short is an error.
      if (error == EPIPE && !args.once) return exit_ok;
      return report_write_failure(error);
    }
    if (args.once || stop_requested != 0) return exit_ok;
    // On schedule, without a burst of catch-up refreshes after a stall (a suspended terminal).
    next = std::max(next + interval, std::chrono::steady_clock::now());
    sleep_until(next);
    if (stop_requested != 0) return exit_ok;
  }
}

}  // namespace

void add_watch_command(CLI::App& app, command_body& run) {
  auto args = std::make_shared<watch_arguments>();
  CLI::App* command = app.add_subcommand("watch", "Live view of every GPU (NVML) and of a StepMonitor log, with advice");
  command->add_option("--log", args->log,
                      "A StepMonitor log (JSON lines) to follow: the job's allocated, reserved, fragmentation,\n"
                      "step peak, alloc retries, OOMs and alerts. Waited for if it does not exist yet");
  command->add_option("--interval", args->interval, "Seconds between refreshes")
      ->capture_default_str()
      ->check(decimal_in(min_interval, max_interval));
  command->add_flag("--once", args->once, "Print one report and exit (with --log: advice from the log's figures)");
  add_output_options(*command, args->output,
                     {"One JSON object per refresh, one per line (schema: docs/schema/watch.schema.json)", "", false});
  command->add_option("--width", args->width, "Columns of the text (default: the terminal's, or 100)")->check(whole_number_in(60, 1000));
  command->footer("Shows, per GPU, memory used / total and free, utilisation, and each process with its memory and\n"
                  "command line, as the driver (NVML) sees them; with --log, what PyTorch sees inside the job.\n"
                  "On a terminal the view is redrawn in place with a short history; Ctrl-C quits. Examples:\n"
                  "  rlmem watch                                # every GPU, every 2 s\n"
                  "  rlmem watch --log run/steps.jsonl          # plus the job's torch figures and alerts\n"
                  "  rlmem watch --once --log run/steps.jsonl   # one report with advice, for a script or a ticket\n"
                  "  rlmem watch --json --interval 10 >> gpus.jsonl\n"
                  "Write the log from the training loop with rlmem.StepMonitor (python/). NVML is loaded from\n"
                  "libnvidia-ml.so.1, or from $RLMEM_NVML_LIBRARY.");
  command->callback([&run, args] { run = [args] { return run_watch(*args); }; });
}

}  // namespace rlmem::cli
