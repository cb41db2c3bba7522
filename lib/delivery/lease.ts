/**
 * The single-flight lease: one delivery daemon per space holds `lease.0` in
 * `cotal_delivery_<s>` (bucket TTL 30 s). Acquire is a create-only write, renew and mark-ready
 * are compare-and-set updates, release is a compare-and-set delete, and a watch on the key
 * reports a row that changed hands at once instead of at the next renew.
 *
 * Ownership means holder *and* incarnation match: a successor started with the same cred has
 * the same holder but a fresh incarnation, so it never mistakes its predecessor's row for its
 * own.
 *
 * A row that is no lease row is nobody's: a member can aim a broker answer (a JSON reply, a
 * status line) at `lease.0`, since the broker checks no reply subject, and that must neither
 * make the holder step down nor make a newcomer wait for a holder that does not exist. Such a
 * row reads as `vacant`: the holder writes its row back over it, a newcomer takes it.
 *
 * @module
 */

import type { KV, NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import type { HolderLock } from "../workspace/mod.ts";
import { UNDECODABLE } from "../nats/mod.ts";
import {
  acquireKvLease,
  followStream,
  KvLease,
  type KvLeaseView,
  kvStreamName,
  type StreamFollow,
} from "../wire/mod.ts";
import { LEASE_KEY } from "./constants.ts";

/** The lease row. */
export interface LeaseInfo {
  /** The holder's principal dot form (`local.<nkey>`). */
  holder: string;
  /** A random id per daemon process. */
  incarnation: string;
  /** Epoch ms of the acquire. */
  since: number;
  /** True once the loops and the control responders are bound. */
  ready: boolean;
  /** The holder's lock-file id on its machine (see `HolderLock`), when it runs with one. */
  lock?: string;
}

/** What a read of the key found, relative to this daemon. */
export type LeaseView = KvLeaseView<LeaseInfo>;

function isLeaseInfo(v: unknown): v is LeaseInfo {
  const r = v as Partial<LeaseInfo> | null;
  return typeof r?.holder === "string" && r.holder !== "" &&
    typeof r.incarnation === "string" && r.incarnation !== "" && Number.isFinite(r.since) &&
    typeof r.ready === "boolean";
}

function isPermission(err: unknown): boolean {
  return /permission/i.test(String((err as Error)?.message ?? err));
}

/** One daemon's handle on the lease. */
export class DeliveryLease {
  readonly holder: string;
  readonly incarnation: string;
  readonly bucket: string;
  #nc: NatsConnection;
  #lease: KvLease<LeaseInfo>;
  #watch?: StreamFollow;
  #lockId?: string;

  private constructor(
    nc: NatsConnection,
    kv: KV,
    bucket: string,
    holder: string,
    incarnation: string,
    lockId?: string,
  ) {
    this.#nc = nc;
    // Ownership is holder and incarnation (see the module doc).
    this.#lease = new KvLease(kv, LEASE_KEY, incarnation, isLeaseInfo, (r) => r.holder === holder);
    this.bucket = bucket;
    this.holder = holder;
    this.incarnation = incarnation;
    this.#lockId = lockId;
  }

  /** Binds the (pre-created) lease bucket; the daemon never creates it. */
  static async bind(
    nc: NatsConnection,
    bucket: string,
    holder: string,
    incarnation: string,
    lockId?: string,
  ): Promise<DeliveryLease> {
    let kv: KV;
    try {
      kv = await nc.jetstream().views.kv(bucket, { bindOnly: true });
    } catch (err) {
      throw new CotalError(
        "lease_bucket_missing",
        `The delivery lease bucket ${bucket} is not reachable (${
          (err as Error)?.message ?? err
        }); set the space up (setupSpaceStreams) before starting its delivery daemon.`,
        { cause: err },
      );
    }
    return new DeliveryLease(nc, kv, bucket, holder, incarnation, lockId);
  }

  /** The revision of the row this daemon last wrote, when it holds the lease. */
  get revision(): number | undefined {
    return this.#lease.revision;
  }

  /** The row as this daemon writes it on an acquire or a take-over. */
  fresh(): LeaseInfo {
    return {
      holder: this.holder,
      incarnation: this.incarnation,
      since: Date.now(),
      ready: false,
      ...(this.#lockId ? { lock: this.#lockId } : {}),
    };
  }

  /**
   * Replaces a dead holder's row (or a vacant one) at the revision it was read at
   * (compare-and-set). Resolves false when the row changed meanwhile. A holder writing its own
   * row back over a vacant one keeps its `since` and `ready`.
   */
  takeOver(revision: number): Promise<boolean> {
    return this.#lease.takeOver(revision, this.#lease.info ?? this.fresh());
  }

  /** Create-only acquire. Resolves false when a row already exists; throws on a denial. */
  async acquire(): Promise<boolean> {
    try {
      return await this.#lease.create(this.fresh());
    } catch (err) {
      throw this.#createError(err);
    }
  }

  #createError(err: unknown): CotalError {
    if (isPermission(err)) {
      return new CotalError(
        "lease_denied",
        `The broker refused the write of ${LEASE_KEY} in ${this.bucket}; use a credential ` +
          `holding the delivery profile.`,
        { cause: err },
      );
    }
    return new CotalError(
      "lease_failed",
      `Could not acquire ${LEASE_KEY} in ${this.bucket} (${(err as Error)?.message ?? err}).`,
      { cause: err },
    );
  }

  /** Re-reads the key and classifies it. */
  read(): Promise<LeaseView> {
    return this.#lease.read();
  }

  /** Adopt the broker's revision after a read proved the row is ours. */
  adopt(view: LeaseView & { state: "held" }): void {
    this.#lease.adopt(view);
  }

  /** CAS update of the row (renew, or flip `ready`). Resolves false when it is not ours any more. */
  write(patch: Partial<Pick<LeaseInfo, "ready">> = {}): Promise<boolean> {
    const info = this.#lease.info;
    return this.#lease.write(info && { ...info, ...patch });
  }

  /**
   * Watches the key; `onForeign` runs for every change this daemon did not write (another
   * holder's create, a delete, a purge). The watch is mandatory: start-up fails without it.
   */
  async watch(onForeign: () => void): Promise<void> {
    // Not npm:nats's kv.watch: a status line a member aimed at the key (stored with its header
    // on nats-server 2.10) would end that watch (lib/wire/stream_follow.ts).
    this.#watch = await followStream(this.#nc, {
      stream: kvStreamName(this.bucket),
      filter: `$KV.${this.bucket}.${LEASE_KEY}`,
      from: "new",
      onMessage: (m) => {
        if (m.seq === this.#lease.revision) return;
        const h = m.headers;
        const op = h === UNDECODABLE ? undefined : h?.get("KV-Operation");
        const info = this.#lease.rowOf({
          operation: op === "DEL" || op === "PURGE" ? op : "PUT",
          value: m.data,
        });
        if (info && info !== "vacant" && this.#lease.isMine(info)) return;
        onForeign();
      },
      // A change may have been stored while the consumer was being recreated: look again.
      onReset: () => onForeign(),
    });
  }

  /**
   * Releases the row only when it is provably ours: re-read, then a delete at that revision.
   * Best effort: the bucket TTL is the crash-safe release.
   */
  release(): Promise<boolean> {
    this.#watch?.stop();
    return this.#lease.release();
  }

  /** Stops the watch without touching the row (a lost lease is never released). */
  stopWatch(): void {
    this.#watch?.stop();
  }

  /**
   * Takes the lease: at once when it is free or its holder is proven dead on this machine; else
   * waits up to `waitMs` for a live holder's row to go, then refuses with `lease_held`.
   */
  takeLease(opts: AcquireLeaseOptions): Promise<void> {
    return acquireKvLease(this.#lease, {
      fresh: () => this.fresh(),
      waitMs: opts.waitMs,
      pollMs: 1000,
      lock: opts.lock,
      createFailed: (err) => Promise.reject(this.#createError(err)),
      tookOver: (from) =>
        opts.log.info(
          `took the lease over from ${from.holder}, whose process on this machine is gone`,
        ),
      refuse: (view) => {
        const who = view.state === "taken"
          ? ` (held by ${view.info.holder} since ${new Date(view.info.since).toISOString()})`
          : "";
        return new CotalError(
          "lease_held",
          `Another delivery daemon serves space ${JSON.stringify(opts.space)}${who}; stop it, ` +
            `or wait for its lease to age out (30 s after it stopped renewing).`,
        );
      },
    });
  }
}

/** Options of {@linkcode acquireLease}. */
export interface AcquireLeaseOptions {
  space: string;
  /** How long a live holder's row is waited out before `lease_held`. */
  waitMs: number;
  /** This machine's proof that a previous holder died (taken over at once). */
  lock?: HolderLock;
  log: { info(line: string): void };
}

/**
 * Takes the lease: at once when it is free or its holder is proven dead on this machine; else
 * waits up to `waitMs` for a live holder's row to go, then refuses with `lease_held`.
 */
export function acquireLease(lease: DeliveryLease, opts: AcquireLeaseOptions): Promise<void> {
  return lease.takeLease(opts);
}
