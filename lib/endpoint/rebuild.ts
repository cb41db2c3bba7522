/**
 * The endpoint's one serialized rebuild after a terminal close: attempts with a widening
 * backoff until one binds or the endpoint no longer wants a connection, and the lifecycle
 * errors its callers are told.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { backoffDelay, type Sleeper, type Waiters } from "./backoff.ts";
import { errorText } from "./credentials.ts";

/** What the rebuild loop asks of its endpoint. */
export interface RebuildSteps {
  /** True while the endpoint is rebuilding (not stopped meanwhile). */
  wanted(): boolean;
  /** One attempt: resolves once bound and running; a failure leaves nothing half-bound. */
  attempt(): Promise<void>;
  warn(err: CotalError, retryInMs: number): void;
  /** The backoff's sleep, which a manual reconnect or a stop cuts short. */
  sleeper: Sleeper;
  /** Callers of reconnect(), told each attempt's outcome. */
  attempts: Waiters;
}

/** Retries `steps.attempt` (at once when `immediate`, else after a backoff) until bound or unwanted. */
export async function rebuildUntilBound(
  steps: RebuildSteps,
  cause: CotalError,
  immediate: boolean,
): Promise<void> {
  let failures = 0;
  let err: CotalError = cause;
  let wait = !immediate;
  while (steps.wanted()) {
    if (wait) {
      const delay = backoffDelay(failures);
      steps.warn(err, delay);
      await steps.sleeper.sleep(delay);
      if (!steps.wanted()) break;
      failures++;
    }
    wait = true;
    try {
      await steps.attempt();
      steps.attempts.resolveAll();
      return;
    } catch (e) {
      err = e instanceof CotalError ? e : new CotalError(
        "reconnect_failed",
        `Rebuilding the connection failed (${errorText(e)}); retrying.`,
        { cause: e },
      );
      steps.attempts.rejectAll(err);
    }
  }
  steps.attempts.rejectAll(stoppedError());
}

/** The error of a call on a stopped endpoint. */
export function stoppedError(): CotalError {
  return new CotalError("stopped", "The endpoint was stopped; create a new one.");
}

/** The error of a call before `start()` completed. */
export function notStartedError(): CotalError {
  return new CotalError("not_started", "The endpoint has not started; await start() first.");
}
