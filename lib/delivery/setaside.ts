/**
 * What the delivery daemon could not deliver, kept where an operator and the member find it.
 *
 * - A **dead letter** is a copy no retry can deliver (too large once framed, refused by the
 *   broker for good): its record (where it came from, why, never its body) goes into the
 *   space's set-aside bucket under `dead.<stage>.<stream>.<seq>`, and the stream flows on.
 * - A **gap** is a member's copy refused because its backlog of unread copies is full
 *   (`MEMBER_BACKLOG_CAP`): counted per member lifecycle with the range it covers, kept under
 *   `gap.<owner>.<actor>.<uid>`, and handed to the member as a gap marker in its DLV subject as
 *   soon as the backlog has room again. Once told, the member's running total is kept under
 *   `told.<owner>.<actor>.<uid>` for the operator.
 * - A **trim** is what the storage warden cut from the largest senders' unread DMs or tasks to
 *   keep DM or TASK open to everyone (`./warden.ts`): the running total per recipient and
 *   sender is kept under `trim.<stream>.<recipient>.<sender>` for the operator, and a DM's
 *   recipient gets a gap marker naming the sender (`gap.<owner>.<actor>.<uid>.dm.<sender>`).
 *   Nothing is lost in silence.
 *
 * @module
 */
import { headers, type KV, type MsgHdrs } from "nats";
import {
  dlvSubject,
  GAP_MARKER_HEADER,
  type GapEnd,
  type GapMarker as Gap,
  isStoreFull,
  listKeys,
  purgeJunkRows,
} from "../wire/mod.ts";
import type { DeliveryContext } from "./context.ts";

export type { Gap, GapEnd };

/** How often pending gap markers are offered to their members. */
export const GAP_FLUSH_MS = 1_000;

/** One dead letter (no body: the original stays in its stream until it ages out). */
export interface DeadLetter {
  at: number;
  stage: "fanout" | "reader";
  stream: string;
  seq: number;
  subject: string;
  msgId?: string;
  member?: string;
  bytes: number;
  reason: string;
}

const ENC = new TextEncoder();

function keyToken(s: string): string {
  return s.replace(/[^A-Za-z0-9_-]/g, "_");
}

/** True when the broker refused a publish because a cap is full (discard new). */
export function isBacklogFull(err: unknown): boolean {
  return /maximum (messages per subject|messages|bytes) exceeded/i.test(
    String((err as Error)?.message ?? err),
  );
}

/** True when no retry can store this publish (it is larger than the broker takes). */
export function isTooLarge(err: unknown): boolean {
  return /maximum payload|max(imum)? ?payload|message size exceeds|MAX_PAYLOAD/i.test(
    String((err as Error)?.message ?? err),
  );
}

/** What a member was told it missed, in all, for the operator (`told.<member>.<uid>`). */
export interface ToldGap {
  member: string;
  lifecycleUid: string;
  /** Set when what was missed were DMs of this sender the storage warden trimmed. */
  from?: string;
  /** Copies missed, over every marker delivered to this lifecycle. */
  count: number;
  /** Markers delivered. */
  markers: number;
  /** The latest range told. */
  last: GapEnd;
  /** Epoch ms of the latest marker. */
  at: number;
}

/** What the storage warden trimmed of one sender's messages to one recipient, in all. */
export interface TrimRecord {
  /** Epoch ms of the latest trim. */
  at: number;
  stream: string;
  /** `<owner>.<actor>` of a DM recipient, or a task role. */
  recipient: string;
  /** `<owner>.<actor>` of the sender whose oldest messages were trimmed. */
  sender: string;
  /** "DM" or "task". */
  what: string;
  /** Messages trimmed, over every trim of this pair. */
  purged: number;
  /** Their bytes, as the warden's scan measured them. */
  bytes: number;
  /** How many trims that took. */
  trims: number;
}

/** The daemon's set-aside records and the pending gap markers it owes members. */
export class SetAside {
  readonly #ctx: DeliveryContext;
  readonly #kv: KV;
  readonly #gaps = new Map<string, Gap>();
  #timer?: ReturnType<typeof setInterval>;
  #flushing = false;
  #cleared = 0;
  deadLetters = 0;
  copiesMissed = 0;
  markersDelivered = 0;

  private constructor(ctx: DeliveryContext, kv: KV) {
    this.#ctx = ctx;
    this.#kv = kv;
  }

