/**
 * A sleep that an abort ends early: a daemon loop waits its interval and still stops at once.
 *
 * @module
 */

/** Resolves after `ms`, or as soon as `signal` aborts (never rejects). */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
