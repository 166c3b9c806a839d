// SPDX-License-Identifier: MIT
// The byte sizes of `rlmem report`'s page, printed as the text report prints them: the page
// script's copy of format_bytes (include/rlmem/base/format.hpp, the reference). The cases of
// testdata/format/bytes_cases.json hold all three copies (C++, Python, this) to the same strings.
// A classic script: it defines rlmemFormat for web/report.js, and tests/web/format_test.mjs runs
// it in a node vm context.
'use strict';
// eslint-disable-next-line no-unused-vars
var rlmemFormat = (function () {
  const UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

  // `value` with `decimals` digits after the point, an exact half rounded to even as C++'s fmt
  // and Python do; toFixed alone rounds it away from zero (1.125 would print 1.13, not 1.12).
  // Every value here is below 1024, so 60 digits hold its binary fraction exactly.
  function fixed(value, decimals) {
    const rounded = value.toFixed(decimals);
    const exact = value.toFixed(60);
    const point = exact.indexOf('.');
    const kept = exact.slice(0, point + 1 + decimals);
    const rest = exact.slice(point + 1 + decimals);
    const lastDigit = Number(kept[kept.length - 1]);
    return /^50*$/.test(rest) && lastDigit % 2 === 0 ? kept : rounded;
  }

  // "512 B", "46.9 MiB", "1.25 GiB": binary units, two decimals below 10 of the unit, one from 10.
  function formatBytes(value) {
    if (value === null || value === undefined) return '';
    const sign = value < 0 ? '-' : '';
    const magnitude = Math.abs(value);
    if (magnitude < 1024) return sign + String(magnitude) + ' B';
    let scaled = magnitude / 1024;
    let unit = 0;
    while (scaled >= 1024 && unit + 1 < UNITS.length) { scaled /= 1024; unit++; }
    return sign + fixed(scaled, scaled < 10 ? 2 : 1) + ' ' + UNITS[unit];
  }

  return { formatBytes };
})();
