/**
 * The storage warden: members that never read cannot fill the space's shared stores, however
 * many of them collude.
 *
 * DM, TASK and DLV keep what waits for a reader, each with a per-subject cap, so one sender or
 * one member holds a bounded share. But the shares add up: k agents that DM each other and never
 * read hold k(k−1) pair shares of DM, and thirty-odd members that never read hold all of DLV,
 * and then every DM, task or durable copy of the space is refused. JetStream cannot cap a share
 * of a whole stream per recipient, so the delivery daemon (the one process that may manage these
 * streams) looks at each of them every second and, once one is half full, makes the biggest
 * backlogs yield first:
 *
 * - **DM and TASK** are trimmed by water-filling: the recipients (a DM's principal, a task's
 *   role) with the largest backlogs are cut down to one level, the highest that brings the
 *   stream to {@linkcode WARDEN_TARGET}, never below {@linkcode PROTECTED_BACKLOG}; inside a
 *   recipient its largest senders are cut first, so a sender with a few messages keeps them
 *   while a flood is trimmed. What was trimmed is recorded for the operator (`cotal
 *   dead-letters`): nothing is lost in silence.
 * - **DLV** is never trimmed (its copies are owed): while it is half full, members above the
 *   level get no new copies, only the gap marker that counts them, the way a full backlog does.
 *
 * A recipient that reads keeps a short backlog and is never touched; only backlogs larger than
 * the protected size can yield, largest first, so colluders that never read hold at most the
 * protected size each once the stream is under pressure.
 *
 * @module
 */
import type { StreamInfo } from "nats";
import type { DeliveryContext } from "./context.ts";

/** How often the warden looks at DM, TASK and DLV. */
export const WARDEN_INTERVAL_MS = 1_000;
/** The fill (of a stream's byte cap) at which the biggest backlogs start to yield. */
export const WARDEN_ONSET = 0.5;
/** The fill a trim brings DM or TASK back to. */
export const WARDEN_TARGET = 0.4;
/**
 * A backlog (messages per DM recipient, task role or DLV member lifecycle) the warden never
 * trims or refuses: 64 messages of at most 64 KiB, 4 MiB.
 */
export const PROTECTED_BACKLOG = 64;

/**
 * The highest level `L ≥ floor` at which `Σ min(count, L)` fits in `budget`: `floor` when even
 * that does not fit, `Infinity` when everything fits.
 */
