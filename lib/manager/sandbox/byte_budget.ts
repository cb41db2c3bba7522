/**
 * What one agent may write to the broker per second: a token bucket of bytes shared by all of
 * its relayed connections. Past its burst the relay stops reading from the agent until the
 * bucket refills, so TCP's own backpressure slows the agent down; nothing is refused or lost.
 *
 * Why: a stream whose cap drops its oldest messages (CHAT, a history window) can be emptied of
 * everyone else's posts by one sender with a few publish grants (red team 5, P: two channels
 * hold ~2 GB of one sender's posts in a 1 GiB stream). The budget turns that from a minute into
 * more than an hour; it does not make a sender's share of a stream smaller (docs/SECURITY.md).
 *
 * @module
 */

/** Bytes per second one agent may send the broker, sustained (frozen). */
export const AGENT_BYTES_PER_SECOND = 256 * 1024;
/** Bytes one agent may send at once before the rate applies (frozen). */
export const AGENT_BYTES_BURST = 32 * 1024 * 1024;

/**
 * Bytes per second one agent may publish on the planes the broker stores for others (channel
 * posts, DMs, tasks), sustained (frozen): DM, TASK and CHAT are shared streams with one byte
 * cap each, and a pair or a channel may hold more than the whole stream, so one sender could
 * fill DM (every DM then refused) or evict CHAT. At this rate one agent needs about 9 hours for
 * DM, 4.5 for TASK, 18 for CHAT (red team 6, Q and R); a chat between agents is far below it.
 */
export const AGENT_STORED_BYTES_PER_SECOND = 16 * 1024;
/** Bytes one agent may publish on the stored planes at once (frozen). */
export const AGENT_STORED_BYTES_BURST = 4 * 1024 * 1024;

/** A byte bucket; `take(n)` says how long to wait before `n` bytes may go on. */
export class ByteBudget {
  readonly #rate: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #at: number;
  /** Times the budget held a writer back. */
  held = 0;

  constructor(
    opts: { rate?: number; burst?: number; now?: () => number } = {},
  ) {
    this.#rate = opts.rate ?? AGENT_BYTES_PER_SECOND;
    this.#burst = opts.burst ?? AGENT_BYTES_BURST;
    this.#now = opts.now ?? Date.now;
    this.#tokens = this.#burst;
    this.#at = this.#now();
  }

  /** Milliseconds to wait before `n` more bytes may go on (0: now); takes them. */
  take(n: number): number {
    const t = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((t - this.#at) / 1000) * this.#rate);
    this.#at = t;
    this.#tokens -= n;
    if (this.#tokens >= 0) return 0;
    this.held++;
    return Math.ceil((-this.#tokens / this.#rate) * 1000);
  }
}
