/**
 * A cap on the size of a daemon's log file. The start wrapper appends a daemon's output to
 * `<logs>/<id>.log`, and a daemon's log can be driven by what members send; the watchdog keeps
 * each file under {@linkcode DAEMON_LOG_MAX_BYTES} by copying it to `<id>.log.1` (the one
 * previous file kept) and truncating it. Copy and truncate, not rename: the daemon holds the
 * file open for appending, and would go on writing into the renamed one.
 *
 * @module
 */

/** The size past which a daemon's log is rotated. */
export const DAEMON_LOG_MAX_BYTES = 32 * 1024 * 1024;

/** Rotates `path` when it is a regular file over `max` bytes; true when it did. */
export async function capLogFile(path: string, max = DAEMON_LOG_MAX_BYTES): Promise<boolean> {
  const st = await Deno.lstat(path).catch(() => undefined);
  if (!st?.isFile || st.size <= max) return false;
  const previous = `${path}.1`;
  const old = await Deno.lstat(previous).catch(() => undefined);
  if (old && !old.isFile) return false;
  await Deno.copyFile(path, previous);
  await Deno.chmod(previous, 0o600);
  await Deno.truncate(path, 0);
  return true;
}
