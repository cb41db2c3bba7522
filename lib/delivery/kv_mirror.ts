/**
 * A followed, in-memory mirror of one KV bucket with a freshness barrier.
 *
 * Delivery decisions must use the registry's current state (a narrowed ACL, a leave or a
 * class flip takes effect at once), but a point read per message would cap throughput at the
 * JetStream API's request rate. `sync()` gives the same guarantee as a fresh read made at the
 * moment it is called: it reads the bucket stream's last sequence and waits until the follower
 * (lib/wire/stream_follow.ts) has delivered at least that far, or its consumer has nothing
 * left that is still stored. Concurrent callers share one read, so a burst of messages
 * costs one request per bucket.
 *
 * @module
 */

import type { JetStreamManager, NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import { UNDECODABLE } from "../nats/mod.ts";
import {
  type FollowedMessage,
  followStream,
  isBrokerAnswer,
  kvStreamName,
  type StreamFollow,
} from "../wire/mod.ts";

/** Freshness reads of one bucket are at least this far apart (the price: this much latency). */
const SYNC_MIN_INTERVAL_MS = 2;
/** How long a sync may wait for the follower before the caller's decision is refused. */
const SYNC_TIMEOUT_MS = 5_000;
/**
 * How long a sync waits for the follower alone before asking its consumer whether anything is
 * left: the stream's last sequence may be a message no longer stored (a purged row), which no
 * consumer delivers.
 */
const SYNC_DRAIN_CHECK_MS = 250;
/** How long start waits for the bucket's rows as they stand. */
const START_TIMEOUT_MS = 30_000;

/** A decoded value and the revision it was written at. */
export interface Mirrored<T> {
  value: T;
  revision: number;
  /** The stored bytes it was decoded from. */
  raw: Uint8Array;
}

/** Options of {@linkcode KvMirror.start}. */
export interface KvMirrorOptions<T> {
  bucket: string;
  /** Decode a stored value; undefined keeps the key out of the mirror (and counts it). */
  decode: (key: string, value: Uint8Array) => T | undefined;
  /** Called after each applied change (a put, or a delete with `value` undefined). */
  onChange?: (key: string, value: T | undefined) => void;
  /**
   * Called when a put does not decode while the mirror holds a good value for the key (the
   * last good value is kept): its writer may put `raw` back.
   */
  onUndecodable?: (key: string, raw: Uint8Array, revision: number) => void;
}

/** One bucket, mirrored. */
export class KvMirror<T> {
  readonly bucket: string;
  readonly #entries = new Map<string, Mirrored<T>>();
  readonly #opts: KvMirrorOptions<T>;
  #jsm?: JetStreamManager;
  #follow?: StreamFollow;
  #seen = 0;
  #waiters: { seq: number; resolve: () => void }[] = [];
  #inflight?: Promise<void>;
  #next?: Promise<void>;
  #lastSent = 0;
  #undecodable = 0;
  #stopped = false;

  private constructor(opts: KvMirrorOptions<T>) {
    this.bucket = opts.bucket;
    this.#opts = opts;
  }

  /**
   * Follows the bucket (lib/wire/stream_follow.ts: every stored row seen as stored, a status
   * row a member aimed at a key included) and resolves once its rows as they stand are loaded.
   */
  static async start<T>(nc: NatsConnection, opts: KvMirrorOptions<T>): Promise<KvMirror<T>> {
    const m = new KvMirror<T>(opts);
    m.#jsm = await nc.jetstreamManager();
    const prefix = `$KV.${opts.bucket}.`;
    m.#follow = await followStream(nc, {
      stream: kvStreamName(opts.bucket),
      filter: `${prefix}>`,
      onMessage: (msg) => m.#apply(msg, msg.subject.slice(prefix.length)),
    });
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      try {
        await m.#send();
        return m;
      } catch (e) {
        if (Date.now() > deadline) {
          m.stop();
          throw e;
        }
      }
    }
  }

  #apply(msg: FollowedMessage, key: string): void {
    const h = msg.headers;
    const op = h === UNDECODABLE ? undefined : h?.get("KV-Operation");
    if (op === "DEL" || op === "PURGE") {
      this.#entries.delete(key);
      this.#opts.onChange?.(key, undefined);
    } else {
      // A row no writer of ours wrote (a broker answer a member aimed at the key: the broker
      // checks no reply subject) is not a change: the last good value stands.
      const value = h === UNDECODABLE || isBrokerAnswer(h)
        ? undefined
        : this.#opts.decode(key, msg.data);
      if (value === undefined) {
        this.#undecodable++;
        const good = this.#entries.get(key);
        if (good) this.#opts.onUndecodable?.(key, good.raw, msg.seq);
      } else {
        this.#entries.set(key, { value, revision: msg.seq, raw: msg.data });
        this.#opts.onChange?.(key, value);
      }
    }
    if (msg.seq > this.#seen) this.#seen = msg.seq;
    this.#release();
  }

  #release(): void {
    if (this.#waiters.length === 0) return;
    const ready = this.#waiters.filter((w) => w.seq <= this.#seen);
    this.#waiters = this.#waiters.filter((w) => w.seq > this.#seen);
    for (const w of ready) w.resolve();
  }

  /** The mirrored entry of `key`, as of the last applied change. */
  get(key: string): Mirrored<T> | undefined {
    return this.#entries.get(key);
  }

  /**
   * Drops `key` from the mirror after its owner purged it from the stream outright: a purge by
   * filter leaves no marker the follow would see, so without this the row looks live for good.
   */
  forget(key: string): void {
    if (this.#entries.delete(key)) this.#opts.onChange?.(key, undefined);
  }

  /** Every mirrored entry (live keys only). */
  entries(): IterableIterator<[string, Mirrored<T>]> {
    return this.#entries.entries();
  }

  /** Entries that could not be decoded (a corrupt writer), for status. */
  get undecodable(): number {
    return this.#undecodable;
  }

  /**
   * Resolves once the mirror holds every write the broker committed before this call. Rejects
   * with `mirror_stale` when the follower does not catch up in time (the caller retries later).
   */
  sync(): Promise<void> {
    if (!this.#inflight && !this.#next && Date.now() - this.#lastSent >= SYNC_MIN_INTERVAL_MS) {
      return this.#send();
    }
    // A read in flight (or just sent) may miss a write committed now: join the next one, sent
    // once the current one settles and the minimum interval has passed. Under load one read
    // covers a whole burst, and the JetStream API sees at most one per interval per bucket.
    this.#next ??= (this.#inflight ?? Promise.resolve()).catch(() => {}).then(async () => {
      const wait = this.#lastSent + SYNC_MIN_INTERVAL_MS - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      this.#next = undefined;
      return this.#send();
    });
    return this.#next;
  }

  #send(): Promise<void> {
    this.#lastSent = Date.now();
    const read = (async () => {
      const info = await this.#jsm!.streams.info(kvStreamName(this.bucket));
      const target = info.state.last_seq;
      if (target <= this.#seen) return;
      const caught = this.#until(target);
      caught.catch(() => {});
      const early = await Promise.race([
        caught.then(() => true),
        new Promise<false>((r) => setTimeout(() => r(false), SYNC_DRAIN_CHECK_MS)),
      ]);
      // Nothing left to deliver: the rest of the way to `target` is no longer stored.
      if (!early && await this.#follow!.drained() && target > this.#seen) {
        this.#seen = target;
        this.#release();
      }
      await caught;
    })();
    this.#inflight = read;
    read.catch(() => {}).finally(() => {
      if (this.#inflight === read) this.#inflight = undefined;
    });
    return read;
  }

  /** Wait until the follower has applied sequence `seq` (a revision this daemon just wrote). */
  until(seq: number): Promise<void> {
    return this.#until(seq);
  }

  #until(seq: number): Promise<void> {
    if (seq <= this.#seen || this.#stopped) return Promise.resolve();
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    const timer = setTimeout(() => {
      this.#waiters = this.#waiters.filter((w) => w.resolve !== done);
      reject(
        new CotalError(
          "mirror_stale",
          `The mirror of ${this.bucket} did not catch up to sequence ${seq}; the decision was ` +
            `deferred and will be retried.`,
        ),
      );
    }, SYNC_TIMEOUT_MS);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    this.#waiters.push({ seq, resolve: done });
    return promise;
  }

  /** Stops following the bucket. */
  stop(): void {
    this.#stopped = true;
    this.#follow?.stop();
    for (const w of this.#waiters) w.resolve();
    this.#waiters = [];
  }
}
