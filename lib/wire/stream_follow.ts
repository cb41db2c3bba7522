/**
 * Following a stream in order, every stored message seen exactly as it was stored, with its
 * stream sequence.
 *
 * npm:nats's `kv.watch()` reads each delivery's headers as the client's own protocol: a stored
 * row that carries a status line (a pull's `404 No Messages` a member aimed at a bucket key;
 * nats-server 2.10 stores the status header with it) is taken for its consumer's own status and
 * dropped or turned into an error, and a header block it cannot parse throws inside its loop. A
 * mirror built on it then never reaches that sequence, or stops following at all.
 *
 * This follower owns its push consumer (ordered: ack none, flow control, idle heartbeats, one
 * incarnation at a time) and tells a delivery from the broker's own traffic by the reply subject
 * alone: a stored message always comes with its `$JS.ACK.` reply, a flow-control request with a
 * `$JS.FC.` one, a heartbeat with none. Headers are never read here; the caller reads them
 * through `headersOf`. A gap in the delivery sequence, a heartbeat that says a delivery was
 * missed, or heartbeats that stop (a broker restart took the consumer) make it recreate the
 * consumer from the next stream sequence, retrying until it is stopped.
 *
 * @module
 */
import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from "nats";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** One stored message, as delivered. */
export interface FollowedMessage {
  readonly subject: string;
  /** Its stream sequence. */
  readonly seq: number;
  /** Its stored headers as `headersOf` reads them (never thrown on). */
  readonly headers: MsgHdrs | undefined | typeof UNDECODABLE;
  readonly data: Uint8Array;
  /** Messages the consumer still had to deliver after this one. */
  readonly pending: number;
}

/** Options of {@linkcode followStream}. */
export interface FollowOptions {
  stream: string;
  /** The subject filter (a bucket's `$KV.<bucket>.>`). */
  filter: string;
  /**
   * Where the first consumer starts: the last message of each subject (a bucket's rows as they
   * stand; the default), or only messages stored from now on. A recreated consumer always
   * resumes after the last message seen; one that saw none starts the same way again.
   */
  from?: "last-per-subject" | "new";
  /** Called for each stored message, in stream order, never twice for one sequence. */
  onMessage: (m: FollowedMessage) => void;
  /**
   * Called when the consumer is recreated (a gap, lost heartbeats), with why. A follow `from`
   * "new" that has seen nothing yet may miss what was stored while it was being recreated.
   */
  onReset?: (why: string) => void;
}

/** A running follow. */
export interface StreamFollow {
  /** The highest stream sequence delivered so far. */
  readonly lastSeq: number;
  /**
   * True when the consumer has nothing left to deliver and everything it delivered was handed
   * on: every message stored so far that is still in the stream was seen. False when unsure
   * (a consumer being recreated, the broker unreachable).
   */
  drained(): Promise<boolean>;
  stop(): void;
}

/** The consumer's idle heartbeat. */
export const FOLLOW_HEARTBEAT_MS = 2_000;
/** Heartbeats missed before the consumer is taken for gone and recreated. */
const MISSED_HEARTBEATS = 3;
/** One consumer create or info request. */
const REQUEST_TIMEOUT_MS = 5_000;
/** Backoff between failed recreations, first and last. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;

interface Incarnation {
  readonly sub: Subscription;
  name?: string;
  /** The delivery sequence of this consumer's last message. */
  dseq: number;
}

/** The sequences a `$JS.ACK.` reply carries (both the short and the domain-hashed forms). */
function ackSequences(reply: string): { seq: number; dseq: number; pending: number } | undefined {
  const t = reply.split(".");
  // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>
  // $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>[.<token>]
  const o = t.length === 9 ? 2 : t.length === 11 || t.length === 12 ? 4 : -1;
  if (o < 0) return undefined;
  const seq = Number(t[o + 3]), dseq = Number(t[o + 4]), pending = Number(t[o + 6]);
  if (![seq, dseq, pending].every(Number.isSafeInteger)) return undefined;
  return { seq, dseq, pending };
}

const enc = new TextEncoder();
const dec = new TextDecoder();

async function api<T>(nc: NatsConnection, subject: string, body: unknown): Promise<T> {
  const m = await nc.request(subject, enc.encode(JSON.stringify(body)), {
    timeout: REQUEST_TIMEOUT_MS,
  });
  const r = JSON.parse(dec.decode(m.data)) as T & { error?: { description?: string } };
  if (r.error) throw new Error(r.error.description ?? "JetStream API error");
  return r;
}

/**
 * Follows `opts.stream` under `opts.filter`: first the last message of each subject (a bucket's
 * rows as they stand), then every later message. Resolves once the first consumer exists;
 * rejects when it cannot be created.
 */
export async function followStream(
  nc: NatsConnection,
  opts: FollowOptions,
): Promise<StreamFollow> {
  const f = new Follower(nc, opts);
  await f.open();
  f.watch();
  return f;
}

/** One follow: its consumer incarnation, the last sequence seen, the heartbeat watchdog. */
class Follower implements StreamFollow {
  #lastSeq = 0;
  #current?: Incarnation;
  #lastActivity = Date.now();
  #stopped = false;
  #recreating = false;
  #watchdog?: ReturnType<typeof setInterval>;
  readonly #nc: NatsConnection;
  readonly #opts: FollowOptions;
  readonly #inboxPrefix?: string;