export function waterLevel(counts: readonly number[], budget: number, floor: number): number {
  const total = counts.reduce((a, c) => a + c, 0);
  if (total <= budget) return Infinity;
  const sum = (level: number) => counts.reduce((a, c) => a + Math.min(c, level), 0);
  if (sum(floor) > budget) return floor;
  let lo = floor; // fits
  let hi = Math.max(...counts); // does not fit (total > budget)
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (sum(mid) <= budget) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** One subject to cut down to its newest `keep` messages. */
export interface TrimStep {
  /** The recipient it belongs to (a principal for DM, a role for TASK). */
  group: string;
  subject: string;
  /** Messages stored on the subject now. */
  count: number;
  keep: number;
}

/**
 * The trims that bring `counts` (messages per subject) within `budget` messages: recipients
 * (`groupOf` a subject) above the water level are cut to it, each by its largest subjects
 * first. Subjects `groupOf` does not know are left alone.
 */
export function planTrim(
  counts: Readonly<Record<string, number>>,
  groupOf: (subject: string) => string | undefined,
  budget: number,
): TrimStep[] {
  const groups = new Map<string, [string, number][]>();
  for (const [subject, n] of Object.entries(counts)) {
    const g = groupOf(subject);
    if (g === undefined) continue;
    const list = groups.get(g) ?? [];
    list.push([subject, n]);
    groups.set(g, list);
  }
  const totals = [...groups.values()].map((l) => l.reduce((a, [, n]) => a + n, 0));
  const level = waterLevel(totals, budget, PROTECTED_BACKLOG);
  const steps: TrimStep[] = [];
  let i = 0;
  for (const [group, list] of groups) {
    const total = totals[i++];
    if (total <= level) continue;
    const perSubject = waterLevel(list.map(([, n]) => n), level, 0);
    for (const [subject, count] of list) {
      if (count > perSubject) steps.push({ group, subject, count, keep: perSubject });
    }
  }
  return steps;
}

/** The groups whose backlog is above the water level (the ones that yield). */
export function yieldingGroups(
  counts: Readonly<Record<string, number>>,
  budget: number,
): Set<string> {
  const entries = Object.entries(counts);
  const level = waterLevel(entries.map(([, n]) => n), budget, PROTECTED_BACKLOG);
  return new Set(entries.filter(([, n]) => n >= level).map(([s]) => s));
}

/** What one sweep did. */
export interface WardenSweep {
  /** Messages trimmed from DM and TASK, by stream. */
  trimmed: Record<string, number>;
  /** DLV subjects that get no new copies until the next sweep. */
  yielding: number;
}

/** The stream's fill, and how many messages fit in `fraction` of its byte cap. */
function budgetOf(si: StreamInfo, fraction: number): { over: boolean; budget: number } {
  const max = si.config.max_bytes;
  if (!(max > 0) || si.state.messages === 0) return { over: false, budget: Infinity };
  const avg = si.state.bytes / si.state.messages;
  return {
    over: si.state.bytes >= WARDEN_ONSET * max,
    budget: Math.floor((fraction * max) / avg),
  };
}

/** The warden of one space, bound to the daemon's fence while it holds the lease. */
export class StorageWarden {
  readonly #ctx: DeliveryContext;
  readonly #token: number;
  #yielding = new Set<string>();
  #timer?: ReturnType<typeof setInterval>;
  #sweeping = false;

  constructor(ctx: DeliveryContext, token: number) {
    this.#ctx = ctx;
    this.#token = token;
  }

  /** Sweeps now and every {@linkcode WARDEN_INTERVAL_MS} until {@linkcode stop}. */
  start(): void {
    const run = () =>
      void this.sweep().catch((err) =>
        this.#ctx.log.warn(`storage warden: ${(err as Error)?.message ?? err}`)
      );
    run();
    this.#timer ??= setInterval(run, WARDEN_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#yielding.clear();
  }

  /** True when a copy to this DLV subject must wait (counted for a gap marker instead). */
  yields(dlvSubject: string): boolean {
    return this.#yielding.has(dlvSubject);
  }

  /** One look at DM, TASK and DLV; trims and refusals as the module doc says. */
  async sweep(): Promise<WardenSweep> {
    const out: WardenSweep = { trimmed: {}, yielding: this.#yielding.size };
    if (this.#sweeping) return out;
    this.#sweeping = true;
    try {
      const { root, streams } = this.#ctx;
      const inst = `${root}.inst.`;
      const svc = `${root}.svc.`;
      // A DM's recipient is `<owner>.<actor>` after `inst.`; a task's is the role after `svc.`.
      out.trimmed[streams.dm] = await this.#trim(streams.dm, `${inst}>`, (s) => {
        const t = s.startsWith(inst) ? s.slice(inst.length).split(".") : [];
        return t.length === 4 ? `${t[0]}.${t[1]}` : undefined;
      }, "DM");
      out.trimmed[streams.task] = await this.#trim(streams.task, `${svc}>`, (s) => {
        const t = s.startsWith(svc) ? s.slice(svc.length).split(".") : [];
        return t.length === 3 ? t[0] : undefined;
      }, "task");
      await this.#guardDlv();
      out.yielding = this.#yielding.size;
      return out;
    } finally {
      this.#sweeping = false;
    }
  }

  async #trim(
    stream: string,
    filter: string,
    groupOf: (subject: string) => string | undefined,
    what: string,
  ): Promise<number> {
    const { jsm, fence } = this.#ctx;
    const si = await jsm.streams.info(stream);
    const { over, budget } = budgetOf(si, WARDEN_TARGET);
    if (!over) return 0;
    const detail = await jsm.streams.info(stream, { subjects_filter: filter });
    const steps = planTrim(detail.state.subjects ?? {}, groupOf, budget);
    let trimmed = 0;
    // Steps come recipient by recipient; each recipient's trim is recorded as soon as it is made.
    for (let i = 0; i < steps.length && fence.mayAct(this.#token);) {
      const group = steps[i].group;
      let purged = 0;
      for (; i < steps.length && steps[i].group === group; i++) {
        const { subject, keep } = steps[i];
        const r = await jsm.streams.purge(
          stream,
          keep > 0 ? { filter: subject, keep } : {
            filter: subject,
          },
        ).catch(() => ({ purged: 0 }));
        purged += r.purged;
      }
      trimmed += purged;
      if (purged > 0) {
        await this.#ctx.setaside?.trimmed({
          at: Date.now(),
          stream,
          recipient: group,
          what,
          purged,
        });
      }
    }
    return trimmed;
  }

  async #guardDlv(): Promise<void> {
    const { jsm, streams, root } = this.#ctx;
    const si = await jsm.streams.info(streams.dlv);
    const { over, budget } = budgetOf(si, WARDEN_TARGET);
    if (!over) {
      this.#yielding.clear();
      return;
    }
    const detail = await jsm.streams.info(streams.dlv, { subjects_filter: `${root}.dlv.>` });
    const next = yieldingGroups(detail.state.subjects ?? {}, budget);
    if (next.size > 0 && this.#yielding.size === 0) {
      this.#ctx.log.warn(
        `storage warden: DLV is ${
          Math.round((100 * si.state.bytes) / si.config.max_bytes)
        }% full; ` +
          `${next.size} members with the largest unread backlogs get gap markers instead of new copies`,
      );
    }
    this.#yielding = next;
  }
}
