/**
 * The manager's per-instance liveness lease: `lease.<instanceId>` in `cotal_manager_<s>`
 * (bucket TTL 10 s). Acquire is a create-only write, renew a compare-and-set update, release a
 * compare-and-set delete. Two managers started on the same workspace root for the same space
 * share an instance id, so the second one is refused instead of fighting over the agents.
 *
 * @module
 */
import type { NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import type { HolderLock } from "../workspace/mod.ts";
import {
  acquireKvLease,
  bindKv,
  bucketNames,
  isStoreFull,
  KvLease,
  purgeJunkRows,
} from "../wire/mod.ts";

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

function isLeaseRow(v: unknown): v is ManagerLeaseInfo {
  const r = v as Partial<ManagerLeaseInfo> | null;
  return typeof r?.instanceId === "string" && typeof r.incarnation === "string" &&
    Number.isInteger(r.pid) && typeof r.since === "number";
}

/** A held lease. */
export class ManagerLease {
  readonly key: string;
  readonly #lease: KvLease<ManagerLeaseInfo>;
  readonly #info: ManagerLeaseInfo;
  #timer?: ReturnType<typeof setInterval>;
  #lost?: (why: string) => void;

  private constructor(lease: KvLease<ManagerLeaseInfo>, info: ManagerLeaseInfo) {
    this.#lease = lease;
    this.key = lease.key;
    this.#info = info;
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
    const key = `lease.${info.instanceId}`;
    const lease = new KvLease(await bindKv(nc, bucket), key, info.incarnation, isLeaseRow);
    let cleared = false;
    await acquireKvLease(lease, {
      fresh: () => info,
      waitMs: opts.waitMs ?? 0,
      pollMs: 500,
      lock: opts.lock,
      createFailed: async (err) => {
        if (isStoreFull(err) && !cleared) {
          // Filled with answers a member aimed at made-up lease keys: those go, then once more.
          cleared = true;
          const n = await purgeJunkRows(nc, bucket, "lease.*", (_k, v) => isLeaseValue(v))
            .catch(() => 0);
          opts.log?.(`manager: the lease bucket was full; removed ${n} rows no manager wrote`);
          return true;
        }
        throw new CotalError(
          "manager_lease_failed",
          `Could not write the manager lease ${key} in ${bucket} (${
            (err as Error).message
          }); check the space is provisioned and the supervisor cred is current.`,
        );
      },
      tookOver: (held) =>
        opts.log?.(`manager: took the lease over from pid ${held.pid ?? "?"}, which is gone`),
      refuse: (view) => {
        const holder: Partial<ManagerLeaseInfo> = view.state === "taken" ? view.info : {};
        return new CotalError(
          "manager_lease_held",
          `Another manager holds ${key} for space '${space}' (pid ${holder.pid ?? "?"}, root ${
            holder.root ?? "?"
          }); stop it first, or wait ${MANAGER_LEASE_TTL_MS / 1000} s if it crashed.`,
        );
      },
    });
    return new ManagerLease(lease, info);
  }

  /** Renews on a timer; `lost` is told once if the row changed hands or vanished. */
  keepAlive(lost: (why: string) => void): void {
    this.#lost = lost;
    this.#timer = setInterval(() => void this.#renew(), MANAGER_LEASE_RENEW_MS);
  }

  async #renew(): Promise<void> {
    try {
      if (await this.#lease.write(this.#info)) return;
    } catch {
      return; // A transient failure (broker restart): the next tick looks again; the TTL is 3x.
    }
    // Not at our revision: a row no manager wrote is ours to write back; another manager's row
    // is a loss.
    const view = await this.#lease.read();
    if (view.state === "gone") {
      // It lapsed while the broker was away (or a restarted broker lost the memory bucket).
      // Nobody took it: taken again, create-only. Fault pass 8 saw a supervisor stop renewing
      // for good after a 12 s broker outage. A failure is looked at again on the next tick.
      await this.#lease.create(this.#info).catch(() => false);
    } else if (view.state === "held") {
      // Our own write, whose answer was lost in a reconnect: its revision is ours.
      this.#lease.adopt(view);
    } else if (view.state === "vacant") {
      await this.#lease.takeOver(view.revision, this.#info).catch(() => false);
    } else if (view.state === "taken") {
      clearInterval(this.#timer);
      this.#lost?.(`the lease ${this.key} changed hands`);
    }
  }

  /** Stops renewing and deletes the row if it is still ours. */
  async release(): Promise<void> {
    clearInterval(this.#timer);
    await this.#lease.release().catch(() => false);
  }
}

function isLeaseValue(value: Uint8Array): boolean {
  try {
    return isLeaseRow(JSON.parse(new TextDecoder().decode(value)));
  } catch {
    return false;
  }
}
