// SPDX-License-Identifier: MIT
// The page's formatBytes (web/format.js) prints every case of testdata/format/bytes_cases.json as
// format_bytes, the C++ reference, does. The page reads its numbers with JSON.parse, and so
// does this test: a count beyond 2^53 reaches both as the nearest double, as C++ converts it.
//   node format_test.mjs WEB_DIR CASES_JSON
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createContext, runInContext } from 'node:vm';

const [webDir, casesPath] = process.argv.slice(2);
const context = createContext({});
runInContext(readFileSync(join(webDir, 'format.js'), 'utf8'), context);
const { formatBytes } = runInContext('rlmemFormat', context);

const { cases } = JSON.parse(readFileSync(casesPath, 'utf8'));
let failed = 0;
for (const { bytes, text, why } of cases) {
  const seen = formatBytes(bytes);
  if (seen !== text) {
    failed++;
    console.log(`FAIL formatBytes(${bytes}): expected ${JSON.stringify(text)}, seen ${JSON.stringify(seen)}${why ? ` (${why})` : ''}`);
  }
}
if (cases.length < 30) {
  console.log(`FAIL expected the shared table's 30 or more cases, read ${cases.length}`);
  failed++;
}
console.log(failed ? `${failed} of ${cases.length} cases failed` : `all ${cases.length} cases print as format_bytes prints them`);
process.exit(failed ? 1 : 0);
