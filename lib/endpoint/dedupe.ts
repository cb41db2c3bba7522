/**
 * A bounded set of recently seen message ids: live, backfilled, gap-filled and durable copies
 * of one message coalesce on it. A ring of fixed size forgets the oldest id first, so memory
 * stays flat and an insert never allocates.
 *
 * @module
 */

/** Ids remembered by default: far more than any reconnect gap or backfill surfaces at once. */
export const DEFAULT_SEEN_IDS = 20_000;

/** Capacity-bounded id set, oldest forgotten first. */
export class SeenIds {
  readonly #ids = new Set<string>();
  readonly #ring: (string | undefined)[];
  #next = 0;

  constructor(max = DEFAULT_SEEN_IDS) {
    this.#ring = new Array(max);
  }

  /** True when `id` was seen before; otherwise records it and returns false. */
  check(id: string): boolean {
    if (this.#ids.has(id)) return true;
    const old = this.#ring[this.#next];
    if (old !== undefined) this.#ids.delete(old);
    this.#ring[this.#next] = id;
    this.#next = (this.#next + 1) % this.#ring.length;
    this.#ids.add(id);
    return false;
  }

  /** Forget `id` (a copy handed back for redelivery must surface again). */
  forget(id: string): void {
    // Its ring slot stays; when it is reused, deleting an absent id is a no-op.
    this.#ids.delete(id);
  }

  /** True when `id` was seen, without recording it. */
  has(id: string): boolean {
    return this.#ids.has(id);
  }
}

/**
 * The key a message is deduplicated on: its sender and its id. An id alone is the sender's to
 * choose: a member who DMed an offline peer with a channel post's id had the post dropped as a
 * copy of the DM (red team 28).
 */
export function seenKey(
  m: { readonly id: string; readonly from: { readonly id: string } },
): string {
  return `${m.from.id} ${m.id}`;
}
