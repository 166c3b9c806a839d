// SPDX-License-Identifier: MIT
#pragma once
// Synthetic step-end series for the growth rule: the shapes of docs/monitor.md's matrix over a
// job's level, with the noise measured on the recorded runs (testdata/monitor/matrix/): what a
// step end carries besides the leak (the last batch left alive follows the response length;
// a few KB of jitter) and how often that happens.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace rlmem::testing {

enum class synthetic_shape {
  clean,          ///< flat, with the noise
  warmup_cache,   ///< grows every step for a few steps early, then stops
  high_water,     ///< a buffer re-grown to the longest length drawn so far
  leak_constant,  ///< the same bytes kept every step from the start step
  leak_every_k,   ///< the same bytes kept every k-th step (k from 2 to 4)
  leak_length,    ///< bytes kept every step in proportion to the step's response length
  leak_slow,      ///< 0.03% to 0.06% of the level kept every step
};

inline const char* shape_name(synthetic_shape shape) {
  switch (shape) {
    case synthetic_shape::clean: return "clean";
    case synthetic_shape::warmup_cache: return "warmup_cache";
    case synthetic_shape::high_water: return "high_water";
    case synthetic_shape::leak_constant: return "leak_constant";
    case synthetic_shape::leak_every_k: return "leak_every_k";
    case synthetic_shape::leak_length: return "leak_length";
    case synthetic_shape::leak_slow: return "leak_slow";
  }
  return "?";
}

/// The noise of step-end allocated bytes, as measured on the recorded runs (shares of the level).
struct noise_profile {
  const char* name;
  double length_share;  ///< step-end bytes that follow the response length (last batch alive), at the longest
  double jitter_share;  ///< standard deviation of small jitter
  double jitter_rate;   ///< share of step ends that carry jitter
};

/// Profiles seen on the recorded runs: exact flat step ends (the loop frees everything), a few KB
/// of jitter now and then, and the last batch left alive until the next step replaces it.
inline const std::vector<noise_profile>& recorded_noise_profiles() {
  static const std::vector<noise_profile> profiles = {
      {"flat", 0.0, 0.0, 0.0},
      {"jitter", 0.0, 2e-6, 0.3},
      {"last_batch", 0.10, 2e-6, 0.3},
  };
  return profiles;
}

struct synthetic_series {
  synthetic_shape shape = synthetic_shape::clean;
  std::string noise;
  std::vector<std::int64_t> allocated;  ///< [0] is step end 1
  std::vector<double> held;             ///< bytes the leak (cache, buffer) holds at each step end
  bool leaking = false;
  std::size_t start = 0;  ///< index of the first step end holding leaked bytes
  double bytes_per_step = 0;  ///< the leak's true mean rate
  std::size_t stop = 0;   ///< warmup_cache, high_water: index of the last growth
  bool discrete_lengths = false;

  /// The leak's true rate over its step ends up to index `at`: what it held there over them
  /// (a leak kept every k-th step: its mean rate).
  double rate_at(std::size_t at) const {
    if (shape != synthetic_shape::leak_length) return bytes_per_step;
    return held[at] / static_cast<double>(at - start + 1);
  }
};

/// One series of `steps` step ends of `shape` under `noise`, at a level drawn from 0.2 to 40 GiB.
inline synthetic_series make_series(synthetic_shape shape, const noise_profile& noise, std::size_t steps, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double level = std::exp(std::log(0.2e9) + unit(rng) * (std::log(40e9) - std::log(0.2e9)));
  synthetic_series series;
  series.shape = shape;
  series.noise = noise.name;
  // Response lengths: a few discrete values, or a long-tailed continuous draw.
  const bool discrete = unit(rng) < 0.5;
  series.discrete_lengths = discrete;
  auto draw_length = [&]() {
    if (discrete) return (1.0 + std::floor(unit(rng) * 4)) / 4;
    return std::min(1.0, 0.1 + std::exp(std::log(0.05) * unit(rng)) * 0.9);
  };
  std::normal_distribution<double> gauss(0.0, 1.0);
  series.start = 6 + static_cast<std::size_t>(unit(rng) * static_cast<double>(std::max<std::size_t>(steps / 3, 1)));
  const std::size_t every = 2 + static_cast<std::size_t>(unit(rng) * 3);
  const double rate = level * (shape == synthetic_shape::leak_slow ? 3e-4 + unit(rng) * 3e-4 : 5e-4 + unit(rng) * 2e-2);
  const std::size_t fill_steps = 3 + static_cast<std::size_t>(unit(rng) * 6);
  const double cache_step = level * (1e-3 + unit(rng) * 1e-2);
  const double buffer_share = 0.005 + unit(rng) * 0.03;
  double kept = 0;
  double longest = 0;
  for (std::size_t i = 0; i < steps; ++i) {
    const double length = draw_length();
    double value = level + noise.length_share * level * length;
    if (noise.jitter_rate > 0 && unit(rng) < noise.jitter_rate) value += noise.jitter_share * level * gauss(rng);
    switch (shape) {
      case synthetic_shape::clean: break;
      case synthetic_shape::warmup_cache:
        kept = cache_step * static_cast<double>(std::min(i, fill_steps));
        series.stop = fill_steps;
        break;
      case synthetic_shape::high_water:
        if (length > longest) {
          longest = length;
          if (i > 0) series.stop = i;
        }
        kept = buffer_share * level * longest;
        break;
      case synthetic_shape::leak_constant:
      case synthetic_shape::leak_slow:
        if (i >= series.start) kept += rate;
        break;
      case synthetic_shape::leak_every_k:
        if (i >= series.start && (i - series.start) % every == 0) kept += rate * static_cast<double>(every);
        break;
      case synthetic_shape::leak_length:
        if (i >= series.start) kept += rate * 2 * length;
        break;
    }
    series.allocated.push_back(static_cast<std::int64_t>(value + kept));
    series.held.push_back(kept);
  }
  series.leaking = shape == synthetic_shape::leak_constant || shape == synthetic_shape::leak_slow ||
                   shape == synthetic_shape::leak_every_k || shape == synthetic_shape::leak_length;
  if (series.leaking) {
    series.bytes_per_step = shape == synthetic_shape::leak_length ? kept / static_cast<double>(steps - series.start) : rate;
  }
  return series;
}

}  // namespace rlmem::testing
