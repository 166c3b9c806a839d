# Sourced by the CLI's test scripts (output.sh, output_format.sh): the lines each check prints, and
# the check of a refusal. The script sets rlmem, work and failures=0 before sourcing it.

fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

# `expect_refused EXPECTED ARGS...`: rlmem ARGS exits 2 with one line on stderr holding EXPECTED
# and nothing on stdout.
expect_refused() {
  local expected=$1; shift
  "$rlmem" "$@" >"$work/out" 2>"$work/err"
  local code=$?
  if [ "$code" -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ] || [ -s "$work/out" ] || ! grep -qF -- "$expected" "$work/err"; then
    fail "$*: expected exit 2, one line with '$expected', empty stdout; saw exit $code, stderr: $(cat "$work/err")"
  else
    ok "$*: $(cat "$work/err")"
  fi
}
