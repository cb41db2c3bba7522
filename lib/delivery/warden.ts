/**
 * The storage warden: members that never read cannot fill the space's shared stores, however
 * many of them collude, and cannot make an honest member's messages go instead.
 *
 * DM, TASK and DLV keep what waits for a reader, each with a per-subject cap, so one pair or
 * one member holds a bounded share. But the shares add up: k agents that DM each other and never
 * read hold k(k−1) pair shares of DM, and thirty-odd members that never read hold all of DLV,
 * and then every DM, task or durable copy of the space is refused. JetStream cannot cap a share
 * of a whole stream per sender, so the delivery daemon (the one process that may manage these
 * streams) looks at each of them every second and, once one is half full, makes the biggest
 * holders yield first:
 *
 * - **DM and TASK** are read as they grow, each new message once (`./warden_index.ts`): what no
 *   member wrote there (a broker answer aimed at a pair's subject, a replay) is deleted at once,
 *   so it neither fills a pair nor counts against the sender it names; the genuine messages are
 *   indexed. Once the stream is half full it is trimmed by sender, in bytes
 *   (`./warden_plan.ts`): the senders holding the most are cut down to one level that brings the
 *   stream to {@linkcode WARDEN_TARGET}, never below {@linkcode PROTECTED_SENDER_BYTES}; inside a
 *   sender its largest pairs first, inside a pair its oldest messages. Every pair's trim is recorded for the operator (`cotal dead-letters`,
 *   `trim.<stream>.<recipient>.<sender>`), and a DM recipient is told with a gap marker naming
 *   the sender: nothing is lost in silence.
 * - **DLV** is never trimmed (its copies are owed): while it is half full, members above the
 *   level get no new copies, only the gap marker that counts them, the way a full backlog does.
 *
 * @module
 */
import type { JsMsg, StreamInfo } from "nats";
import type { Principal } from "../wire/mod.ts";
import { decodeMessage, type DeliveryKind, parseSubject } from "../wire/mod.ts";
import { scanStream } from "./chat_scan.ts";
import { aliasAclRows, type DeliveryContext } from "./context.ts";
import { StoreIndex } from "./warden_index.ts";
import {
  type Pair,
  planTrim,
  PROTECTED_BACKLOG,
  PROTECTED_SENDER_BYTES,
  type TrimStep,
  yieldingGroups,
} from "./warden_plan.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

export { PROTECTED_BACKLOG, PROTECTED_SENDER_BYTES };

/** How often the warden looks at DM, TASK and DLV. */
export const WARDEN_INTERVAL_MS = 1_000;
/** The fill (of a stream's byte cap) at which the biggest holders start to yield. */
export const WARDEN_ONSET = 0.5;
/** The fill a trim brings DM or TASK back to. */
export const WARDEN_TARGET = 0.4;
/**
 * The share of DLV below which the fan-out writes copies straight to it; above, copies go through
 * INBOX and the reader, whose pace the warden's one look a second can follow (the fan-out alone
 * filled DLV from 40% to 65% between two looks on a loaded machine).
 */
export const DIRECT_CEILING = 0.25;
/** The longest one sweep reads DM or TASK; a longer backlog is read on over the next sweeps. */
export const WARDEN_READ_BUDGET_MS = 5_000;
/** Messages per fetch of a read. */
const READ_FETCH = 1_024;
/** Deletions in flight at once. */
const DELETE_WINDOW = 64;
/** The read consumer's name on DM and TASK (the delivery profile may use no other there). */
export const WARDEN_CONSUMER = "warden";

/** What one sweep did. */
export interface WardenSweep {
  /** Messages trimmed from DM and TASK, by stream. */
  trimmed: Record<string, number>;
  /** Messages no member wrote deleted from DM and TASK, by stream. */
  deleted: Record<string, number>;
  /** DLV subjects that get no new copies until the next sweep. */
  yielding: number;
}

/** One of DM and TASK as the warden follows it. */
interface Watched {
  stream: string;
  filter: string;
  /** The delivery kind its genuine messages decode to. */
  kind: DeliveryKind;
  what: "DM" | "task";
  index: StoreIndex;
  /** The last stream sequence read. */
  cursor: number;
  /** What no member wrote, read but not yet deleted, by subject (sequences in stream order). */
  junk: Map<string, number[]>;
}

