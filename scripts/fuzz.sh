#!/usr/bin/env bash
# Runs cargo-fuzz targets for a while: scripts/fuzz.sh TARGET|all [SECONDS]
#
# TARGET is one of fuzz/Cargo.toml's [[bin]]s (run without arguments to list
# them); `all` runs every one in turn, SECONDS each (default 60). The targets'
# bodies live in crates/fuzzing (one function per target, documented there).
#
# Each target starts from its committed seeds (fuzz/corpus/TARGET/, read
# only) and from what earlier runs here found (fuzz/target/fuzz-corpus/TARGET/,
# where new inputs go; not committed). libFuzzer's output goes to
# fuzz/target/fuzz-logs/TARGET.log; per target this prints the runs executed
# and the failures found (crash, leak, timeout, out of memory). A failing
# input is kept in fuzz/artifacts/TARGET/ and copied into
# fuzz/regressions/TARGET/, which the test suite replays; the script exits
# non-zero if any target failed.
#
# Needs the nightly toolchain (`cargo +nightly`); installs cargo-fuzz from
# crates.io if it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"

# The targets, as fuzz/Cargo.toml declares them.
mapfile -t targets < <(awk '
    /^\[\[bin\]\]/ { bin = 1; next }
    /^\[/ { bin = 0 }
    bin && /^name *=/ { sub(/^name *= *"/, ""); sub(/".*/, ""); print }
' Cargo.toml)

usage() {
    echo "usage: scripts/fuzz.sh TARGET|all [SECONDS]" >&2
    echo "targets: ${targets[*]}" >&2
    exit 2
}
[ $# -ge 1 ] || usage
secs=${2:-60}
[[ $secs =~ ^[0-9]+$ ]] || usage
if [ "$1" = all ]; then
    run=("${targets[@]}")
else
    run=()
    for t in "${targets[@]}"; do
        [ "$t" = "$1" ] && run=("$t")
    done
    [ ${#run[@]} -eq 1 ] || { echo "fuzz.sh: no target $1" >&2; usage; }
fi

command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi

# Build first, so that a build error is not taken for a crash.
if [ "$1" = all ]; then
    cargo +nightly fuzz build
else
    cargo +nightly fuzz build "$1"
fi

mkdir -p target/fuzz-logs
summary=()
failed=0
for t in "${run[@]}"; do
    work=target/fuzz-corpus/$t
    log=target/fuzz-logs/$t.log
    mkdir -p "$work" "artifacts/$t" "corpus/$t"
    # What libFuzzer writes this run is what was not there before it.
    before=$(ls -1 "artifacts/$t")
    echo "== $t: ${secs}s (log: fuzz/$log)"
    status=0
    # -timeout: one input may take at most 20 s; -rss_limit_mb: 2 GiB.
    cargo +nightly fuzz run "$t" "$work" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    [ -n "$runs" ] || runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    # What libFuzzer wrote this run: crash-, leak-, timeout-, oom- inputs
    # (slow-unit- ones are only slow).
    mapfile -t found < <(comm -13 <(printf '%s\n' "$before" | sort) <(ls -1 "artifacts/$t" | sort) |
        grep -E '^(crash|leak|timeout|oom)-' | sed "s|^|artifacts/$t/|")
    if [ ${#found[@]} -gt 0 ]; then
        mkdir -p "regressions/$t"
        for f in "${found[@]}"; do
            cp "$f" "regressions/$t/"
            echo "   failing input: fuzz/regressions/$t/$(basename "$f")"
        done
        grep -m 3 -E '^(thread .* panicked|==[0-9]+==ERROR|SUMMARY)' "$log" | sed 's/^/   /' || true
        failed=1
    elif [ "$status" -ne 0 ] || [ -z "$runs" ]; then
        echo "   cargo fuzz run failed (exit $status) without a failing input; see fuzz/$log" >&2
        tail -n 20 "$log" | sed 's/^/   /' >&2
        failed=1
        found=(run-failed)
    fi
    line=$(printf '%-16s runs %12s  failures %s' "$t" "${runs:-?}" \
        "$([ "${found[0]:-}" = run-failed ] && echo "run failed (exit $status)" || echo "${#found[@]}")")
    echo "   $line"
    summary+=("$line")
done
if [ ${#run[@]} -gt 1 ]; then
    echo "== summary (${secs}s per target)"
    printf '   %s\n' "${summary[@]}"
fi
exit "$failed"
