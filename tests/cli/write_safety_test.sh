#!/usr/bin/env bash
# `ferry write` never destroys what it should not (issue 10): a symlink planted under a temporary name is
# never written through; devices, FIFOs and directories are refused, never replaced; a symlink destination
# is written through, the link kept; a file `>` could not write is refused, and modes and owners are kept;
# an interrupted write leaves the old file and no temporary; long names work; errors name the user's file.
# The attacker and the unprivileged caller are real processes of another user (nobody), where the tests run
# as root (CI does); those checks are skipped, saying why, elsewhere.
# Usage: write_safety_test.sh FERRY_BINARY SCRATCH_DIR
set -u
source "$(dirname "$0")/cli_test_lib.sh" "$@"

if other_setup; then other=1; else other=0; fi
why_no_other="needs root and setpriv, to act as user nobody"
leftovers() { ls -A "$1" | grep -E 'ferry-partial|^\.ferry-' ; }

# --- Item 2: a symlink planted under the temporary name ---------------------------------------------------
if [ "$other" = 1 ]; then
  shared="$odir/shared"
  mkdir -p "$shared" && chmod 1777 "$shared"
  victim="$odir/victim.bin"
  echo "the victim's bytes" >"$victim"
  # The names the old code used, FILE.ferry-partial-<pid>, for the next 3000 pids: planted by one process (so
  # that planting uses up no pids), as the other user.
  next=$(sh -c 'echo $$')
  as_other "$py" -c 'import os, sys
first, victim, shared = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for p in range(first, first + 3000):
    for name in ("out.bin", "bench.bin"):
        os.symlink(victim, "%s/%s.ferry-partial-%d" % (shared, name, p))' "$next" "$victim" "$shared"
  expect "root writes into a sticky directory with planted symlinks" 0 "wrote 64.00 KiB" -- \
    write "$shared/out.bin" --size 64KiB
  expect "root bench creates a file beside planted symlinks" 0 "host" -- \
    bench "$shared/bench.bin" --size 64KiB --routes host --baselines none --repeats 1 --no-progress
  holds "the symlinks' target is intact" grep -qx "the victim's bytes" "$victim"
  holds "the written file is a regular file of 64 KiB" test -f "$shared/out.bin" -a ! -L "$shared/out.bin" \
    -a "$(stat -c %s "$shared/out.bin")" = 65536
  holds "the planted symlinks are left as they were" test "$(find "$shared" -type l | wc -l)" = 6000
  [ -z "$(ls -A "$shared" | grep '^\.ferry-')" ] && pass "no temporary left" || fail "a temporary was left"
  # The named fallback (file systems without O_TMPFILE): O_EXCL|O_NOFOLLOW under a random name.
  FERRY_CLI_TEST_NO_O_TMPFILE=1 expect "named temporary: write" 0 "wrote 64.00 KiB" -- write "$shared/named.bin" --size 64KiB
  holds "named temporary: the target is intact" grep -qx "the victim's bytes" "$victim"
  [ -z "$(ls -A "$shared" | grep '^\.ferry-')" ] && pass "named temporary: nothing left" || fail "named temporary left"
else
  skip "planted symlinks" "$why_no_other"
fi

