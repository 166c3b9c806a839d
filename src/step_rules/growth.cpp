// SPDX-License-Identifier: MIT
// The growth rule: is a series of step-end figures leaking? Robust statistics, because step ends
// carry whatever the step happened to leave alive (the last batch, a buffer sized by the
// longest response): a change point where growth began (a hinge fitted by least absolute
// deviations), the Theil-Sen slope after it, a significance test of that slope against the
// scatter of the series' own step-to-step changes, Mann-Kendall's trend test as a second bar,
// and the events (step ends that rose above the noise), whose spacing tells a leak that goes on
// from a cache that filled or a buffer that grows ever more rarely.

#include <rlmem/step_rules/step_rules.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace rlmem {

namespace {

// The scale factor that makes a median absolute deviation estimate a normal standard deviation.
constexpr double mad_to_sigma = 1.4826;

double median_of(std::vector<double>& values) {
  if (values.empty()) return 0;
  auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  double upper = *middle;
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), middle);
  return lower + (upper - lower) / 2;
}

// Median of the pairwise slopes of y against its index (Theil and Sen).
double theil_sen(std::span<const double> y, std::vector<double>& scratch) {
  scratch.clear();
  for (std::size_t i = 0; i < y.size(); ++i) {
    for (std::size_t j = i + 1; j < y.size(); ++j) scratch.push_back((y[j] - y[i]) / static_cast<double>(j - i));
  }
  return median_of(scratch);
}

// Mann-Kendall's normalised statistic, with the variance corrected for tied values. Values
// within `tolerance` of each other are ties: jitter on the flat treads of a staircase is not
// a fall.
double kendall_z(std::span<const double> y, double tolerance, std::vector<double>& scratch) {
  const std::size_t m = y.size();
  double s = 0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = i + 1; j < m; ++j) s += (y[j] - y[i] > tolerance) - (y[i] - y[j] > tolerance);
  }
  scratch.assign(y.begin(), y.end());
  std::sort(scratch.begin(), scratch.end());
  auto term = [](double count) { return count * (count - 1) * (2 * count + 5); };
  double variance = term(static_cast<double>(m));
  for (std::size_t i = 0; i < m;) {
    std::size_t j = i;
    while (j < m && scratch[j] - scratch[i] <= tolerance) ++j;
    variance -= term(static_cast<double>(j - i));
    i = j;
  }
  variance /= 18;
  if (variance <= 0 || s <= 0) return 0;
  return (s - 1) / std::sqrt(variance);
}

// Sum of absolute deviations of a hinge that is flat up to `start - 1` and linear from there:
// the change point is the start whose hinge fits best.
struct hinge_fit {
  double cost = 0;
  double slope = 0;
};

hinge_fit fit_hinge(std::span<const double> y, std::size_t start, std::vector<double>& scratch) {
  hinge_fit fit;
  std::span<const double> before = y.first(start);  // up to and including the baseline start - 1
  std::span<const double> after = y.subspan(start - 1);
  scratch.assign(before.begin(), before.end());
  double level = median_of(scratch);
  for (double value : before.first(before.size() - 1)) fit.cost += std::fabs(value - level);
  fit.slope = theil_sen(after, scratch);
  scratch.clear();
  for (std::size_t i = 0; i < after.size(); ++i) scratch.push_back(after[i] - fit.slope * static_cast<double>(i));
  double intercept = median_of(scratch);
  for (std::size_t i = 0; i < after.size(); ++i) {
    fit.cost += std::fabs(after[i] - intercept - fit.slope * static_cast<double>(i));
  }
  return fit;
}

std::int64_t to_bytes(double value) {
  constexpr double two_to_63 = 9223372036854775808.0;
  if (!(value == value)) return 0;
  if (value >= two_to_63) return INT64_MAX;
  if (value <= -two_to_63) return INT64_MIN;
  return static_cast<std::int64_t>(std::llround(value));
}

}  // namespace

