// SPDX-License-Identifier: MIT
#pragma once
// The model layer: PyTorch's CUDA caching allocator, once, below inspect and replay.
//   allocator_settings.hpp  the settings (PYTORCH_CUDA_ALLOC_CONF, a snapshot's recorded ones)
//   allocator_rules.hpp     rounding, pools, segment sizes, which block serves and when it splits
//   live_set.hpp            the live blocks at trace start and event by event (inspect's view)
//   allocator_policy.hpp    the seam between a trace driver and a simulated allocator
//   caching_allocator.hpp   the simulation of the native allocator (replay's what-ifs)
//   trace_simulation.hpp    one pass of a snapshot's trace through that simulation
//   saturating.hpp          byte sums held at the ends of their range

#include <rlmem/policy/allocator_policy.hpp>
#include <rlmem/model/allocator_rules.hpp>
#include <rlmem/model/allocator_settings.hpp>
#include <rlmem/model/caching_allocator.hpp>
#include <rlmem/model/live_set.hpp>
#include <rlmem/base/saturating.hpp>
#include <rlmem/model/trace_simulation.hpp>