# --- Item 3: not a regular file ----------------------------------------------------------------------------
mkfifo "$dir/fifo"
out=$(timeout 20 "$ferry" write "$dir/fifo" --size 1MiB 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q 'failed_precondition: Could not write ".*fifo": it is a FIFO, not a regular file' <<<"$out" \
  && pass "a FIFO is refused (no hang)" || fail "FIFO: exit $rc: $out"
holds "the FIFO is still a FIFO" test -p "$dir/fifo"
if [ "$(id -u)" = 0 ] && mknod "$dir/null" c 1 3 2>/dev/null; then
  expect "a character device is refused" 1 'Could not write ".*null": it is a character device, not a regular file' -- \
    write "$dir/null" --size 1MiB
  holds "the device node is still a device node" test -c "$dir/null"
  ln -s "$dir/null" "$dir/link-to-device"
  expect "a symlink to a device is refused" 1 "it leads to a character device" -- write "$dir/link-to-device" --size 1k
  holds "the device node behind the link is still one" test -c "$dir/null"
else
  skip "device node" "mknod needs root"
fi
expect "a directory is refused" 1 'is_a_directory: Could not write ".*": it is a directory' -- write "$dir" --size 1k

# A symlink destination: written through, the link kept.
echo old >"$dir/real.bin"
ln -s real.bin "$dir/link.bin"
expect "write through a symlink" 0 'through its link, replacing ".*real.bin"' -- write "$dir/link.bin" --size 8KiB
holds "the link is still a link" test -L "$dir/link.bin"
holds "its target has the new data" test "$(stat -c %s "$dir/real.bin")" = 8192
ln -s no-such-file "$dir/dangling"
expect "a dangling symlink is refused" 1 'not_found: Could not write ".*dangling": it is a symbolic link to "no-such-file", which does not exist' \
  -- write "$dir/dangling" --size 1k
holds "nothing was created for it" test ! -e "$dir/no-such-file"
if [ "$other" = 1 ]; then
  # Another user's symlink in a sticky, world-writable directory is not followed (fs.protected_symlinks),
  # even where that sysctl is off.
  as_other ln -s "$victim" "$shared/trap.bin"
  expect "another user's symlink in a sticky directory is refused" 1 \
    'permission_denied: Could not write ".*trap.bin": it is a symbolic link owned by another user' -- \
    write "$shared/trap.bin" --size 1k
  holds "its target is intact" grep -qx "the victim's bytes" "$victim"
fi

# --- Item 11: permissions, modes and owners ----------------------------------------------------------------
(umask 027 && "$ferry" write "$dir/new.bin" --size 1k >/dev/null)
holds "a new file gets 0666 & ~umask" test "$(stat -c %a "$dir/new.bin")" = 640
echo keep >"$dir/mode.bin" && chmod 0604 "$dir/mode.bin"
"$ferry" write "$dir/mode.bin" --size 1k >/dev/null
holds "a replaced file keeps its mode" test "$(stat -c %a "$dir/mode.bin")" = 604
if [ "$other" = 1 ]; then
  echo precious >"$shared/readonly.bin" && chmod 0444 "$shared/readonly.bin"
  expect_as_other "another user's read-only file is refused" 1 \
    'permission_denied: Could not write ".*readonly.bin": Permission denied \(EACCES\)' -- write "$shared/readonly.bin" --size 1k
  holds "it is intact, mode 0444" test "$(cat "$shared/readonly.bin")" = precious -a "$(stat -c %a "$shared/readonly.bin")" = 444
  echo theirs >"$shared/writable.bin" && chmod 0666 "$shared/writable.bin"
  expect_as_other "another user's writable file in a sticky directory is refused before writing" 1 \
    'Could not write ".*writable.bin": it belongs to another user \(uid 0\) in a sticky directory' -- \
    write "$shared/writable.bin" --size 1k
  holds "it is intact" test "$(cat "$shared/writable.bin")" = theirs
  as_other sh -c "echo mine > '$shared/nobodys.bin' && chmod 0640 '$shared/nobodys.bin'"
  expect_as_other "the owner replaces their own file" 0 "wrote 1.00 KiB" -- write "$shared/nobodys.bin" --size 1k
  holds "it keeps mode 0640" test "$(stat -c %a "$shared/nobodys.bin")" = 640
  "$ferry" write "$shared/nobodys.bin" --size 2k >/dev/null
  holds "root replacing it keeps owner and group" test "$(stat -c %u:%g:%a "$shared/nobodys.bin")" = 65534:65534:640
  # The temporary is made in the directory: an unwritable one is refused, naming the user's file.
  mkdir -p "$odir/closed" && chmod 0755 "$odir/closed"
  expect_as_other "an unwritable directory names the user's file" 1 \
    "permission_denied: Could not write \"$odir/closed/x.bin\": creating a file in \"$odir/closed\": Permission denied \(EACCES\)" \
    -- write "$odir/closed/x.bin" --size 1k
  expect_as_other "bench names the user's file too" 1 "Could not write \"$odir/closed/b.bin\"" -- \
    bench "$odir/closed/b.bin" --size 64KiB --routes host --baselines none --repeats 1 --no-progress
  out=$(as_other "$oferry" write "$odir/closed/x.bin" --size 1k 2>&1)
  grep -qE 'ferry-partial|/proc/self/fd' <<<"$out" && fail "an error names a temporary: $out" || pass "no temporary named"
else
  skip "permissions of another user" "$why_no_other"
fi

# --- Low items: long names ------------------------------------------------------------------------------
long=$(printf 'n%.0s' $(seq 1 255))
expect "a 255-byte file name" 0 "wrote 1.00 KiB" -- write "$dir/$long" --size 1k
holds "it exists" test -f "$dir/$long"

# --- Item 7: signals -------------------------------------------------------------------------------------
mkdir -p "$dir/sig"
# signal_test SIG WANT_RC LABEL [ENV...]: starts a large, slow write over an existing file, waits until its
# temporary exists, sends SIG, and checks the exit status, the old file and that nothing is left behind.
signal_test() {
  local sig=$1 want=$2 label=$3
  shift 3
  echo "old contents" >"$dir/sig/dest.bin"
  # Bash starts background jobs with SIGINT ignored (there is no job control in a script), and ferry leaves
  # an ignored signal ignored: python restores the default first, as an interactive shell would have it.
  env "$@" "$py" -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
    "$ferry" write "$dir/sig/dest.bin" --size 256MiB --direct-io on --threads 1 --task-size 64KiB \
    >"$dir/sig/out.txt" 2>&1 &
  local pid=$! seen=0
  for _ in $(seq 1 1500); do
    # An O_TMPFILE file shows in /proc/PID/fd as "DIR/#INODE (deleted)"; a named one in the directory.
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "$dir/sig/#" || [ -n "$(leftovers "$dir/sig")" ]; then
      seen=1
      break
    fi
    sleep 0.01
  done
  local name="SIG$sig during write ($label)"
  # Frozen, it cannot finish between this check and the signal (a fast disk could otherwise win the race).
  kill -STOP "$pid" 2>/dev/null
  for _ in $(seq 1 500); do grep -q '^State:.*T' "/proc/$pid/status" 2>/dev/null && break; sleep 0.01; done
  if ! grep -q '^State:.*T' "/proc/$pid/status" 2>/dev/null || ! grep -qx "old contents" "$dir/sig/dest.bin"; then
    kill -CONT "$pid" 2>/dev/null
    wait "$pid"
    skip "$name" "the write finished before it could be stopped"
    return
  fi
  kill "-$sig" "$pid"
  kill -CONT "$pid"
  wait "$pid"
  local rc=$?
  [ "$seen" = 1 ] || fail "$name: the temporary file never appeared"
  [ "$rc" = "$want" ] && pass "$name: exit $want" || fail "$name: exit $rc, wanted $want: $(head -c 300 "$dir/sig/out.txt")"
  holds "$name: the old file is intact" grep -qx "old contents" "$dir/sig/dest.bin"
  [ -z "$(leftovers "$dir/sig")" ] && pass "$name: no temporary left" || fail "$name: left $(leftovers "$dir/sig")"
}
signal_test INT 130 "O_TMPFILE"
signal_test TERM 143 "O_TMPFILE"
signal_test INT 130 "named temporary" FERRY_CLI_TEST_NO_O_TMPFILE=1
signal_test TERM 143 "named temporary" FERRY_CLI_TEST_NO_O_TMPFILE=1

other_cleanup
rm -rf "$dir"
finish