growth_verdict judge_growth(std::span<const std::int64_t> bytes, const growth_rule& rule) {
  growth_verdict verdict;
  const std::size_t points = std::min(bytes.size(), std::max<std::size_t>(rule.max_points, 3));
  if (points < 3) return verdict;
  const std::size_t offset = bytes.size() - points;
  std::span<const std::int64_t> window = bytes.subspan(offset);
  // Figures relative to the smallest, in unsigned arithmetic: any int64 values, no overflow.
  const std::int64_t lowest = *std::min_element(window.begin(), window.end());
  std::vector<double> y(points);
  for (std::size_t i = 0; i < points; ++i) {
    y[i] = static_cast<double>(static_cast<std::uint64_t>(window[i]) - static_cast<std::uint64_t>(lowest));
  }
  std::vector<double> scratch;
  scratch.reserve(points * points / 2 + points);
  scratch.assign(y.begin(), y.end());
  const double level = static_cast<double>(lowest) + median_of(scratch);
  verdict.level_bytes = to_bytes(level);

  // The change point: the first step end of the growth, where a hinge fits best. Growth in the
  // first countable step end alone never starts one (the first step fills optimizer state).
  const std::size_t earliest = std::max<std::size_t>(1, offset >= rule.first_countable ? 1 : rule.first_countable - offset);
  if (earliest + 2 > points) return verdict;
  std::size_t start = points - 2;
  hinge_fit best = fit_hinge(y, start, scratch);
  for (std::size_t candidate = points - 2; candidate-- > earliest;) {
    hinge_fit fit = fit_hinge(y, candidate, scratch);
    if (fit.cost <= best.cost) {  // ties go to the longer growth
      best = fit;
      start = candidate;
    }
  }
  // Step-to-step changes, and their scatter: from before the change point when there are enough
  // of them (the growth's own steps would pass for noise), else around each side's median.
  std::vector<double> changes(points);
  for (std::size_t i = 1; i < points; ++i) changes[i] = y[i] - y[i - 1];
  auto scatter = [&](std::size_t from, std::size_t to, std::vector<double>& out) {
    scratch.assign(changes.begin() + static_cast<std::ptrdiff_t>(from), changes.begin() + static_cast<std::ptrdiff_t>(to));
    double centre = median_of(scratch);
    for (std::size_t i = from; i < to; ++i) out.push_back(std::fabs(changes[i] - centre));
  };
  std::vector<double> deviations;
  constexpr std::size_t enough_changes = 4;
  if (start - 1 >= enough_changes) {
    scatter(1, start, deviations);
  } else {
    if (start > 1) scatter(1, start, deviations);
    scatter(start, points, deviations);
  }
  const double change_sigma = mad_to_sigma * median_of(deviations);
  // Step ends that rise and fall in a pattern (batch sizes that cycle, the last batch left
  // alive) change by a regular amount each step, which the changes' scatter misses; the spread of
  // the levels before the change point sees it.
  double level_sigma = 0;
  if (start >= enough_changes) {
    scratch.assign(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(start));
    double centre = median_of(scratch);
    for (double& value : scratch) value = std::fabs(value - centre);
    level_sigma = mad_to_sigma * median_of(scratch);
  }
  const double sigma = std::max({change_sigma / std::sqrt(2.0), level_sigma, 1e-3, 1e-9 * std::fabs(level)});
  // The scatter the series showed before the growth, 0 when it had too few step ends to tell.
  const double noise_before = start - 1 >= enough_changes ? std::max(change_sigma / std::sqrt(2.0), level_sigma) : 0.0;
  verdict.noise_bytes = to_bytes(sigma);

  const double rate_floor = std::max(rule.min_relative_rate * std::fabs(level), static_cast<double>(rule.min_bytes_per_step));
  const double event_floor = std::max(rule.event_noise_factor * change_sigma, rate_floor / 2);
  // A staircase's best hinge can start one stair late, on the first stair's top: growth began
  // at the rise into the hinge's baseline.
  const std::size_t fitted = start;
  while (start > earliest && changes[start - 1] > event_floor) --start;
  if (start != fitted) best = fit_hinge(y, start, scratch);
  std::vector<std::size_t> events;
  std::vector<double> event_sizes;
  for (std::size_t i = start; i < points; ++i) {
    if (changes[i] > event_floor && changes[i] > 0) {
      events.push_back(i);
      event_sizes.push_back(changes[i]);
    }
  }
  verdict.first = start + offset;
  verdict.steps = points - start;
  verdict.events = events.size();
  const double m = static_cast<double>(points - start + 1);
  const double spread = std::sqrt(m * (m * m - 1) / 12);  // root of the sum of squared index deviations
  // Significance from the slope, which spikes (a long batch left alive) barely move, not from
  // the events' rate, which they make.
  verdict.z = best.slope / sigma * spread;
  // Over a quiet series, jitter on the treads of a staircase is no fall; over a noisy one every
  // rise and fall counts.
  const std::span<const double> stretch = std::span<const double>(y).subspan(start - 1);
  const bool noisy = noise_before > best.slope / 2;  // the noise before hides single steps of the growth
  verdict.kendall_z = kendall_z(stretch, noisy ? 0.0 : event_floor, scratch);
  verdict.bytes_per_step = to_bytes(best.slope);

  // The trend path: where the noise before the growth hides single steps (step ends that
  // follow the response length, batch sizes that cycle), a long stretch whose slope and trend
  // are both strongly significant is a leak by itself. Where it is quiet, events judge.
  bool trend = noisy && m >= static_cast<double>(rule.trend_min_points) && verdict.z >= rule.trend_min_z &&
              verdict.kendall_z >= rule.trend_min_kendall_z && best.slope > 0 && best.slope >= rate_floor;
  if (trend) {
    // ... and still growing: the newer half of the stretch keeps at least a quarter of the slope
    // (a cache that filled and stopped is a significant trend with a flat end).
    const std::size_t newer = std::max<std::size_t>(4, (points - start + 1) / 2);
    trend = theil_sen(std::span<const double>(y).last(newer), scratch) >= 0.25 * best.slope;
  }
  if (events.empty()) {
    verdict.growing = trend;
    return verdict;
  }
  verdict.last_event = events.back() + offset;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < events.size(); ++i) gaps.push_back(static_cast<double>(events[i] - events[i - 1]));
  // Events at more than half the step ends are growth every step (of varying size, or with
  // noise hiding a few); fewer are growth every few steps, `period` apart.
  const bool every_step = 2 * events.size() > points - start;
  scratch = gaps;
  const double period = every_step ? 1.0 : gaps.empty() ? 0 : std::max(1.0, std::round(median_of(scratch)));
  verdict.period = static_cast<std::size_t>(period);

  // The rate: over a stretch that grows at most step ends, the slope; where events come every
  // few steps, the slope of a staircase depends on where it is cut, and the mean event over the
  // period does not.
  double rate = best.slope;
  const double growth_steps = static_cast<double>(points - start);
  if (every_step && 2 * noise_before < 0.05 * best.slope * growth_steps) {
    // Growth of varying size (with the response length): the slope is its median step, what
    // fills the card is the mean, and where the series was quiet before the growth (or the
    // growth is all there is) the ends measure it.
    rate = (y.back() - y[start - 1]) / growth_steps;
  } else if (period >= 2 && !trend) {
    double total = 0;
    for (double size : event_sizes) total += size;
    rate = total / static_cast<double>(event_sizes.size()) / period;
  }
  verdict.bytes_per_step = to_bytes(rate);

  // Events needed: `min_events` where they come every step; where they come every few steps,
  // two alike ones suffice up to a period of `max_two_event_period`, else `min_events`.
  std::size_t needed = rule.min_events;
  bool similar = true;  // the events of a sparse leak are alike; a high-water mark's seldom
  if (period >= 2) {
    auto [smallest, largest] = std::minmax_element(event_sizes.begin(), event_sizes.end());
    similar = events.size() >= rule.alike_until_events || *largest <= rule.sparse_size_ratio * *smallest;
    const bool settled = start >= rule.settled_steps;  // not a warm-up still filling caches and buffers
    needed = settled && static_cast<double>(rule.max_two_event_period) >= period ? rule.min_sparse_events : rule.min_events;
  }
  // Without step ends before the growth to measure the noise on, a run of rises can be chance.
  if (start - 1 < enough_changes) needed = std::max(needed, rule.min_events + rule.extra_events_without_history);
  // Where the noise hides single steps, events are the noise's own: only the trend judges there.
  const bool by_events = !noisy && events.size() >= std::max<std::size_t>(needed, 2) && verdict.z >= rule.min_z &&
                         verdict.kendall_z >= rule.min_kendall_z && rate > 0 && rate >= rate_floor && similar;
  if (!by_events && !trend) return verdict;
  // Going on? The gap since the last event, and whether the gaps widen.
  const double quiet = static_cast<double>(points - 1 - events.back());
  const double allowed = std::max(2.0, rule.stop_after_periods * std::max(period, 1.0));
  // Thinning: the later half of the gaps between events is on average `widening_gap_factor`
  // times the earlier half. A leak's events keep their pace; a buffer that follows the longest
  // length seen grows ever more rarely (a new longest length at step t comes with odds 1/t).
  bool widening = false;
  if (!every_step && gaps.size() >= 2 && gaps.back() >= 3) {
    const std::size_t half = gaps.size() / 2;
    double early = 0;
    double late = 0;
    for (std::size_t i = 0; i < gaps.size(); ++i) (i < half ? early : late) += gaps[i];
    early /= static_cast<double>(half);
    late /= static_cast<double>(gaps.size() - half);
    widening = late > rule.widening_gap_factor * early;
  }
  // A trend over a noisy stretch needs no events to go on; growth judged by its events does.
  if (!trend && (quiet > allowed || widening)) {
    verdict.stopped = true;
  } else {
    verdict.growing = true;
  }
  return verdict;
}

}  // namespace rlmem
