/**
 * Starting an endpoint that waits for its broker: a broker that cannot be reached is tried
 * again (500 ms, doubling to 5 s) until it answers or the signal ends the wait, as Cotal's
 * daemons wait for theirs. Anything else a start refuses (a credential, a lifecycle) is thrown
 * at once. Fault pass 8 restarted an agent while the broker was down: its runner said "not on
 * the mesh" once and never tried again, and `cotal mcp` exited.
 *
 * @module
 */
import { abortableSleep } from "../abortable_sleep.ts";
import { isCotalError } from "../errors.ts";
import type { CotalEndpoint } from "./endpoint.ts";

/** The first wait before an unreachable broker is tried again; each doubles it. */
export const BROKER_RETRY_BASE_MS = 500;
/** The longest wait between tries of an unreachable broker. */
export const BROKER_RETRY_CAP_MS = 5_000;

/**
 * `ep.start()`, tried again while the broker cannot be reached. `waiting` is told once, with
 * the refusal, when the first try fails; `back` when a later one succeeds.
 *
 * @example
 * ```ts
 * await startWaitingForBroker(ep, { signal, waiting: (e) => console.error(e.message) });
 * ```
 */
export async function startWaitingForBroker(
  ep: CotalEndpoint,
  opts: { signal?: AbortSignal; waiting?: (err: Error) => void; back?: () => void } = {},
): Promise<void> {
  const signal = opts.signal ?? new AbortController().signal;
  for (let attempt = 0;; attempt++) {
    try {
      await ep.start();
      if (attempt > 0) opts.back?.();
      return;
    } catch (err) {
      if (!isCotalError(err, "broker_connect_failed") || signal.aborted) throw err;
      if (attempt === 0) opts.waiting?.(err);
      await abortableSleep(
        Math.min(BROKER_RETRY_BASE_MS * 2 ** attempt, BROKER_RETRY_CAP_MS),
        signal,
      );
      if (signal.aborted) throw err;
    }
  }
}
