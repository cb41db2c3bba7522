#!/bin/bash
# A hostile external program: declared as an agent's program and started by cotal-agent, it tries
# every way it knows to reach the signer, the store, the supervisor and another agent, printing
# what it obtains after an "@@attempt <name>" line. The test decides what leaked.
# Usage: hostile.sh <targets file>, which sets ROOT SIGNER SIGNER_DIR STORE RUN_FILE LOG_FILE
# OTHER_AGENT MACHINE_HOME SUPERVISOR_PID DENO.
. "$1"
# Planted files are in its launch dir (read-only inside bwrap); it writes in its cwd.
D=$(dirname "$COTAL_LAUNCH")
W=$(pwd)
REL=${SIGNER#"$ROOT"/}

attempt() {
  echo "@@attempt $1"
  shift
  "$@" 2>&1 | head -c 2000
  echo
}

mem() {
  local line range start end
  line=$(grep '\[stack\]' "/proc/$SUPERVISOR_PID/maps") || return 1
  range=${line%% *}
  start=$((16#${range%-*}))
  end=$((16#${range#*-}))
  dd if="/proc/$SUPERVISOR_PID/mem" bs=65536 iflag=skip_bytes,count_bytes skip=$start \
    count=$((end - start)) 2>/dev/null | grep -a -o 'COTALMARK[A-Za-z0-9]*'
}

attempt "direct path" cat "$SIGNER"
attempt "dot-dot from the agent dir" cat "$D/../../$REL"
attempt "planted symlink to the signer" cat "$D/planted"
attempt "planted symlink to the secrets dir" cat "$D/planted-dir/auth/seed.json"
attempt "new symlink" sh -c 'ln -s "$1" "$2/made-symlink" && cat "$2/made-symlink"' sh "$SIGNER" "$W"
attempt "new hard link" sh -c 'ln "$1" "$2/made-hardlink" && cat "$2/made-hardlink"' sh "$SIGNER" "$W"
attempt "/proc/self/root" cat "/proc/self/root$SIGNER"
attempt "/proc/<supervisor>/root" cat "/proc/$SUPERVISOR_PID/root$SIGNER"
attempt "/proc/<supervisor>/environ" cat "/proc/$SUPERVISOR_PID/environ"
attempt "/proc/<supervisor>/mem" mem
attempt "/proc/<supervisor>/fd/3" cat "/proc/$SUPERVISOR_PID/fd/3"
attempt "every /proc/*/environ" sh -c 'cat /proc/[0-9]*/environ 2>/dev/null | grep -a -o "COTALMARK[A-Za-z0-9]*"'
attempt "the whole environment" env
# Unmounting only when the signer is hidden: an unsandboxed run must not touch the host's mounts.
unmount() {
  if [ ! -r "$SIGNER" ]; then
    for m in "$SIGNER_DIR" "$ROOT" /tmp; do umount -l "$m"; done
  fi
  cat "$SIGNER"
}
attempt "unmount the tmpfs" unmount
attempt "enter the supervisor's mount namespace" nsenter -t "$SUPERVISOR_PID" -m cat "$SIGNER"
attempt "DENO_* env and a deno child" env DENO_DIR="$W/deno-dir" DENO_NO_PROMPT=1 \
  "$DENO" eval "console.log(Deno.readTextFileSync('$SIGNER'))"
attempt "the store" cat "$STORE"
attempt "the supervisor's run file" cat "$RUN_FILE"
attempt "the supervisor's log" cat "$LOG_FILE"
attempt "another agent's launch file" cat "$OTHER_AGENT"
attempt "planted symlink to another agent" cat "$D/planted-other"
attempt "the machine home" cat "$MACHINE_HOME"
attempt "search the state root" grep -r -a -h -o 'COTALMARK[A-Za-z0-9]*' "$ROOT"
echo "@@end"
