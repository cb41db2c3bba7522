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
import { headersOf, UNDECODABLE } from "../nats/headers.ts";

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
  let lastSeq = 0;
  let current: Incarnation | undefined;
  let lastActivity = Date.now();
  let stopped = false;
  let recreating = false;
  const inboxPrefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options
    ?.inboxPrefix;

  const close = (inc: Incarnation | undefined) => {
    if (!inc) return;
    inc.sub.unsubscribe();
    if (inc.name && !nc.isClosed()) {
      nc.request(`$JS.API.CONSUMER.DELETE.${opts.stream}.${inc.name}`, undefined, {
        timeout: REQUEST_TIMEOUT_MS,
      }).catch(() => {});
    }
  };

  const recreate = (why: string) => {
    if (stopped || recreating) return;
    recreating = true;
    close(current);
    current = undefined;
    opts.onReset?.(why);
    (async () => {
      for (let wait = RETRY_FIRST_MS; !stopped; wait = Math.min(wait * 2, RETRY_MAX_MS)) {
        if (nc.isClosed()) break;
        try {
          await open();
          break;
        } catch {
          await new Promise((r) => setTimeout(r, wait));
        }
      }
      recreating = false;
    })();
  };

  const onDelivery = (inc: Incarnation, m: Msg) => {
    if (inc !== current) return;
    lastActivity = Date.now();
    const reply = m.reply ?? "";
    if (reply.startsWith("$JS.FC.")) {
      nc.publish(reply);
      return;
    }
    if (reply.startsWith("$JS.ACK.")) {
      const s = ackSequences(reply);
      if (!s) return recreate("a delivery with an unreadable reply subject");
      if (s.dseq !== inc.dseq + 1) return recreate(`delivery ${s.dseq} after ${inc.dseq}`);
      inc.dseq = s.dseq;
      if (s.seq <= lastSeq) return;
      lastSeq = s.seq;
      opts.onMessage({
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
    if (stalled) nc.publish(stalled);
    const last = h.get("Nats-Last-Consumer");
    if (last && Number(last) !== inc.dseq) recreate(`the heartbeat names delivery ${last}`);
  };

  const open = async (): Promise<Incarnation> => {
    const sub = nc.subscribe(createInbox(inboxPrefix), {
      callback: (_err, m) => onDelivery(inc, m),
    });
    const inc: Incarnation = { sub, dseq: 0 };
    // Current before the create request: the broker delivers as soon as the consumer exists,
    // before its answer arrives.
    current = inc;
    const start = lastSeq > 0
      ? { deliver_policy: "by_start_sequence", opt_start_seq: lastSeq + 1 }
      : { deliver_policy: opts.from === "new" ? "new" : "last_per_subject" };
    try {
      const info = await api<{ name: string }>(nc, `$JS.API.CONSUMER.CREATE.${opts.stream}`, {
        stream_name: opts.stream,
        config: {
          ...start,
          deliver_subject: sub.getSubject(),
          filter_subject: opts.filter,
          ack_policy: "none",
          replay_policy: "instant",
          flow_control: true,
          idle_heartbeat: FOLLOW_HEARTBEAT_MS * 1_000_000,
          mem_storage: true,
          num_replicas: 1,
        },
      });
      inc.name = info.name;
      lastActivity = Date.now();
      return inc;
    } catch (e) {
      sub.unsubscribe();
      if (current === inc) current = undefined;
      throw e;
    }
  };

  await open();
  const watchdog = setInterval(() => {
    if (nc.isClosed()) return clearInterval(watchdog);
    if (Date.now() - lastActivity > FOLLOW_HEARTBEAT_MS * MISSED_HEARTBEATS) {
      lastActivity = Date.now();
      recreate("heartbeats stopped");
    }
  }, FOLLOW_HEARTBEAT_MS);

  return {
    get lastSeq() {
      return lastSeq;
    },
    async drained() {
      const inc = current;
      if (!inc?.name || recreating) return false;
      try {
        const ci = await api<{ num_pending: number; delivered: { consumer_seq: number } }>(
          nc,
          `$JS.API.CONSUMER.INFO.${opts.stream}.${inc.name}`,
          {},
        );
        return inc === current && ci.num_pending === 0 &&
          ci.delivered.consumer_seq <= inc.dseq;
      } catch {
        return false;
      }
    },
    stop() {
      stopped = true;
      clearInterval(watchdog);
      close(current);
      current = undefined;
    },
  };
}
