/**
 * Presence: this endpoint's heartbeat into `cotal_presence_<space>` and the roster it keeps by
 * watching the bucket. A peer is offline when its row says so, when the row is deleted, or
 * when no heartbeat arrived within the liveness window.
 *
 * The state (who is known) outlives a connection rebuild; only the bucket handle is rebound.
 *
 * @module
 */

import type { KV } from "nats";
import type { BucketWatch, WatchedEntry } from "./bucket_watch.ts";
import { CotalError } from "../errors.ts";
import { type OfflineReason, PresenceEvent, RosterEvent } from "./events.ts";
import { errorText } from "./credentials.ts";
import type { Presence } from "./types.ts";
import { readPresenceRow } from "./presence_row.ts";

/** Default heartbeat period. */
export const DEFAULT_HEARTBEAT_MS = 2_000;
/** Default liveness window. */
export const DEFAULT_PRESENCE_TTL_MS = 6_000;

interface Peer {
  presence: Presence;
  online: boolean;
  /** Local clock of the last heartbeat seen (the writer's clock is not trusted for liveness). */
  seenAt: number;
}

/** What the tracker needs from its endpoint. */
export interface PresenceHost {
  /** This endpoint's key (`<owner>.<actor>`). */
  selfKey(): string;
  /** The record to write now. */
  record(): Presence;
  dispatch(ev: Event): void;
  warn(err: CotalError): void;
}

/** Starts a watch of the presence bucket that reports each row to `onEntry`. */
export type WatchFactory = (
  onEntry: (e: WatchedEntry, live: boolean) => void,
) => Promise<BucketWatch>;

/** Heartbeat writer plus roster watcher. */
export class PresenceTracker {
  readonly #host: PresenceHost;
  readonly #heartbeatMs: number;
  readonly #ttlMs: number;
  readonly #peers = new Map<string, Peer>();
  #kv?: KV;
  #heartbeat?: ReturnType<typeof setInterval>;
  #sweep?: ReturnType<typeof setInterval>;
  #failingSince?: number;
  #stuckReported = false;
  #watchStop?: () => void;
  #retry?: ReturnType<typeof setInterval>;

  constructor(host: PresenceHost, opts: { heartbeatMs?: number; ttlMs?: number } = {}) {
    this.#host = host;
    this.#heartbeatMs = positive(opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS, "heartbeatMs");
    this.#ttlMs = positive(opts.ttlMs ?? DEFAULT_PRESENCE_TTL_MS, "ttlMs");
    if (this.#ttlMs <= this.#heartbeatMs) {
      throw new CotalError(
        "invalid_presence_timing",
        `The presence window (${this.#ttlMs} ms) must be longer than the heartbeat (${this.#heartbeatMs} ms); a live peer would flap offline.`,
      );
    }
  }

  /**
   * Bind to a (new) bucket handle: start watching (through `watch`, a consumer-less bucket
   * watch) and/or heartbeating.
   */
  async bind(kv: KV, opts: { watch: false | WatchFactory; register: boolean }): Promise<void> {
    this.unbind();
    this.#kv = kv;
    if (opts.watch) await this.#watch(opts.watch);
    if (opts.register) {
      await this.beat();
      this.#heartbeat = setInterval(() => void this.beat(), this.#heartbeatMs);
    }
    if (opts.watch) {
      this.#sweep = setInterval(() => this.sweep(), Math.max(500, Math.floor(this.#ttlMs / 3)));
    }
  }