  /** Binds the bucket and loads the gaps a previous holder still owed. */
  static async open(ctx: DeliveryContext): Promise<SetAside> {
    const kv = await ctx.js.views.kv(ctx.buckets.setaside, { bindOnly: true });
    const s = new SetAside(ctx, kv);
    for (const key of await listKeys(ctx.jsm, ctx.buckets.setaside, "gap.>")) {
      const e = await kv.get(key).catch(() => null);
      if (!e || e.operation !== "PUT") continue;
      try {
        const g = JSON.parse(new TextDecoder().decode(e.value)) as Gap;
        if (g?.version === 1 && typeof g.member === "string") s.#gaps.set(key, g);
      } catch {
        // An unreadable record is left to its TTL.
      }
    }
    return s;
  }

  /** Pending gap markers, for status. */
  get gapsPending(): number {
    return this.#gaps.size;
  }

  /** Offers pending markers every second until {@linkcode stop}. */
  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), GAP_FLUSH_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Records a copy no retry can deliver. Never throws. */
  async deadLetter(d: DeadLetter): Promise<void> {
    this.deadLetters++;
    const key = `dead.${d.stage}.${keyToken(d.stream)}.${d.seq}${
      d.member ? `.${keyToken(d.member)}` : ""
    }`;
    this.#ctx.log.warn(
      `set aside ${d.subject} #${d.seq}${d.member ? ` for ${d.member}` : ""} (${d.reason})`,
    );
    await this.#put(key, d).catch((err) =>
      this.#ctx.log.error(`could not record a dead letter (${(err as Error)?.message ?? err})`)
    );
  }

  /** Records a copy refused because the member's backlog is full. Never throws. */
  async missed(member: string, lifecycleUid: string, end: GapEnd): Promise<void> {
    this.copiesMissed++;
    const key = `gap.${keyToken(member)}.${keyToken(lifecycleUid)}`;
    const g = this.#gaps.get(key);
    const next: Gap = g
      ? { ...g, count: g.count + 1, last: end }
      : { version: 1, member, lifecycleUid, count: 1, first: end, last: end };
    this.#gaps.set(key, next);
    if (!g) {
      this.#ctx.log.warn(
        `${member}'s backlog is full (${lifecycleUid}); missed copies are counted for a gap marker`,
      );
    }
    await this.#put(key, next).catch(() => {});
  }

  /** Adds a trim to the pair's running total (the warden logs the sweep). Never throws. */
  async trimmed(t: Omit<TrimRecord, "trims">): Promise<void> {
    const key = `trim.${keyToken(t.stream)}.${keyToken(t.recipient)}.${keyToken(t.sender)}`;
    const prev = await this.#read<TrimRecord>(key);
    const next: TrimRecord = {
      ...t,
      purged: (prev?.purged ?? 0) + t.purged,
      bytes: (prev?.bytes ?? 0) + t.bytes,
      trims: (prev?.trims ?? 0) + 1,
    };
    await this.#put(key, next).catch(() => {});
  }

  /**
   * Counts DMs of `sender` the storage warden trimmed before `member` read them, for a gap
   * marker to that lifecycle naming the sender (DM stream sequences, no channel). Never throws.
   */
  async dmTrimmed(
    member: string,
    lifecycleUid: string,
    sender: string,
    cut: { count: number; firstSeq: number; lastSeq: number },
  ): Promise<void> {
    const key = `gap.${keyToken(member)}.${keyToken(lifecycleUid)}.dm.${keyToken(sender)}`;
    const at = Date.now();
    const end = (seq: number): GapEnd => ({ msgId: "", channel: "", seq, at });
    const g = this.#gaps.get(key);
    const next: Gap = g ? { ...g, count: g.count + cut.count, last: end(cut.lastSeq) } : {
      version: 1,
      member,
      lifecycleUid,
      from: sender,
      count: cut.count,
      first: end(cut.firstSeq),
      last: end(cut.lastSeq),
    };
    this.#gaps.set(key, next);
    await this.#put(key, next).catch(() => {});
  }

  /**
   * Writes a record. A bucket full of rows no record is (answers a member aimed at made-up
   * keys: the broker checks no reply subject) is cleared of them, at most once a minute, and
   * the write tried once more.
   */
  async #put(key: string, value: unknown): Promise<void> {
    const bytes = ENC.encode(JSON.stringify(value));
    try {
      await this.#kv.put(key, bytes);
    } catch (err) {
      if (!isStoreFull(err) || Date.now() - this.#cleared < 60_000) throw err;
      this.#cleared = Date.now();
      const n = await purgeJunkRows(this.#ctx.nc, this.#ctx.buckets.setaside, ">", isRecord);
      this.#ctx.log.warn(`the set-aside bucket was full; removed ${n} rows no record is`);
      await this.#kv.put(key, bytes);
    }
  }

  async #read<T>(key: string): Promise<T | undefined> {
    const e = await this.#kv.get(key).then((e) => e && e.operation === "PUT" ? e : null)
      .catch(() => null);
    try {
      return e ? JSON.parse(new TextDecoder().decode(e.value)) as T : undefined;
    } catch {
      return undefined;
    }
  }

  /** Hands each pending gap to its member once its backlog has room. */
  async flush(): Promise<void> {
    if (this.#flushing || !this.#ctx.fence.active) return;
    this.#flushing = true;
    try {
      for (const [key, g] of [...this.#gaps]) {
        const [owner, actor] = g.member.split(".");
        const subject = dlvSubject(this.#ctx.space, { owner, actor }, g.lifecycleUid);
        // A member the storage warden holds back gets its marker once DLV has room again.
        if (this.#ctx.warden?.yields(subject)) continue;
        // Out of the map while in flight: copies refused meanwhile start a record of their own.
        this.#gaps.delete(key);
        try {
          await this.#ctx.gate.publish(
            subject,
            ENC.encode(JSON.stringify(g)),
            {
              msgID: `gap.${g.member}.${g.lifecycleUid}.${
                g.from ?? ""
              }.${g.first.msgId}.${g.first.seq}.${g.count}`,
              headers: gapHeaders(),
            },
          );
        } catch (err) {
          const later = this.#gaps.get(key);
          this.#gaps.set(key, later ? { ...g, count: g.count + later.count, last: later.last } : g);
          // Still full: offered again next time; anything else is said once per try.
          if (!isBacklogFull(err)) {
            this.#ctx.log.warn(
              `gap marker for ${g.member} not delivered (${(err as Error)?.message ?? err})`,
            );
          }
          continue;
        }
        if (!this.#gaps.has(key)) await this.#kv.delete(key).catch(() => {});
        this.markersDelivered++;
        await this.#told(g);
        this.#ctx.log.warn(
          g.from
            ? `${g.member} (${g.lifecycleUid}) missed ${g.count} DMs of ${g.from} the storage warden trimmed; told it with a gap marker`
            : `${g.member} (${g.lifecycleUid}) missed ${g.count} copies from #${g.first.seq} to #${g.last.seq}; told it with a gap marker`,
        );
      }
    } finally {
      this.#flushing = false;
    }
  }

  /** Adds a delivered marker to the member's running total. Never throws. */
  async #told(g: Gap): Promise<void> {
    const key = `told.${keyToken(g.member)}.${keyToken(g.lifecycleUid)}${
      g.from ? `.dm.${keyToken(g.from)}` : ""
    }`;
    const prev = await this.#read<ToldGap>(key);
    const next: ToldGap = {
      member: g.member,
      lifecycleUid: g.lifecycleUid,
      ...(g.from ? { from: g.from } : {}),
      count: (prev?.count ?? 0) + g.count,
      markers: (prev?.markers ?? 0) + 1,
      last: g.last,
      at: Date.now(),
    };
    await this.#put(key, next).catch(() => {});
  }

  async #records<T>(prefix: string): Promise<T[]> {
    const out: T[] = [];
    for (const key of await listKeys(this.#ctx.jsm, this.#ctx.buckets.setaside, `${prefix}.>`)) {
      const e = await this.#kv.get(key).catch(() => null);
      if (!e || e.operation !== "PUT") continue;
      try {
        out.push(JSON.parse(new TextDecoder().decode(e.value)));
      } catch {
        // Left to its TTL.
      }
    }
    return out;
  }

  /**
   * Every record, for the operator: dead letters, gaps still owed (pending, and any in flight
   * now), what members were told they missed, and what the storage warden trimmed.
   */
  async list(): Promise<
    { deadLetters: DeadLetter[]; gaps: Gap[]; told: ToldGap[]; trimmed: TrimRecord[] }
  > {
    const deadLetters = (await this.#records<DeadLetter>("dead")).sort((a, b) => a.at - b.at);
    const told = (await this.#records<ToldGap>("told")).sort((a, b) => a.at - b.at);
    const trimmed = (await this.#records<TrimRecord>("trim")).sort((a, b) => a.at - b.at);
    const id = (g: Gap) => `${g.member}.${g.lifecycleUid}.${g.from ?? ""}`;
    const pending = new Map((await this.#records<Gap>("gap")).map((g) => [id(g), g]));
    for (const g of this.#gaps.values()) pending.set(id(g), g);
    return { deadLetters, gaps: [...pending.values()], told, trimmed };
  }
}

/** True for a stored set-aside record: a JSON object this daemon wrote (versioned or dated). */
function isRecord(_key: string, value: Uint8Array): boolean {
  try {
    const v = JSON.parse(new TextDecoder().decode(value));
    return typeof v === "object" && v !== null && (v.version === 1 || typeof v.at === "number");
  } catch {
    return false;
  }
}

function gapHeaders(): MsgHdrs {
  const h = headers();
  h.set(GAP_MARKER_HEADER, "1");
  return h;
}
