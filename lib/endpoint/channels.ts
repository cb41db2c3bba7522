/**
 * Channels: the joined set, the broker-confirmed live subscriptions, join backfill, reconnect
 * gap fill, history reads, the channel registry view, and the durable-backstop request.
 *
 * Join order (reference A §5.3): arm the watermark (CHAT's last sequence) before subscribing,
 * subscribe and confirm with a flush (a refusal is reported before the PONG), then backfill the
 * retained history up to the watermark, marked historical. Ids dedupe every copy.
 *
 * @module
 */

import type {
  JetStreamClient,
  JetStreamManager,
  MsgHdrs,
  NatsConnection,
  Subscription,
} from "nats";
import type { WatchFactory } from "./presence.ts";
import {
  assertValidChannel,
  type ChannelRegistry,
  chathistDurableName,
  chatReadFilter,
  ctlSubject,
  decodeMessage,
  effectiveDeliveryClass,
  effectiveReplay,
  hasWildcard,
  type Principal,
  streamNames,
  subjectMatches,
  validateChannelConfig,
} from "../wire/mod.ts";
import { CotalError } from "../errors.ts";
import type { ChannelConfig, CotalMessage } from "../wire/mod.ts";
import { errorText } from "./credentials.ts";
import { type RawHistoryItem, readHistory } from "./history.ts";
import type { JoinResult } from "./types.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** How many retained messages a join backfills at most (the newest ones). */
export const BACKFILL_LIMIT = 200;
/** Reads a reconnect gap fill tries per channel before it warns. */
const GAP_FILL_ATTEMPTS = 3;
/** A reconnect gap fill starts this long before the drop (clock and in-flight slack). */
export const GAP_SLACK_MS = 2_000;
/** The first wait before a durable join the daemon did not answer is asked again. */
export const BACKSTOP_RETRY_MS = 1_000;
/** The longest wait between two asks (a daemon that does not answer is asked this often). */
export const BACKSTOP_RETRY_CAP_MS = 15_000;
/** How long a `durableJoin` waits for the delivery daemon. */
export const DURABLE_JOIN_TIMEOUT_MS = 30_000;
const DEFAULTS_KEY = "=defaults";
const WINDOW_RE = /^(\d+)(s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { s: 1e3, m: 6e4, h: 36e5, d: 864e5 };

/** What the channel set needs from its endpoint. */
export interface ChannelHost {
  space: string;
  principal(): Principal;
  lifecycleUid?: string;
  conn(): { nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager };
  surface(
    subject: string,
    data: Uint8Array,
    source: "live" | "backfill" | "gap",
    seq?: number,
    headers?: MsgHdrs,
  ): void;
  error(err: CotalError): void;
  warn(err: CotalError): void;
}

interface Joined {
  filter: string;
  sub?: Subscription;
  durable: boolean;
  /** A durable channel whose backstop the daemon did not answer for: asked again until it does. */
  backstopOwed?: boolean;
  /** The membership generation the daemon answered the join with (a leave must name it). */
  generation?: number;
}

/** The joined channels of one endpoint; survives connection rebuilds. */
export class ChannelSet {
  readonly #host: ChannelHost;
  readonly #joined = new Map<string, Joined>();
  readonly #registry: ChannelRegistry = { defaults: {}, channels: {} };
  #historyChain: Promise<unknown> = Promise.resolve();
  #watchStop?: () => void;
  #watchGen = 0;
  /** The next ask for each owed backstop, while bound. */
  readonly #backstopTimers = new Map<string, ReturnType<typeof setTimeout>>();

  constructor(host: ChannelHost) {
    this.#host = host;
  }

  /** The joined channels, in join order. */
  joined(): string[] {
    return [...this.#joined.keys()];
  }

  /** Where a multicast without a channel goes: the first concrete boot or joined channel. */
  defaultChannel(boot: readonly string[]): string {
    const ch = [...boot, ...this.#joined.keys()].find((c) => !hasWildcard(c));
    if (!ch) {
      throw new CotalError(
        "no_default_channel",
        "multicast() was called without a channel and no concrete channel is joined; pass opts.channel.",
      );
    }
    return ch;
  }

  /** A channel's registry row merged with the space defaults. */
  effective(channel: string): { replay: boolean; windowMs?: number; deliveryClass: string } {
    const reg = this.#registry;
    const window = reg.channels[channel]?.replayWindow ?? reg.defaults.replayWindow;
    const m = typeof window === "string" ? WINDOW_RE.exec(window) : null;
    return {
      replay: effectiveReplay(reg, channel),
      windowMs: m ? Number(m[1]) * UNIT_MS[m[2]] : undefined,
      deliveryClass: effectiveDeliveryClass(reg, channel),
    };
  }

  /**
   * Watch the channel registry (a consumer-less bucket watch); resolves once the initial rows
   * are in, the bucket is absent (`watch` undefined), or 2 s have passed.
   */
  async watchRegistry(watch: WatchFactory | undefined): Promise<void> {
    this.#watchStop?.();
    this.#watchStop = undefined;
    const gen = ++this.#watchGen;
    if (!watch) return;
    const started = watch((e) => {
      const isDefaults = e.key === DEFAULTS_KEY;
      const row = e.operation === "PUT" ? parseConfig(e.value, isDefaults) : undefined;
      // A put that is no row (a broker answer a member aimed at the key) changes nothing:
      // the last good row stands. Only a delete removes one.
      if (e.operation === "PUT" && !row) return;
      if (isDefaults) this.#registry.defaults = row ?? {};
      else if (row) this.#registry.channels[e.key] = row;
      else delete this.#registry.channels[e.key];
    }).then((w) => {
      // A watch that came up after an unbind or a newer bind is stopped at once.
      if (gen !== this.#watchGen) w.stop();
      else this.#watchStop = () => w.stop();
    }, () => {});
    // A registry that never finishes its replay must not hold the connect hostage.
    let t: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([started, new Promise((r) => (t = setTimeout(r, 2_000)))]);
    clearTimeout(t);
  }

  /** Stop the registry watch and drop the subscriptions (the joined set is kept). */
  unbind(): void {
    this.#watchGen++;
    this.#watchStop?.();
    this.#watchStop = undefined;
    for (const j of this.#joined.values()) j.sub = undefined;
    for (const t of this.#backstopTimers.values()) clearTimeout(t);
    this.#backstopTimers.clear();
  }

  /** Join: watermark, confirmed subscribe, backfill, backstop request. */
  async join(channel: string): Promise<JoinResult> {
    assertValidChannel(channel);
    const have = this.#joined.get(channel);
    if (have?.sub) return { joined: true, backfilled: 0, durable: have.durable };
    const { jsm } = this.#host.conn();
    const filter = chatReadFilter(this.#host.space, channel);
    const watermark = await jsm.streams.info(streamName(this.#host.space)).then(
      (i) => i.state.last_seq,
      () => 0,
    );
    const sub = await this.#subscribe(channel, filter);
    const entry: Joined = { filter, sub, durable: false };
    this.#joined.set(channel, entry);
    const eff = this.effective(channel);
    let backfilled = 0;
    if (eff.replay && watermark > 0) {
      const items = await this.#read(channel, {
        upToSeq: watermark,
        limit: BACKFILL_LIMIT,
        startTime: eff.windowMs ? new Date(Date.now() - eff.windowMs) : undefined,
      }).catch((err) => {
        this.#host.warn(
          new CotalError(
            "backfill_failed",
            `Joined ${channel} live, but its history backfill failed (${errorText(err)}).`,
          ),
        );
        return [] as RawHistoryItem[];
      });
      for (const it of items) this.#surfaceRead(it, "backfill");
      backfilled = items.length;
    }
    if (eff.deliveryClass !== "durable" || hasWildcard(channel)) {
      return { joined: true, backfilled, durable: false };
    }
    const { generation, retry, ...backstop } = await this.#durableJoin(channel);
    entry.durable = backstop.durable;
    entry.generation = generation;
    if (retry) this.#owe(channel, entry);
    return { joined: true, backfilled, ...backstop };
  }

  /** Re-open every joined channel's subscription after a rebuild (no backfill). */
  async resubscribe(): Promise<void> {
    for (const [channel, j] of this.#joined) {
      try {
        j.sub = await this.#subscribe(channel, j.filter);
        if (j.backstopOwed) this.#askBackstop(channel, 0);
      } catch (err) {
        this.#joined.delete(channel);
        this.#host.error(err as CotalError);
      }
    }
  }

  /**
   * A durable channel whose join the delivery daemon did not answer (down, restarting, hung):
   * its backstop is asked for again, from 1 s doubling to 15 s (an unanswered ask costs the
   * broker a no-responders reply), and at each reconnect,
   * until the daemon answers. Fault pass 11: a member started while the daemon was down was
   * never given one, and the posts sent while it was away later were lost to it.
   */
  #owe(channel: string, entry: Joined): void {
    // Not a warning: the join's result already says so (durable: false, with its reason), and
    // a space run without a daemon would hear it at every join.
    entry.backstopOwed = true;
    this.#askBackstop(channel, BACKSTOP_RETRY_MS);
  }

  #askBackstop(channel: string, delayMs: number): void {
    if (this.#backstopTimers.has(channel)) return;
    const t = setTimeout(async () => {
      this.#backstopTimers.delete(channel);
      const j = this.#joined.get(channel);
      // Left, or unbound (a rebuild asks again once it resubscribes).
      if (!j?.backstopOwed || !j.sub) return;
      const r = await this.#durableJoin(channel).catch(() => ({
        durable: false,
        retry: true,
        generation: undefined,
      }));
      if (this.#joined.get(channel) !== j || !j.sub) return;
      if (r.durable) {
        j.durable = true;
        j.generation = r.generation;
        j.backstopOwed = false;
      } else if (r.retry) {
        this.#askBackstop(
          channel,
          Math.min(Math.max(delayMs, BACKSTOP_RETRY_MS) * 2, BACKSTOP_RETRY_CAP_MS),
        );
      } else j.backstopOwed = false;
    }, delayMs);
    this.#backstopTimers.set(channel, t);
  }

  /** Leave: unsubscribe (and, when a backstop was established, ask the daemon to end it). */
  async leave(channel: string): Promise<{ left: boolean }> {
    const j = this.#joined.get(channel);
    if (!j) return { left: false };
    if (j.durable) {
      // Fail closed: if the daemon cannot confirm the leave, the subscription stays.
      const reply = await this.#control("durableLeave", {
        channel,
        generation: j.generation,
        lifecycleUid: this.#host.lifecycleUid,
      });
      if (!reply.ok) {
        throw new CotalError(
          "durable_leave_failed",
          `The delivery daemon did not confirm leaving ${channel} (${reply.reason}); the channel stays joined, retry the leave.`,
        );
      }
    }
    j.sub?.unsubscribe();
    this.#joined.delete(channel);
    return { left: true };
  }

  /** Surfaces a message read from the stream; one whose headers cannot be read is left out. */
  #surfaceRead(it: RawHistoryItem, source: "backfill" | "gap"): void {
    const h = headersOf(it);
    if (h !== UNDECODABLE) this.#host.surface(it.subject, it.data, source, it.seq, h);
  }

  /** Messages missed while the transport was down: read from just before the drop. */
  async gapFill(since: number): Promise<void> {
    for (const channel of this.#joined.keys()) {
      // A loaded broker can fail one read; a failed fill would lose the gap for good.
      for (let attempt = 1;; attempt++) {
        try {
          const items = await this.#read(channel, { startTime: new Date(since - GAP_SLACK_MS) });
          for (const it of items) this.#surfaceRead(it, "gap");
          break;
        } catch (err) {
          if (attempt < GAP_FILL_ATTEMPTS && this.#joined.has(channel)) {
            await new Promise((r) => setTimeout(r, 1_000 * attempt));
            continue;
          }
          this.#host.warn(
            new CotalError(
              "gap_fill_failed",
              `Could not recover ${channel} messages sent while disconnected (${errorText(err)}).`,
            ),
          );
          break;
        }
      }
    }
  }

  /**
   * The newest `limit` retained messages of a channel, oldest first. History gets the same
   * receive rules as live copies: an entry that would be dropped live is left out.
   */
  async history(channel: string, limit: number, signal?: AbortSignal): Promise<CotalMessage[]> {
    assertValidChannel(channel);
    const items = await this.#read(channel, { limit, signal });
    const out: CotalMessage[] = [];
    for (const it of items) {
      const headers = headersOf(it);
      if (headers === UNDECODABLE) continue;
      const d = decodeMessage(it.subject, it.data, { space: this.#host.space, headers });
      if (d.ok) out.push(d.message);
    }
    return out;
  }

  #read(
    channel: string,
    opts: { limit?: number; upToSeq?: number; startTime?: Date; signal?: AbortSignal },
  ): Promise<RawHistoryItem[]> {
    const uid = this.#host.lifecycleUid;
    if (uid === undefined) {
      return Promise.reject(
        new CotalError(
          "missing_lifecycle_uid",
          "History reads use the lifecycle's chathist_ consumer; pass lifecycleUid to the endpoint.",
        ),
      );
    }
    // One chathist_ name per lifecycle: reads on this endpoint run one at a time.
    const run = this.#historyChain.then(() => {
      const { js, jsm } = this.#host.conn();
      return readHistory(jsm, js, {
        stream: streamName(this.#host.space),
        name: chathistDurableName(this.#host.principal(), uid),
        filter: chatReadFilter(this.#host.space, channel),
        ...opts,
      });
    });
    this.#historyChain = run.catch(() => {});
    return run;
  }

  async #subscribe(channel: string, filter: string): Promise<Subscription> {
    const { nc } = this.#host.conn();
    let refused: Error | undefined;
    const sub = nc.subscribe(filter, {
      callback: (err, m) => {
        if (err) {
          refused = err;
          if (this.#joined.get(channel)?.sub === sub) {
            this.#joined.delete(channel);
            this.#host.error(refusal(channel, err));
          }
          return;
        }
        // A JetStream delivery (a consumer someone aimed at this subject: the broker does not
        // check deliver subjects) or anything outside the filter is not a live post.
        if (m.reply?.startsWith("$JS.ACK.") || !subjectMatches(filter, m.subject)) return;
        // Headers no one can read: not a post (a throw here would end the read loop).
        const h = headersOf(m);
        if (h === UNDECODABLE) return;
        this.#host.surface(m.subject, m.data, "live", undefined, h);
      },
    });
    // The broker answers a refused SUB with -ERR before the PONG of this flush.
    await nc.flush();
    if (refused) throw refusal(channel, refused);
    return sub;
  }

  /**
   * `retry` when the daemon did not answer or was busy (a refusal it answered is not asked
   * again).
   */
  async #durableJoin(
    channel: string,
  ): Promise<{ durable: boolean; reason?: string; generation?: number; retry?: boolean }> {
    const reply = await this.#control("durableJoin", { channel });
    if (!reply.ok) {
      return {
        durable: false,
        reason: `durable backstop unavailable (${reply.reason})`,
        retry: reply.unanswered,
      };
    }
    const data = reply.data as { durable?: boolean; reason?: string; generation?: number };
    return data?.durable === true
      ? { durable: true, generation: data.generation }
      : { durable: false, reason: data?.reason ?? "the delivery daemon declined the backstop" };
  }

  /**
   * Whether the space's delivery daemon says a DM to `to`, or a task to `role`, would be kept;
   * undefined when it does not answer (then nobody can say).
   */
  async recipientKnown(target: { to: string } | { role: string }): Promise<boolean | undefined> {
    const reply = await this.#control("recipientKnown", target);
    if (!reply.ok) return undefined;
    const known = (reply.data as { known?: unknown } | undefined)?.known;
    return typeof known === "boolean" ? known : undefined;
  }

  async #control(
    op: string,
    args: Record<string, unknown>,
  ): Promise<{ ok: true; data?: unknown } | { ok: false; reason: string; unanswered?: boolean }> {
    const { nc } = this.#host.conn();
    const p = this.#host.principal();
    const subject = ctlSubject(this.#host.space, "delivery", p);
    const body = JSON.stringify({ op, args, from: `${p.owner}.${p.actor}` });
    try {
      const m = await nc.request(subject, body, {
        timeout: DURABLE_JOIN_TIMEOUT_MS,
        noMux: true,
        reply: `${subject}.reply.${crypto.randomUUID().replaceAll("-", "")}`,
      });
      const r = JSON.parse(new TextDecoder().decode(m.data));
      if (r?.ok === true) return { ok: true, data: r.data };
      // A busy daemon (its per-member rates and work in progress) is asked again, like a
      // silent one.
      return {
        ok: false,
        reason: String(r?.error ?? "refused"),
        unanswered: r?.code === "delivery_busy",
      };
    } catch (err) {
      const code = (err as { code?: string }).code;
      return {
        ok: false,
        reason: code === "503" ? "no delivery daemon answered" : errorText(err),
        unanswered: true,
      };
    }
  }
}

function streamName(space: string): string {
  return streamNames(space).chat;
}

function refusal(channel: string, err: Error): CotalError {
  return new CotalError(
    "channel_refused",
    `The broker refused the subscription to ${channel} (${
      errorText(err)
    }): it is not within this agent's read grant; the operator grants it with 'cotal spawn ` +
      `--allow-subscribe ${channel}' (allowSubscribe when provisioning), then a new cred.`,
    { cause: err },
  );
}

// A row the registry's own writer would refuse is ignored rather than half-applied.
function parseConfig(data: Uint8Array, defaults: boolean): ChannelConfig | undefined {
  try {
    return validateChannelConfig(JSON.parse(new TextDecoder().decode(data)), { defaults });
  } catch {
    return undefined;
  }
}
