// SPDX-License-Identifier: MIT
#pragma once
// Whether a second thread can run beside this one: work split across threads (the reader's
// read-ahead scanning, inspect's live-set thread) pays only then, and on one usable core it
// is extra work and thread switches.

namespace rlmem {

/// True when the process may run on more than one CPU (its affinity mask, else the hardware).
bool several_cores_usable() noexcept;

}  // namespace rlmem
