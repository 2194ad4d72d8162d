#!/usr/bin/env bash
# Foundation acceptance: `ferry read` of a 1 GiB cached file into host memory with default settings,
# against `cat FILE > /dev/null`, measured alternately in the same run (medians of N).
# Usage: bench/host-read-vs-cat.sh FERRY_BINARY [FILE] [REPEATS]. Prints a Markdown table.
set -euo pipefail
ferry=$1
file=${2:-build/sample-1GiB.bin}
repeats=${3:-7}
[ -f "$file" ] || "$ferry" write "$file" --size 1GiB >/dev/null
size=$(stat -c %s "$file")
cat "$file" > /dev/null  # into the page cache
py=/usr/bin/python3
[ -x "$py" ] || py=python3
now() { date +%s.%N; }
cat_rates=(); ferry_rates=(); ferry_wall_rates=(); ops=""
for _ in $(seq "$repeats"); do
  t0=$(now); cat "$file" > /dev/null; t1=$(now)
  cat_rates+=("$($py -c "print($size / ($t1 - $t0) / 2**30)")")
  t0=$(now); json=$("$ferry" read "$file" --json); t1=$(now)
  ferry_rates+=("$($py -c 'import json,sys; print(json.loads(sys.argv[1])["gib_per_s"])' "$json")")
  ferry_wall_rates+=("$($py -c "print($size / ($t1 - $t0) / 2**30)")")
  ops=$($py -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["report"]["total_ops"], d["settings"]["threads"], d["report"]["io"])' "$json")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${cat_rates[@]}"); mf=$(median "${ferry_rates[@]}"); mw=$(median "${ferry_wall_rates[@]}")
echo "| what | median GiB/s (of $repeats) | ratio to cat |"
echo "|---|---|---|"
echo "| \`cat FILE > /dev/null\` (whole process) | $(printf %.2f "$mc") | 1.00 |"
echo "| \`ferry read FILE\` (transfer, as reported) | $(printf %.2f "$mf") | $($py -c "print(f'{$mf/$mc:.2f}')") |"
echo "| \`ferry read FILE\` (whole process, incl. start-up and buffer allocation) | $(printf %.2f "$mw") | $($py -c "print(f'{$mw/$mc:.2f}')") |"
echo
echo "ferry: operations, threads, I/O of the last run: $ops"
