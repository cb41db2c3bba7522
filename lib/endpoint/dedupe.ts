/**
 * A bounded set of recently seen message ids: live, backfilled, gap-filled and durable copies
 * of one message coalesce on it. Oldest ids are forgotten first, so memory stays flat.
 *
 * @module
 */

/** Ids remembered by default: far more than any reconnect gap or backfill surfaces at once. */
export const DEFAULT_SEEN_IDS = 20_000;

/** Insertion-ordered, capacity-bounded id set. */
export class SeenIds {
  readonly #max: number;
  readonly #ids = new Set<string>();

  constructor(max = DEFAULT_SEEN_IDS) {
    this.#max = max;
  }

  /** True when `id` was seen before; otherwise records it and returns false. */
  check(id: string): boolean {
    if (this.#ids.has(id)) return true;
    this.#ids.add(id);
    if (this.#ids.size > this.#max) {
      // A Set iterates in insertion order: the first key is the oldest.
      this.#ids.delete(this.#ids.values().next().value!);
    }
    return false;
  }

  /** Forget `id` (a copy handed back for redelivery must surface again). */
  forget(id: string): void {
    this.#ids.delete(id);
  }

  /** True when `id` was seen, without recording it. */
  has(id: string): boolean {
    return this.#ids.has(id);
  }
}
