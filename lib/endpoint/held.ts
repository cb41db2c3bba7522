/**
 * The channel copies an endpoint keeps for its first `message` listener when none is attached
 * yet (a boot channel's backfill and live posts before a module agent adds its listener),
 * bounded in count and bytes; the oldest go first, with one warning.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CotalMessageEvent } from "./events.ts";

/**
 * Channel copies kept for the first `message` listener when none is attached yet (a boot
 * channel's backfill and live posts before a module agent adds its listener); older ones are
 * dropped past this count or {@linkcode HELD_BYTES}, with one warning. DM, task and durable
 * copies wait on the broker instead.
 */
export const HELD_MESSAGES = 1_000;
/** The encoded bytes of the held channel copies at most (see {@linkcode HELD_MESSAGES}). */
export const HELD_BYTES = 4 * 1024 * 1024;

/** The held copies, oldest first. */
export class HeldMessages {
  readonly #held: { ev: CotalMessageEvent; bytes: number }[] = [];
  readonly #ids = new Set<string>();
  #bytes = 0;
  #dropped = 0;
  readonly #warn: (err: CotalError) => void;

  constructor(warn: (err: CotalError) => void) {
    this.#warn = warn;
  }

  /** How many are held. */
  get size(): number {
    return this.#held.length;
  }

  /** Keeps `ev` (once per message id); past the bounds the oldest go, said once. */
  hold(ev: CotalMessageEvent, bytes: number): void {
    const id = ev.message.id;
    if (this.#ids.has(id)) return;
    this.#held.push({ ev, bytes });
    this.#ids.add(id);
    this.#bytes += bytes;
    while (this.#held.length > HELD_MESSAGES || this.#bytes > HELD_BYTES) {
      const old = this.#held.shift()!;
      this.#ids.delete(old.ev.message.id);
      this.#bytes -= old.bytes;
      if (this.#dropped++ === 0) {
        this.#warn(
          new CotalError(
            "messages_unheard",
            `More channel messages came before any message listener than are kept (${HELD_MESSAGES}, ${
              HELD_BYTES / 1024 / 1024
            } MiB); the oldest were dropped. Add a message listener before start() or joinChannel().`,
          ),
        );
      }
    }
  }

  /** Hands the held copies, oldest first, to `deliver` for as long as `listening()`. */
  releaseTo(listening: () => boolean, deliver: (ev: CotalMessageEvent) => void): void {
    while (listening()) {
      const ev = this.next();
      if (!ev) return;
      deliver(ev);
    }
  }

  /** The oldest held copy, taken out; undefined when none is left. */
  next(): CotalMessageEvent | undefined {
    const first = this.#held.shift();
    if (!first) return undefined;
    this.#ids.delete(first.ev.message.id);
    this.#bytes -= first.bytes;
    return first.ev;
  }
}