  constructor(nc: NatsConnection, opts: FollowOptions) {
    this.#nc = nc;
    this.#opts = opts;
    this.#inboxPrefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options
      ?.inboxPrefix;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  /** Creates the next consumer incarnation, resuming after the last message seen. */
  async open(): Promise<void> {
    const sub = this.#nc.subscribe(createInbox(this.#inboxPrefix), {
      callback: (_err, m) => this.#onDelivery(inc, m),
    });
    const inc: Incarnation = { sub, dseq: 0 };
    // Current before the create request: the broker delivers as soon as the consumer exists,
    // before its answer arrives.
    this.#current = inc;
    const start = this.#lastSeq > 0
      ? { deliver_policy: "by_start_sequence", opt_start_seq: this.#lastSeq + 1 }
      : { deliver_policy: this.#opts.from === "new" ? "new" : "last_per_subject" };
    try {
      const info = await api<{ name: string }>(
        this.#nc,
        `$JS.API.CONSUMER.CREATE.${this.#opts.stream}`,
        {
          stream_name: this.#opts.stream,
          config: {
            ...start,
            deliver_subject: sub.getSubject(),
            filter_subject: this.#opts.filter,
            ack_policy: "none",
            replay_policy: "instant",
            flow_control: true,
            idle_heartbeat: FOLLOW_HEARTBEAT_MS * 1_000_000,
            mem_storage: true,
            num_replicas: 1,
          },
        },
      );
      inc.name = info.name;
      this.#lastActivity = Date.now();
    } catch (e) {
      sub.unsubscribe();
      if (this.#current === inc) this.#current = undefined;
      throw e;
    }
  }

  /** Starts the watchdog: heartbeats that stop mean the consumer is gone. */
  watch(): void {
    this.#watchdog = setInterval(() => {
      if (this.#nc.isClosed()) return clearInterval(this.#watchdog);
      if (Date.now() - this.#lastActivity > FOLLOW_HEARTBEAT_MS * MISSED_HEARTBEATS) {
        this.#lastActivity = Date.now();
        this.#recreate("heartbeats stopped");
      }
    }, FOLLOW_HEARTBEAT_MS);
  }

  #close(inc: Incarnation | undefined): void {
    if (!inc) return;
    inc.sub.unsubscribe();
    if (inc.name && !this.#nc.isClosed()) {
      this.#nc.request(`$JS.API.CONSUMER.DELETE.${this.#opts.stream}.${inc.name}`, undefined, {
        timeout: REQUEST_TIMEOUT_MS,
      }).catch(() => {});
    }
  }

  #recreate(why: string): void {
    if (this.#stopped || this.#recreating) return;
    this.#recreating = true;
    this.#close(this.#current);
    this.#current = undefined;
    this.#opts.onReset?.(why);
    (async () => {
      for (let wait = RETRY_FIRST_MS; !this.#stopped; wait = Math.min(wait * 2, RETRY_MAX_MS)) {
        if (this.#nc.isClosed()) break;
        try {
          await this.open();
          break;
        } catch {
          await new Promise((r) => setTimeout(r, wait));
        }
      }
      this.#recreating = false;
    })();
  }

  #onDelivery(inc: Incarnation, m: Msg): void {
    if (inc !== this.#current) return;
    this.#lastActivity = Date.now();
    const reply = m.reply ?? "";
    if (reply.startsWith("$JS.FC.")) {
      this.#nc.publish(reply);
      return;
    }
    if (reply.startsWith("$JS.ACK.")) {
      const s = ackSequences(reply);
      if (!s) return this.#recreate("a delivery with an unreadable reply subject");
      if (s.dseq !== inc.dseq + 1) return this.#recreate(`delivery ${s.dseq} after ${inc.dseq}`);
      inc.dseq = s.dseq;
      if (s.seq <= this.#lastSeq) return;
      this.#lastSeq = s.seq;
      this.#opts.onMessage({
        subject: m.subject,
        seq: s.seq,
        headers: headersOf(m),
        data: m.data,
        pending: s.pending,
      });
      return;
    }
    // A heartbeat (status 100, no body): it names the consumer's last delivery sequence, and
    // may name a flow-control reply the consumer is stalled on.
    const h = headersOf(m);
    if (h === UNDECODABLE || !h) return;
    const stalled = h.get("Nats-Consumer-Stalled");
    if (stalled) this.#nc.publish(stalled);
    const last = h.get("Nats-Last-Consumer");
    if (last && Number(last) !== inc.dseq) this.#recreate(`the heartbeat names delivery ${last}`);
  }

  async drained(): Promise<boolean> {
    const inc = this.#current;
    if (!inc?.name || this.#recreating) return false;
    try {
      const ci = await api<{ num_pending: number; delivered: { consumer_seq: number } }>(
        this.#nc,
        `$JS.API.CONSUMER.INFO.${this.#opts.stream}.${inc.name}`,
        {},
      );
      return inc === this.#current && ci.num_pending === 0 &&
        ci.delivered.consumer_seq <= inc.dseq;
    } catch {
      return false;
    }
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#watchdog);
    this.#close(this.#current);
    this.#current = undefined;
  }
}
