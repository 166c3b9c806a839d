// SPDX-License-Identifier: MIT
// libFuzzer target for `rlmem watch --log`: every line through the StepMonitor log parser, the
// records through the advice rules and both renderers, with figures anywhere in int64.

#include <rlmem/base/format.hpp>
#include <rlmem/report/report.hpp>
#include <rlmem/watch/watch.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::deque<rlmem::steplog_record> records;
  std::deque<rlmem::steplog_alert_seen> alerts;
  while (!text.empty()) {
    std::size_t end = std::min(text.find('\n'), text.size());
    auto parsed = rlmem::parse_steplog_line(text.substr(0, end));
    if (parsed.ok()) {
      if (parsed.code() != rlmem::watch_errc::ok) __builtin_trap();
      rlmem::steplog_record record = std::move(parsed).value();
      for (const rlmem::steplog_alert& alert : record.alerts) alerts.push_back({record.step, record.time, alert});
      records.push_back(std::move(record));
    } else {
      // A refusal has a named code and says why in one line (once escaped, as watch shows it).
      const std::string& reason = parsed.failure().detail;
      if (parsed.code() == rlmem::watch_errc::ok || rlmem::error_name(parsed.code()) == "UNKNOWN") __builtin_trap();
      if (reason.empty() || rlmem::printable_text(reason).find('\n') != std::string::npos) __builtin_trap();
    }
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  rlmem::watch_frame frame;
  frame.time = records.empty() ? 0 : records.back().time + 1;
  frame.log.emplace();
  rlmem::summarise_steps(records, alerts, 20, 5, *frame.log);
  frame.advice = rlmem::advise(frame);
  // The text fits 60 columns (one per code point) and carries no control byte but newlines.
  std::string shown = rlmem::render_watch_text(frame, {60, 4, 2.0});
  std::size_t columns = 0;
  for (char c : shown) {
    auto byte = static_cast<unsigned char>(c);
    if (byte == '\n') {
      columns = 0;
      continue;
    }
    if (byte < 0x20 || byte == 0x7F) __builtin_trap();
    columns += (byte & 0xC0) != 0x80;
    if (columns > 60) __builtin_trap();
  }
  for (char c : rlmem::render_watch_json(frame)) {
    if (c != '\n' && (c < 0x20 || c > 0x7E)) __builtin_trap();  // ASCII, one line
  }
  return 0;
}
