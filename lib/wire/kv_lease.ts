/**
 * One lease protocol over a KV key, shared by the delivery daemon (`lease.0` in
 * `cotal_delivery_<s>`) and the manager (`lease.<instanceId>` in `cotal_manager_<s>`): acquire
 * is a create-only write, renew a compare-and-set update, release a compare-and-set delete of a
 * row re-read as ours, and the bucket's TTL is the crash-safe release.
 *
 * Ownership means the row's `incarnation` (a random id per process) is this process's: a
 * successor started with the same cred never mistakes its predecessor's row for its own.
 *
 * A row that is no lease row is nobody's: a member can aim a broker answer (a JSON reply, a
 * status line) at the key, since the broker checks no reply subject. Such a row reads as
 * `vacant`: the holder writes its row back over it, a newcomer takes it, and neither waits for
 * a holder that does not exist.
 *
 * @module
 */

import type { KV, KvEntry } from "nats";
import { jsonBytes } from "./kv.ts";

/** What every lease row carries. */
export interface LeaseRowBase {
  /** A random id per holder process. */
  readonly incarnation: string;
  /** The holder's lock-file id on its machine (see `HolderLock`), when it runs with one. */
  readonly lock?: string;
}

/** What a read of the key found, relative to this holder. */
export type KvLeaseView<T extends LeaseRowBase> =
  | { state: "held"; revision: number; info: T }
  | { state: "taken"; revision: number; info: T }
  | { state: "vacant"; revision: number }
  | { state: "gone" }
  | { state: "unknown"; error: string };

/** This machine's proof that a previous holder died (`HolderLock`, by shape). */
export interface DeadHolderProof {
  tryTake(): Promise<boolean>;
  provesDead(rowId: unknown): boolean;
}

/** True when a write lost a compare-and-set (or a create found the key). */
export function isWrongSeq(err: unknown): boolean {
  const code = (err as { api_error?: { err_code?: number } })?.api_error?.err_code;
  return code === 10071 || /wrong last sequence|key exists/i.test(String((err as Error)?.message));
}

/** One holder's handle on a lease key. */
export class KvLease<T extends LeaseRowBase> {
  readonly key: string;
  readonly incarnation: string;
  readonly #kv: KV;
  readonly #isRow: (v: unknown) => v is T;
  readonly #owns: (row: T) => boolean;
  #revision?: number;
  #info?: T;

  /**
   * `isRow` says whether a decoded value is a lease row at all (else the row is vacant);
   * `owns` narrows ownership further than the incarnation (the delivery daemon's holder).
   */
  constructor(
    kv: KV,
    key: string,
    incarnation: string,
    isRow: (v: unknown) => v is T,
    owns: (row: T) => boolean = () => true,
  ) {
    this.#kv = kv;
    this.key = key;
    this.incarnation = incarnation;
    this.#isRow = isRow;
    this.#owns = owns;
  }

  /** The revision of the row this holder last wrote, while it holds the lease. */
  get revision(): number | undefined {
    return this.#revision;
  }

  /** The row this holder last wrote. */
  get info(): T | undefined {
    return this.#info;
  }

