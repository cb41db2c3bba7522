/**
 * A log that cannot be flooded. Some lines are caused by what others send (a malformed
 * presence row, a request with a bad reply subject): one line per event would let any member
 * grow a daemon's log file without bound. Each kind of line (its key) is written at most
 * `burst` times per window; the rest are counted and summed up in one line when the key next
 * comes up after the window, or on `flush()`.
 *
 * @module
 */

/** Lines of one key written per window before the rest are only counted. */
export const LOG_BURST = 5;
/** The window of {@linkcode LOG_BURST}. */
export const LOG_WINDOW_MS = 60_000;
/**
 * Keys remembered at once. Keys can come from what others send (a name in a subject), so past
 * this the keys whose window ended are summed up and forgotten, and if none has, new keys share
 * one overflow key: the memory stays bounded whatever arrives.
 */
export const LOG_MAX_KEYS = 1_024;
/** The key lines share once {@linkcode LOG_MAX_KEYS} keys are live. */
export const LOG_OVERFLOW_KEY = "(other)";

/** A rate-limited log: `log(key, line)`, and `flush()` to write what is still counted. */
export interface LimitedLog {
  (key: string, line: string): void;
  flush(): void;
}

/** Wraps `log` so each key writes at most `burst` lines per `windowMs`. */
export function limitLog(
  log: (line: string) => void,
  opts: {
    burst?: number;
    windowMs?: number;
    now?: () => number;
    /** The line that sums up `dropped` lines of `key` (default: a sentence). */
    summary?: (key: string, dropped: number) => string;
    maxKeys?: number;
  } = {},
): LimitedLog {
  const burst = opts.burst ?? LOG_BURST;
  const maxKeys = opts.maxKeys ?? LOG_MAX_KEYS;
  const windowMs = opts.windowMs ?? LOG_WINDOW_MS;
  const now = opts.now ?? Date.now;
  const keys = new Map<string, { since: number; written: number; dropped: number }>();
  const summary = (key: string, dropped: number) =>
    log(
      opts.summary?.(key, dropped) ??
        `${dropped} more line(s) of kind ${key} were not logged (at most ${burst} per ${
          windowMs / 1000
        } s)`,
    );
  const sweep = (t: number) => {
    for (const [key, k] of keys) {
      if (t - k.since < windowMs) continue;
      if (k.dropped) summary(key, k.dropped);
      keys.delete(key);
    }
  };
  const limited = ((given: string, line: string) => {
    const t = now();
    if (!keys.has(given) && keys.size >= maxKeys) sweep(t);
    const key = keys.has(given) || keys.size < maxKeys ? given : LOG_OVERFLOW_KEY;
    let k = keys.get(key);
    if (k && t - k.since >= windowMs) {
      if (k.dropped) summary(key, k.dropped);
      k = undefined;
    }
    if (!k) keys.set(key, k = { since: t, written: 0, dropped: 0 });
    if (k.written < burst) {
      k.written++;
      log(line);
    } else k.dropped++;
  }) as LimitedLog;
  limited.flush = () => {
    for (const [key, k] of keys) if (k.dropped) summary(key, k.dropped);
    keys.clear();
  };
  return limited;
}
