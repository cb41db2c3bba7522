/**
 * Token buckets per key: a steady rate and a burst, for limits a caller cannot widen (the
 * signer's requests per caller, the auth callout's connects per principal). The map is bounded:
 * past `maxKeys` the least recently used key is forgotten (a full bucket again), which only a
 * holder of that many distinct proven keys could use.
 *
 * @module
 */

/** A rate: `burst` at once, refilled at `perSecond`. */
export interface Rate {
  readonly perSecond: number;
  readonly burst: number;
}

/** Keys a {@linkcode TokenBuckets} keeps by default. */
export const DEFAULT_MAX_KEYS = 65_536;

/** One token bucket per key. */
export class TokenBuckets {
  readonly #rate: Rate;
  readonly #maxKeys: number;
  readonly #now: () => number;
  // Insertion order is recency: a key taken from is moved to the end.
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(rate: Rate, opts: { maxKeys?: number; now?: () => number } = {}) {
    this.#rate = rate;
    this.#maxKeys = opts.maxKeys ?? DEFAULT_MAX_KEYS;
    this.#now = opts.now ?? Date.now;
  }

  /** Whether `key` may have one more now (and takes it). */
  take(key: string): boolean {
    const t = this.#now();
    const b = this.#buckets.get(key) ?? { tokens: this.#rate.burst, at: t };
    b.tokens = Math.min(this.#rate.burst, b.tokens + ((t - b.at) / 1000) * this.#rate.perSecond);
    b.at = t;
    this.#buckets.delete(key);
    this.#buckets.set(key, b);
    if (this.#buckets.size > this.#maxKeys) {
      this.#buckets.delete(this.#buckets.keys().next().value!);
    }
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}