/**
 * The sender and recipient (a DM's principal, a task's role) a DM or task subject names; only
 * genuine messages, whose subjects decoded, are ever asked about.
 */
function pairOf(subject: string): Pair | undefined {
  const p = parseSubject(subject);
  if (!p.ok) return undefined;
  const dot = (x: Principal) => `${x.owner}.${x.actor}`;
  if (p.kind === "inst") return { recipient: dot(p.recipient), sender: dot(p.sender) };
  if (p.kind === "svc") return { recipient: p.role, sender: dot(p.sender) };
  return undefined;
}

/** A stored message's size as the file store counts it: subject, headers, payload. */
function storedSize(m: JsMsg): number {
  let size = m.subject.length + m.data.length + 30;
  const h = headersOf(m);
  if (h && h !== UNDECODABLE) {
    for (const k of h.keys()) {
      size += k.length + h.get(k).length + 4;
    }
  }
  return size;
}

/** The warden of one space, bound to the daemon's fence while it holds the lease. */
export class StorageWarden {
  readonly #ctx: DeliveryContext;
  readonly #token: number;
  #yielding = new Set<string>();
  /** DLV's bytes and cap at the last look (0: not looked yet), and what this daemon wrote since. */
  #dlvBytes = 0;
  #dlvMax = 0;
  #sinceLook = 0;
  #timer?: ReturnType<typeof setInterval>;
  #sweeping = false;
  readonly #watched: Watched[];

