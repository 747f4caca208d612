# Shared by the bench scripts: `source bench/lib.sh` after setting $runs.

# Median wall time in milliseconds of a shell command, run $runs times.
median_ms() {
    local times=()
    for _ in $(seq "$runs"); do
        local t0 t1
        t0=$(date +%s%N)
        bash -c "$1" >/dev/null 2>&1
        t1=$(date +%s%N)
        times+=($(((t1 - t0) / 1000000)))
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