  /**
   * Binds the bucket `open` yields; while it yields none (the memory-backed presence bucket is
   * gone with a broker restart until the supervisor puts it back), tries again every heartbeat
   * until it is there or the tracker is unbound. Fault pass 9: an agent started during a broker
   * restart bound no presence and never tried again, and its spawn failed its readiness.
   */
  async bindWhenThere(
    open: () => Promise<KV | undefined>,
    opts: { watch: false | WatchFactory; register: boolean },
  ): Promise<void> {
    this.unbind();
    const kv = await open();
    if (kv) return await this.bind(kv, opts);
    const retry = setInterval(() => {
      open().then(async (kv) => {
        if (!kv || this.#retry !== retry) return;
        await this.bind(kv, opts);
      }).catch(() => {});
    }, this.#heartbeatMs);
    this.#retry = retry;
  }

  /** Stop timers and the watch (the roster is kept for the next bind). */
  unbind(): void {
    clearInterval(this.#retry);
    this.#retry = undefined;
    clearInterval(this.#heartbeat);
    clearInterval(this.#sweep);
    this.#heartbeat = this.#sweep = undefined;
    this.#watchStop?.();
    this.#watchStop = undefined;
    this.#kv = undefined;
  }

  /** Write this endpoint's row now. */
  async beat(): Promise<void> {
    const kv = this.#kv;
    if (!kv) return;
    try {
      const row = JSON.stringify(this.#host.record());
      await kv.put(this.#host.selfKey(), row);
      // The connection does not echo its own writes to its watch: apply our row here.
      if (this.#watchStop) {
        this.#apply({
          key: this.#host.selfKey(),
          value: new TextEncoder().encode(row),
          operation: "PUT",
          created: new Date(),
        }, true);
      }
      this.#failingSince = undefined;
      this.#stuckReported = false;
    } catch (err) {
      if (kv !== this.#kv) return;
      const now = Date.now();
      this.#failingSince ??= now;
      if (now - this.#failingSince >= this.#ttlMs && !this.#stuckReported) {
        this.#stuckReported = true;
        this.#host.warn(
          new CotalError(
            "presence_write_stuck",
            `Presence heartbeats have failed for ${now - this.#failingSince} ms (${
              errorText(err)
            }); peers will see this endpoint offline until a write succeeds.`,
          ),
        );
      } else if (this.#failingSince === now) {
        this.#host.warn(
          new CotalError(
            "presence_write_failed",
            `A presence heartbeat failed (${
              errorText(err)
            }); it is retried every ${this.#heartbeatMs} ms.`,
          ),
        );
      }
    }
  }

  /** Best effort: a final `offline` row so peers need not wait out the window. */
  async goOffline(record: Presence): Promise<void> {
    const kv = this.#kv;
    this.unbind();
    if (!kv) return;
    await kv.put(this.#host.selfKey(), JSON.stringify(record)).catch(() => {});
  }

  /** Online peers (this endpoint included), sorted by name. */
  roster(): Presence[] {
    return [...this.#peers.values()]
      .filter((p) => p.online)
      .map((p) => p.presence)
      .sort((a, b) => a.card.name.localeCompare(b.card.name) || a.card.id.localeCompare(b.card.id));
  }

  /** Mark peers whose heartbeat is older than the window offline. */
  sweep(now = Date.now()): void {
    let changed = false;
    for (const [key, peer] of this.#peers) {
      if (peer.online && now - peer.seenAt > this.#ttlMs) {
        peer.online = false;
        changed = true;
        this.#event(key, "offline", { ...peer.presence, status: "offline" }, "stale");
      }
    }
    if (changed) this.#host.dispatch(new RosterEvent(this.roster()));
  }

  async #watch(watch: WatchFactory): Promise<void> {
    try {
      const w = await watch((e, live) => this.#apply(e, live));
      this.#watchStop = () => w.stop();
    } catch (err) {
      this.#host.warn(
        new CotalError(
          "presence_watch_failed",
          `The presence watch failed (${errorText(err)}); it is rebound on the next reconnect.`,
        ),
      );
    }
  }

  #apply(e: WatchedEntry, live: boolean): void {
    const key = e.key;
    const known = this.#peers.get(key);
    if (e.operation !== "PUT") {
      if (known?.online) {
        known.online = false;
        this.#event(key, "offline", { ...known.presence, status: "offline" }, "removed");
        this.#host.dispatch(new RosterEvent(this.roster()));
      }
      return;
    }
    const presence = readPresenceRow(e.value);
    if (!presence || presence.card.id !== key) {
      this.#host.warn(
        new CotalError(
          "presence_row_dropped",
          `A presence row under ${
            JSON.stringify(key.slice(0, 80))
          } is malformed or names another card id; it was ignored.`,
        ),
      );
      return;
    }
    // Replayed rows carry their broker timestamp; rows arriving live were just written.
    const seenAt = live ? Date.now() : Math.min(Date.now(), e.created.getTime());
    const online = presence.status !== "offline" && Date.now() - seenAt <= this.#ttlMs;
    const wasOnline = known?.online ?? false;
    // Heartbeats rewrite only `ts`: those are not changes worth an event.
    const changed = !known || contentOf(known.presence) !== contentOf(presence);
    this.#peers.set(key, { presence, online, seenAt });
    if (online && !wasOnline) this.#event(key, "join", presence);
    else if (online && changed) this.#event(key, "update", presence);
    else if (!online && wasOnline) {
      this.#event(key, "offline", presence, presence.status === "offline" ? "left" : "stale");
    }
    if (online !== wasOnline || (online && changed)) {
      this.#host.dispatch(new RosterEvent(this.roster()));
    }
  }

  #event(
    key: string,
    change: "join" | "update" | "offline",
    p: Presence,
    reason?: OfflineReason,
  ): void {
    if (key === this.#host.selfKey()) return;
    this.#host.dispatch(new PresenceEvent(change, p, reason));
  }
}

function contentOf(p: Presence): string {
  const { ts: _ts, ...rest } = p;
  return JSON.stringify(rest);
}

function positive(v: number, what: string): number {
  if (!Number.isSafeInteger(v) || v <= 0) {
    throw new CotalError("invalid_presence_timing", `${what} must be a positive integer of ms.`);
  }
  return v;
}
