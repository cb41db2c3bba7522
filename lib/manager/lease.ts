/**
 * The manager's per-instance liveness lease: `lease.<instanceId>` in `cotal_manager_<s>`
 * (bucket TTL 10 s). Acquire is a create-only write, renew a compare-and-set update, release a
 * compare-and-set delete. Two managers started on the same workspace root for the same space
 * share an instance id, so the second one is refused instead of fighting over the agents.
 *
 * @module
 */
import type { KV, NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import type { HolderLock } from "../workspace/holder_lock.ts";
import { bindKv, isStoreFull, jsonBytes, purgeJunkRows } from "../wire/kv.ts";
import { bucketNames } from "../wire/resources.ts";

/** The bucket's TTL (reference: `MANAGER_LEASE_TTL_MS`); a lease not renewed lapses after it. */
export const MANAGER_LEASE_TTL_MS = 10_000;
/** How often a held lease is renewed. */
export const MANAGER_LEASE_RENEW_MS = 3_000;

/** The lease row. */
export interface ManagerLeaseInfo {
  readonly instanceId: string;
  /** A random id per manager process. */
  readonly incarnation: string;
  readonly pid: number;
  readonly root: string;
  readonly runtime: string;
  readonly isolation: string;
  readonly since: number;
  /** The holder's lock-file id (see `HolderLock`): a successor that proves it dead takes over. */
  readonly lock?: string;
}

function isWrongSeq(err: unknown): boolean {
  const code = (err as { api_error?: { err_code?: number } })?.api_error?.err_code;
  return code === 10071 || /wrong last sequence|key exists/i.test(String((err as Error)?.message));
}

function decode(value: Uint8Array): Partial<ManagerLeaseInfo> {
  try {
    return JSON.parse(new TextDecoder().decode(value));
  } catch {
    return {};
  }
}

/**
 * True when a row is a manager's lease row. Anything else (a broker answer a member aimed at
 * the key: the broker checks no reply subject) is nobody's, and is written over.
 */
function isLeaseRow(value: Uint8Array): boolean {
  const v = decode(value);
  return typeof v.instanceId === "string" && typeof v.incarnation === "string" &&
    Number.isInteger(v.pid) && typeof v.since === "number";
}

/** A held lease. */
export class ManagerLease {
  readonly key: string;
  readonly #kv: KV;
  readonly #info: ManagerLeaseInfo;
  #revision: number;
  #timer?: ReturnType<typeof setInterval>;
  #lost?: (why: string) => void;

  private constructor(kv: KV, key: string, info: ManagerLeaseInfo, revision: number) {
    this.#kv = kv;
    this.key = key;
    this.#info = info;
    this.#revision = revision;
  }

  /**
   * Takes the lease, retrying for up to `waitMs` while a predecessor's row lapses; a row whose
   * holder `lock` proves dead on this machine is taken over at once. Refuses with
   * `manager_lease_held` naming the holder's pid and root when another live manager has it.
   */
  static async acquire(
    nc: NatsConnection,
    space: string,
    info: ManagerLeaseInfo,
    opts: { waitMs?: number; lock?: HolderLock; log?: (line: string) => void } = {},
  ): Promise<ManagerLease> {
    const bucket = bucketNames(space).manager;
    const kv = await bindKv(nc, bucket);
    const key = `lease.${info.instanceId}`;
    const deadline = Date.now() + (opts.waitMs ?? 0);
    let cleared = false;
    while (true) {
      try {
        const rev = await kv.create(key, jsonBytes(info));
        return new ManagerLease(kv, key, info, rev);
      } catch (err) {
        if (isStoreFull(err) && !cleared) {
          // Filled with answers a member aimed at made-up lease keys: those go, then once more.
          cleared = true;
          const n = await purgeJunkRows(nc, bucket, "lease.*", (_k, v) => isLeaseRow(v))
            .catch(() => 0);
          opts.log?.(`manager: the lease bucket was full; removed ${n} rows no manager wrote`);
          continue;
        }
        if (!isWrongSeq(err)) {
          throw new CotalError(
            "manager_lease_failed",
            `Could not write the manager lease ${key} in ${bucket} (${
              (err as Error).message
            }); check the space is provisioned and the supervisor cred is current.`,
          );
        }
      }
      const row = await kv.get(key).catch(() => null);
      if (row && row.operation === "PUT" && !isLeaseRow(row.value)) {
        try {
          return new ManagerLease(
            kv,
            key,
            info,
            await kv.update(key, jsonBytes(info), row.revision),
          );
        } catch (err) {
          if (!isWrongSeq(err)) throw err;
        }
        continue;
      }
      if (opts.lock && row && row.operation === "PUT" && await opts.lock.tryTake()) {
        const held = decode(row.value);
        if (opts.lock.provesDead(held.lock)) {
          try {
            const rev = await kv.update(key, jsonBytes(info), row.revision);
            opts.log?.(
              `manager: took the lease over from pid ${held.pid ?? "?"}, which is gone`,
            );
            return new ManagerLease(kv, key, info, rev);
          } catch (err) {
            if (!isWrongSeq(err)) throw err;
          }
          continue;
        }
      }
      if (Date.now() >= deadline) {
        const e = await kv.get(key).catch(() => null);
        const holder = e ? decode(e.value) : {};
        throw new CotalError(
          "manager_lease_held",
          `Another manager holds ${key} for space '${space}' (pid ${holder.pid ?? "?"}, root ${
            holder.root ?? "?"
          }); stop it first, or wait ${MANAGER_LEASE_TTL_MS / 1000} s if it crashed.`,
        );
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Renews on a timer; `lost` is told once if the row changed hands or vanished. */
  keepAlive(lost: (why: string) => void): void {
    this.#lost = lost;
    this.#timer = setInterval(() => void this.#renew(), MANAGER_LEASE_RENEW_MS);
  }

  async #renew(): Promise<void> {
    try {
      this.#revision = await this.#kv.update(this.key, jsonBytes(this.#info), this.#revision);
    } catch (err) {
      if (isWrongSeq(err)) {
        // A row no manager wrote is ours to write back; another manager's row is a loss.
        const row = await this.#kv.get(this.key).catch(() => null);
        if (!row || row.operation !== "PUT") {
          // Gone: it lapsed while the broker was away (or a restarted broker lost the memory
          // bucket). Nobody took it: taken again, create-only. Fault pass 8 saw a supervisor
          // stop renewing for good after a 12 s broker outage.
          try {
            this.#revision = await this.#kv.create(this.key, jsonBytes(this.#info));
            return;
          } catch (again) {
            if (!isWrongSeq(again)) return; // Transient: the next tick looks again.
          }
        } else if (decode(row.value).incarnation === this.#info.incarnation) {
          // Our own write, whose answer was lost in a reconnect: its revision is ours.
          this.#revision = row.revision;
          return;
        } else if (!isLeaseRow(row.value)) {
          try {
            this.#revision = await this.#kv.update(this.key, jsonBytes(this.#info), row.revision);
            return;
          } catch {
            return; // Raced: the next tick looks again.
          }
        }
        clearInterval(this.#timer);
        this.#lost?.(`the lease ${this.key} changed hands`);
      }
      // A transient failure (broker restart) is retried on the next tick; the TTL is 3x longer.
    }
  }

  /** Stops renewing and deletes the row if it is still ours. */
  async release(): Promise<void> {
    clearInterval(this.#timer);
    await this.#kv.delete(this.key, { previousSeq: this.#revision }).catch(() => {});
  }
}