  /** The row's lease, "vacant" for a row that is no lease row, undefined when there is none. */
  rowOf(e: Pick<KvEntry, "operation" | "value"> | null): T | "vacant" | undefined {
    if (!e || e.operation !== "PUT") return undefined;
    try {
      const v = JSON.parse(new TextDecoder().decode(e.value));
      if (this.#isRow(v)) return v;
    } catch {
      // Not JSON: no holder wrote it.
    }
    return "vacant";
  }

  /** True when `row` was written by this holder. */
  isMine(row: T): boolean {
    return row.incarnation === this.incarnation && this.#owns(row);
  }

  /** Create-only write. Resolves false when a row already exists; throws anything else. */
  async create(info: T): Promise<boolean> {
    try {
      this.#revision = await this.#kv.create(this.key, jsonBytes(info));
      this.#info = info;
      return true;
    } catch (err) {
      if (isWrongSeq(err)) return false;
      throw err;
    }
  }

  /** Re-reads the key and classifies it. */
  async read(): Promise<KvLeaseView<T>> {
    let e: KvEntry | null;
    try {
      e = await this.#kv.get(this.key);
    } catch (err) {
      return { state: "unknown", error: String((err as Error)?.message ?? err) };
    }
    const info = this.rowOf(e);
    if (!info || !e) return { state: "gone" };
    if (info === "vacant") return { state: "vacant", revision: e.revision };
    return { state: this.isMine(info) ? "held" : "taken", revision: e.revision, info };
  }

  /** Adopts the broker's revision after a read proved the row is ours. */
  adopt(view: KvLeaseView<T> & { state: "held" }): void {
    this.#revision = view.revision;
    this.#info = view.info;
  }

  /**
   * Writes `info` over the row at the revision it was read at (a dead holder's or a vacant
   * row). Resolves false when the row changed meanwhile.
   */
  async takeOver(revision: number, info: T): Promise<boolean> {
    try {
      this.#revision = await this.#kv.update(this.key, jsonBytes(info), revision);
      this.#info = info;
      return true;
    } catch (err) {
      if (isWrongSeq(err)) return false;
      throw err;
    }
  }

  /**
   * Compare-and-set update of this holder's row (a renew, or a change to it). Resolves false
   * when the row is not at the revision this holder last wrote.
   */
  async write(info: T | undefined = this.#info): Promise<boolean> {
    if (this.#revision === undefined || !info) return false;
    try {
      this.#revision = await this.#kv.update(this.key, jsonBytes(info), this.#revision);
      this.#info = info;
      return true;
    } catch (err) {
      if (isWrongSeq(err)) {
        this.#revision = undefined;
        return false;
      }
      throw err;
    }
  }

  /** Deletes the row only when a fresh read proves it ours. Best effort: false otherwise. */
  async release(): Promise<boolean> {
    const view = await this.read();
    if (view.state !== "held") return false;
    try {
      await this.#kv.delete(this.key, { previousSeq: view.revision });
      this.#revision = undefined;
      return true;
    } catch {
      return false;
    }
  }
}

/** Options of {@linkcode acquireKvLease}. */
export interface AcquireKvLeaseOptions<T extends LeaseRowBase> {
  /** The row to write, made fresh for each attempt. */
  fresh(): T;
  /** How long a live holder's row is waited out before `refuse`. */
  waitMs: number;
  /** The pause between looks at a live holder's row. */
  pollMs: number;
  /** This machine's proof that a previous holder died (taken over at once). */
  lock?: DeadHolderProof;
  /** A create that failed other than on an existing row: true to try again, else throw. */
  createFailed(err: unknown): Promise<true>;
  /** Told when a dead holder's row was taken over. */
  tookOver?(from: T): void;
  /** The refusal once `waitMs` is spent; `view` is the last read. */
  refuse(view: KvLeaseView<T>): Error;
}

/**
 * Takes the lease: at once when the key is free, vacant, or its holder is proven dead on this
 * machine; else waits up to `waitMs` for a live holder's row to go, then throws `refuse(view)`.
 */
export async function acquireKvLease<T extends LeaseRowBase>(
  lease: KvLease<T>,
  opts: AcquireKvLeaseOptions<T>,
): Promise<void> {
  const deadline = Date.now() + opts.waitMs;
  for (;;) {
    let created: boolean;
    try {
      created = await lease.create(opts.fresh());
    } catch (err) {
      await opts.createFailed(err);
      continue;
    }
    if (created) return;
    const view = await lease.read();
    if (view.state === "gone") continue;
    if (view.state === "vacant") {
      if (await lease.takeOver(view.revision, lease.info ?? opts.fresh())) return;
      continue;
    }
    if (
      view.state === "taken" && opts.lock && await opts.lock.tryTake() &&
      opts.lock.provesDead(view.info.lock)
    ) {
      if (await lease.takeOver(view.revision, opts.fresh())) {
        opts.tookOver?.(view.info);
        return;
      }
      continue;
    }
    if (Date.now() >= deadline) throw opts.refuse(view);
    await new Promise((r) => setTimeout(r, opts.pollMs));
  }
}
