/**
 * The uid and gid an agent runs as. A root supervisor gives every agent its own unprivileged
 * uid from a range (the range's first id is the agents' shared group), so no agent is root
 * anywhere, per-uid limits (RLIMIT_NPROC) are per agent, and two agents never share a uid. A
 * uid is held through an advisory lock on `<lockDir>/<uid>` for the agent's life: the lock
 * dies with the supervisor, so a crash frees its uids without any cleanup, and two supervisors
 * on one machine (two spaces, two roots) never hand out the same uid.
 *
 * A supervisor that is not root runs agents as its own uid inside a user namespace (it cannot
 * switch uids); the kernel still gives the agent no capability outside the sandbox.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import { closeFd, tryLockFile } from "./libc.ts";

/** A range of ids: `first` is the agents' group, `first + 1 ..` their uids. */
export interface AgentIdRange {
  /** The first id (agents' group; agents take the ones after). */
  readonly first: number;
  /** How many ids the range holds. */
  readonly count: number;
}

/**
 * The default range: far above login users (1000-60000), systemd's dynamic users
 * (61184-65519) and `nobody`, and in no distribution's allocation.
 */
export const DEFAULT_AGENT_IDS: AgentIdRange = Object.freeze({
  first: 1_500_000_000,
  count: 65_536,
});

/** Where uid locks live: machine-wide and cleared at boot. */
export const DEFAULT_ID_LOCK_DIR = "/run/cotal/agent-ids";

/** The ids one agent runs as. */
export interface AgentIds {
  readonly uid: number;
  readonly gid: number;
  /** Frees the uid (a no-op for a non-root supervisor's own ids). */
  release(): void;
}

/** Validates a range given as `first-last`. */
export function parseIdRange(text: string): AgentIdRange {
  const m = /^(\d{1,10})-(\d{1,10})$/.exec(text.trim());
  const first = m ? Number(m[1]) : NaN;
  const last = m ? Number(m[2]) : NaN;
  if (!m || first < 100_000 || last > 4_294_967_293 || last - first < 2) {
    throw new CotalError(
      "agent_ids_invalid",
      `The agent id range "${
        text.slice(0, 40)
      }" must be first-last with first >= 100000, at least 3 ids, and last below 4294967294.`,
    );
  }
  return Object.freeze({ first, count: last - first + 1 });
}

/** Scans of the range before it counts as exhausted, and the pause between them. */
const ACQUIRE_ATTEMPTS = 4;
const ACQUIRE_RETRY_MS = 25;

/** Hands out agent uids from a range, one lock file each. */
export class AgentIdPool {
  readonly range: AgentIdRange;
  readonly lockDir: string;
  #held = new Map<number, number>();

  constructor(range: AgentIdRange = DEFAULT_AGENT_IDS, lockDir = DEFAULT_ID_LOCK_DIR) {
    this.range = range;
    this.lockDir = lockDir;
  }

  /**
   * Takes a free uid (its lock held until `release()`); `agent_ids_exhausted` if none.
   * `prefer`, when it is in the range and free, is taken first: an agent brought back after a
   * supervisor restart runs as the uid it had, so what it wrote stays writable to it (fault
   * pass 8: a new uid could not append to its own files, and the agent was retired).
   */
  async acquire(prefer?: number): Promise<AgentIds> {
    await Deno.mkdir(this.lockDir, { recursive: true, mode: 0o700 });
    const uids = this.range.count - 1;
    const take = (uid: number): AgentIds | undefined => {
      if (this.#held.has(uid)) return undefined;
      const fd = tryLockFile(`${this.lockDir}/${uid}`);
      if (fd === undefined) return undefined;
      this.#held.set(uid, fd);
      return {
        uid,
        gid: this.range.first,
        release: () => {
          const held = this.#held.get(uid);
          if (held === undefined) return;
          this.#held.delete(uid);
          closeFd(held);
        },
      };
    };
    const inRange = prefer !== undefined && Number.isSafeInteger(prefer) &&
      prefer > this.range.first && prefer < this.range.first + this.range.count;
    // A lock just released can still be held for an instant by a child this process is
    // starting (fork copies the descriptor; exec closes it, O_CLOEXEC): a scan that finds
    // nothing free is tried again a few times before the range counts as exhausted (CI met
    // it: a uid released by one pool was refused to the next acquire).
    for (let attempt = 0; attempt < ACQUIRE_ATTEMPTS; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, ACQUIRE_RETRY_MS));
      const preferred = inRange ? take(prefer) : undefined;
      if (preferred) return preferred;
      // A random start spreads supervisors over the range, so a scan rarely meets a held lock.
      const start = Math.floor(Math.random() * uids);
      for (let i = 0; i < Math.min(uids, 4096); i++) {
        const got = take(this.range.first + 1 + ((start + i) % uids));
        if (got) return got;
      }
    }
    throw new CotalError(
      "agent_ids_exhausted",
      `No free agent uid in ${this.range.first + 1}-${
        this.range.first + this.range.count - 1
      }; despawn agents or give the supervisor a wider --agent-ids range.`,
    );
  }

  /** Releases every uid this pool holds. */
  releaseAll(): void {
    for (const fd of this.#held.values()) closeFd(fd);
    this.#held.clear();
  }
}

/** The ids of a supervisor that cannot switch uids: its own, nothing to release. */
export function ownIds(): AgentIds {
  return { uid: Deno.uid() ?? 0, gid: Deno.gid() ?? 0, release: () => {} };
}
