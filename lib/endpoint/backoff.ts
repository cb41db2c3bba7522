/**
 * Timing helpers of the rebuild loop: the widening backoff, an interruptible sleep, and
 * one-shot waiter lists.
 *
 * @module
 */

/** First rebuild retry delay; each failure doubles it. */
export const RETRY_BASE_MS = 3_000;
/** Longest rebuild retry delay. */
export const RETRY_CAP_MS = 60_000;

/** The delay before retry number `failures` (0-based): 3 s doubling to a 60 s cap. */
export function backoffDelay(failures: number): number {
  return Math.min(RETRY_BASE_MS * 2 ** failures, RETRY_CAP_MS);
}

/** A sleep that `wake()` (a manual reconnect, a stop) cuts short. */
export class Sleeper {
  #wake?: () => void;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.#wake = undefined;
        resolve();
      };
      const t = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  wake(): void {
    this.#wake?.();
  }
}

/** Callers waiting for one event; each is settled once. */
export class Waiters {
  #list: Array<{ resolve(): void; reject(err: Error): void }> = [];

  /** Wait for the next `resolveAll`/`rejectAll`, or resolve after `timeoutMs` when given. */
  wait(timeoutMs?: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = timeoutMs === undefined ? undefined : setTimeout(resolve, timeoutMs);
      this.#list.push({
        resolve: () => (clearTimeout(t), resolve()),
        reject: (err) => (clearTimeout(t), reject(err)),
      });
    });
  }

  resolveAll(): void {
    for (const w of this.#list.splice(0)) w.resolve();
  }

  rejectAll(err: Error): void {
    for (const w of this.#list.splice(0)) w.reject(err);
  }
}