  constructor(ctx: DeliveryContext, token: number) {
    this.#ctx = ctx;
    this.#token = token;
    const { root, streams } = ctx;
    const watch = (stream: string, filter: string, kind: DeliveryKind, what: "DM" | "task") => ({
      stream,
      filter,
      kind,
      what,
      index: new StoreIndex(),
      cursor: 0,
      junk: new Map(),
    });
    this.#watched = [
      watch(streams.dm, `${root}.inst.>`, "dm", "DM"),
      watch(streams.task, `${root}.svc.>`, "anycast", "task"),
    ];
  }

  /** Sweeps now and every {@linkcode WARDEN_INTERVAL_MS} until {@linkcode stop}. */
  start(): void {
    const run = () =>
      // A sweep that fails says so in a sentence (a bare nats.js "TIMEOUT" after a broker
      // restart told the operator nothing); the next runs on schedule.
      void this.sweep().catch((err) =>
        this.#ctx.log.warn(
          `storage warden: a sweep failed (${
            (err as Error)?.message ?? err
          }); the next one runs in ${WARDEN_INTERVAL_MS / 1000} s`,
        )
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

  /**
   * Whether the fan-out may write a copy of `bytes` straight to DLV, counting it: only while DLV
   * (as last looked at, plus what was written since) stays under {@linkcode DIRECT_CEILING}.
   * Past it copies take the INBOX path, where the reader writes them at its own pace and the
   * warden, looking again at once, judges who yields: the fan-out alone writes faster than one
   * look a second can follow (it filled DLV to 65% between two looks).
   */
  /**
   * Counts a copy the reader wrote to DLV since the last look; once the count takes DLV past
   * {@linkcode WARDEN_ONSET}, the warden looks again at once rather than at its next second.
   */
  wrote(bytes: number): void {
    this.#sinceLook += bytes;
    const max = this.#dlvMax;
    if (max > 0 && !this.#sweeping && this.#dlvBytes + this.#sinceLook >= WARDEN_ONSET * max) {
      void this.sweep().catch(() => {});
    }
  }

  admitsDirect(bytes: number): boolean {
    const ceiling = DIRECT_CEILING * this.#dlvMax;
    if (this.#dlvMax <= 0 || this.#dlvBytes + this.#sinceLook + bytes >= ceiling) {
      if (this.#dlvMax > 0 && !this.#sweeping) void this.sweep().catch(() => {});
      return false;
    }
    this.#sinceLook += bytes;
    return true;
  }

  /** One look at DM, TASK and DLV; deletions, trims and refusals as the module doc says. */
  async sweep(): Promise<WardenSweep> {
    const out: WardenSweep = { trimmed: {}, deleted: {}, yielding: this.#yielding.size };
    if (this.#sweeping) return out;
    this.#sweeping = true;
    try {
      // DLV first: its guard is what a fast writer outruns, and the DM and TASK reads after it
      // may take seconds (a full suite's load let DLV pass 60% while a sweep read DM).
      await this.#guardDlv();
      for (const w of this.#watched) {
        const si = await this.#ctx.jsm.streams.info(w.stream);
        out.deleted[w.stream] = 0;
        out.trimmed[w.stream] = 0;
        if (si.state.last_seq > w.cursor) await this.#read(w, si);
        if (w.junk.size > 0) out.deleted[w.stream] = await this.#clear(w);
        // What recipients read leaves the index too, so it never outgrows the stream.
        if (w.index.size > si.state.messages) await this.#reconcile(w);
        // Trims only on a full picture: every message up to the sweep's start read.
        if (w.cursor >= si.state.last_seq) out.trimmed[w.stream] = await this.#trim(w, si);
      }
      out.yielding = this.#yielding.size;
      return out;
    } finally {
      this.#sweeping = false;
    }
  }

  /**
   * Reads what `w` gained since the last read (for at most {@linkcode WARDEN_READ_BUDGET_MS})
   * through a short-lived in-memory consumer, deleted before and after and reaped by the broker
   * if the daemon dies mid-read. Ack none: on these interest streams the read never holds a
   * message its recipient has read. Indexes the genuine messages and sets the rest aside for
   * {@linkcode #clear}.
   */
  async #read(w: Watched, si: StreamInfo): Promise<void> {
    const { space } = this.#ctx;
    const junk = w.junk;
    let pending = -1;
    const total = await scanStream(this.#ctx, w.stream, {
      name: WARDEN_CONSUMER,
      filter: w.filter,
      fromSeq: w.cursor + 1,
      batch: READ_FETCH,
      until: Date.now() + WARDEN_READ_BUDGET_MS,
      what: "the storage warden's read",
      onMessage: (m) => {
        pending = m.info.pending;
        const d = decodeMessage(m.subject, m.data, { space, headers: headersOf(m) });
        if (d.ok && d.kind === w.kind && !w.index.seen(m.subject, d.message.id)) {
          w.index.add(m.subject, m.seq, storedSize(m), d.message.id);
        } else {
          const seqs = junk.get(m.subject) ?? [];
          seqs.push(m.seq);
          junk.set(m.subject, seqs);
        }
        w.cursor = m.seq;
      },
    });
    // Nothing more on the filter: what is left up to the stream's last is another's subject.
    if (total === 0 || pending === 0) w.cursor = Math.max(w.cursor, si.state.last_seq);
  }

  /**
   * Deletes what {@linkcode #read} found no member wrote. A subject holding nothing genuine goes
   * in one purge up to its last junk read (a genuine message stored since has a later sequence
   * and stays); elsewhere junk goes one by one. What could not be deleted now is kept for the
   * next sweep (the read has moved past it); a message already gone counts as done.
   */
  async #clear(w: Watched): Promise<number> {
    const { jsm, fence, log } = this.#ctx;
    let deleted = 0;
    const singles: [string, number][] = [];
    for (const [subject, seqs] of [...w.junk]) {
      if (!fence.mayAct(this.#token)) return deleted;
      if (w.index.has(subject)) {
        for (const seq of seqs) singles.push([subject, seq]);
        continue;
      }
      const r = await jsm.streams.purge(w.stream, {
        filter: subject,
        seq: seqs[seqs.length - 1] + 1,
      }).then((r) => r.purged, () => -1);
      if (r < 0) continue;
      deleted += r;
      w.junk.delete(subject);
    }
    for (const [subject] of singles) w.junk.delete(subject);
    for (let i = 0; i < singles.length && fence.mayAct(this.#token); i += DELETE_WINDOW) {
      const done = await Promise.all(
        singles.slice(i, i + DELETE_WINDOW).map(([subject, seq]) =>
          jsm.streams.deleteMessage(w.stream, seq, false).then(() => true, (err) => {
            if (/no message found/i.test(String((err as Error)?.message ?? err))) return false;
            const later = w.junk.get(subject) ?? [];
            later.push(seq);
            w.junk.set(subject, later.sort((a, b) => a - b));
            return false;
          })
        ),
      );
      deleted += done.filter(Boolean).length;
    }
    if (deleted > 0) {
      // Its own kind for the rate limit: a flood of these must not hide the warden's other news.
      log.warn(
        `aimed answers deleted: ${deleted} messages of ${w.stream} no member wrote (broker answers aimed at a pair's subject, or replays); they counted against no sender`,
      );
    }
    return deleted;
  }

  async #reconcile(w: Watched): Promise<void> {
    const detail = await this.#ctx.jsm.streams.info(w.stream, { subjects_filter: w.filter });
    w.index.reconcile(detail.state.subjects ?? {});
  }

  async #trim(w: Watched, si: StreamInfo): Promise<number> {
    const { jsm, fence, log } = this.#ctx;
    const max = si.config.max_bytes;
    if (!(max > 0) || si.state.bytes < WARDEN_ONSET * max) return 0;
    await this.#reconcile(w);
    const steps = planTrim(w.index.messages(), pairOf, si.state.bytes - WARDEN_TARGET * max);
    let trimmed = 0;
    let bytes = 0;
    const senders = new Set<string>();
    for (const step of steps) {
      if (!fence.mayAct(this.#token)) break;
      const r = await jsm.streams.purge(w.stream, { filter: step.subject, seq: step.before })
        .catch(() => ({ purged: 0 }));
      w.index.cut(step.subject, step.before);
      if (r.purged === 0) continue;
      trimmed += r.purged;
      bytes += step.bytes;
      senders.add(step.sender);
      await this.#record(w.stream, w.what, step, r.purged);
    }
    if (trimmed > 0) {
      // One line per trim, not rate-limited: a trim only follows ~10% of the stream's cap sent.
      log.info(
        `storage warden: ${w.stream} was ${Math.round((100 * si.state.bytes) / max)}% full; ` +
          `trimmed the oldest ${trimmed} unread ${w.what} messages (${
            mib(bytes)
          } MiB) of the ${senders.size} ` +
          `largest senders (${[...senders].slice(0, 8).join(", ")}${
            senders.size > 8 ? ", …" : ""
          }); ` +
          `every sender under ${mib(PROTECTED_SENDER_BYTES)} MiB kept all of theirs`,
      );
    }
    return trimmed;
  }

  /** The record for the operator and, for a DM, the recipient's gap marker naming the sender. */
  async #record(stream: string, what: "DM" | "task", step: TrimStep, purged: number) {
    const setaside = this.#ctx.setaside;
    if (!setaside) return;
    await setaside.trimmed({
      at: Date.now(),
      stream,
      recipient: step.recipient,
      sender: step.sender,
      what,
      purged,
      bytes: step.bytes,
    });
    if (what !== "DM") return;
    for (const [uid] of aliasAclRows(this.#ctx, step.recipient)) {
      await setaside.dmTrimmed(step.recipient, uid, step.sender, {
        count: purged,
        firstSeq: step.firstSeq,
        lastSeq: step.lastSeq,
      });
    }
  }

  async #guardDlv(): Promise<void> {
    const { jsm, streams, root } = this.#ctx;
    const si = await jsm.streams.info(streams.dlv);
    const max = si.config.max_bytes;
    this.#dlvBytes = si.state.bytes;
    this.#dlvMax = max > 0 ? max : 0;
    this.#sinceLook = 0;
    if (!(max > 0) || si.state.messages === 0 || si.state.bytes < WARDEN_ONSET * max) {
      this.#yielding.clear();
      return;
    }
    // Copies per member lifecycle, in messages of the stream's average size.
    const budget = Math.floor((WARDEN_TARGET * max) / (si.state.bytes / si.state.messages));
    const detail = await jsm.streams.info(streams.dlv, { subjects_filter: `${root}.dlv.>` });
    const next = yieldingGroups(detail.state.subjects ?? {}, budget);
    if (next.size > 0 && this.#yielding.size === 0) {
      this.#ctx.log.warn(
        `storage warden: DLV is ${Math.round((100 * si.state.bytes) / max)}% full; ` +
          `${next.size} members with the largest unread backlogs get gap markers instead of new copies`,
      );
    }
    this.#yielding = next;
  }
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
