/**
 * Signals a process by pid and start time, through `/bin/sh` and its builtins: the watchdog's
 * row may run only `/bin/sh` and read no `/proc`, and the pid is signalled only while it is
 * still the process of that start (never a pid reused since).
 *
 * @module
 */

// $1 pid, $2 its start time (field 22 of /proc/<pid>/stat), $3 the signal: sent only while
// that pid is still the process of that start, never to a pid reused since.
// Builtins only: the watchdog's environment has no PATH.
const SIGNAL_SAME = 'read -r l <"/proc/$1/stat" || exit 1; p=$1 st=$2 sig=$3; ' +
  'set -- ${l##*) }; [ "${20}" = "$st" ] && kill "-$sig" "$p"';

/** Signals the process of `rec` (pid and start time). The watchdog may run only /bin/sh. */
export async function signalSame(
  rec: { pid: number; startTime: number },
  sig: "TERM" | "KILL",
): Promise<void> {
  await new Deno.Command("/bin/sh", {
    args: ["-c", SIGNAL_SAME, "sh", String(rec.pid), String(rec.startTime), sig],
    stdout: "null",
    stderr: "null",
  }).output().catch(() => {});
}
