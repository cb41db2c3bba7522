/**
 * Watching a KV bucket without a consumer: the rows as they stand (the stream's message get,
 * walking the bucket's stream by `next_by_subj`), then every write as it happens (a core
 * subscription to `$KV.<bucket>.>`, opened first so nothing falls between the two). Never
 * Direct Get: see `js.msgGet` in lib/trust/grant_names.ts.
 *
 * npm:nats's `kv.watch()` creates a push consumer, and a credential allowed to create one can
 * give it any deliver subject (the broker does not check it): an agent could make the broker
 * deliver a stream into another client's subscription, and create consumers without bound. With
 * this watch an agent needs no consumer-create grant on any bucket at all.
 *
 * @module
 */
import { type MsgHdrs, MsgHdrsImpl, type NatsConnection, type Subscription } from "nats";
import { isBrokerAnswer, kvStreamName } from "../wire/mod.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";

/** One row as the watch reports it. */
export interface WatchedEntry {
  readonly key: string;
  readonly value: Uint8Array;
  readonly operation: "PUT" | "DEL" | "PURGE";
  /** When the broker stored it (snapshot rows), or when it arrived (live rows). */
  readonly created: Date;
}

/** A running watch. */
export interface BucketWatch {
  stop(): void;
}

/** How long one message get of the snapshot may take. */
export const SNAPSHOT_GET_TIMEOUT_MS = 5_000;
/** The most rows one snapshot walks (a bucket keeps one row per key). */
export const MAX_SNAPSHOT_ROWS = 100_000;

function operationOf(h: MsgHdrs | undefined): WatchedEntry["operation"] {
  const op = h?.get("KV-Operation");
  return op === "DEL" || op === "PURGE" ? op : "PUT";
}

/**
 * Watches `bucket`: `onEntry(entry, false)` for each row as it stands, then `onInitialized()`,
 * then `onEntry(entry, true)` for every later write. Resolves once the snapshot is applied.
 */
export async function watchBucket(
  nc: NatsConnection,
  bucket: string,
  onEntry: (e: WatchedEntry, live: boolean) => void,
  onInitialized?: () => void,
): Promise<BucketWatch> {
  const prefix = `$KV.${bucket}.`;
  let initialized = false;
  const early: WatchedEntry[] = [];
  const sub: Subscription = nc.subscribe(`${prefix}>`, {
    callback: (err, m) => {
      if (err || !m.subject.startsWith(prefix)) return;
      // A JetStream delivery (one some consumer was pointed here) is not a write, nor is any
      // other broker answer a member aimed at the bucket's subjects.
      const h = headersOf(m);
      if (m.reply?.startsWith("$JS.ACK.") || h === UNDECODABLE || isBrokerAnswer(h)) return;
      const e: WatchedEntry = {
        key: m.subject.slice(prefix.length),
        value: m.data,
        operation: operationOf(h),
        created: new Date(),
      };
      if (initialized) onEntry(e, true);
      else early.push(e);
    },
  });
  try {
    await nc.flush();
    const api = `$JS.API.STREAM.MSG.GET.${kvStreamName(bucket)}`;
    let seq = 1;
    for (let n = 0; n < MAX_SNAPSHOT_ROWS; n++) {
      const m = await nc.request(
        api,
        new TextEncoder().encode(JSON.stringify({ seq, next_by_subj: `${prefix}>` })),
        { timeout: SNAPSHOT_GET_TIMEOUT_MS },
      );
      const got = parseStoredMessage(m.data);
      // The end of the stream answers 404 (no message); any other error is a failure.
      if (got === "end") break;
      if (typeof got === "string" || !got.subject.startsWith(prefix) || got.seq < seq) {
        throw new Error(
          `a message get of ${bucket} answered ${typeof got === "string" ? got : "out of order"}`,
        );
      }
      // A row that is itself a broker answer someone aimed at the bucket is not a row.
      // So is a row whose header block cannot be read (any member may write one on its key).
      const gh = got.headers;
      if (gh !== UNDECODABLE && !isBrokerAnswer(gh)) {
        onEntry({
          key: got.subject.slice(prefix.length),
          value: got.data,
          operation: operationOf(gh),
          created: got.time,
        }, false);
      }
      seq = got.seq + 1;
    }
  } catch (err) {
    sub.unsubscribe();
    throw err;
  }
  initialized = true;
  onInitialized?.();
  // Writes that raced the snapshot: applying a row twice changes nothing.
  for (const e of early.splice(0)) onEntry(e, true);
  return { stop: () => sub.unsubscribe() };
}

interface StoredMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  headers?: MsgHdrs | typeof UNDECODABLE;
  time: Date;
}

/** A stored row's header block, or `UNDECODABLE` (nats.js throws on bytes it does not accept). */
function decodeHeaders(bytes: Uint8Array): MsgHdrs | typeof UNDECODABLE {
  try {
    return MsgHdrsImpl.decode(bytes);
  } catch {
    return UNDECODABLE;
  }
}

function fromBase64(text: unknown): Uint8Array {
  if (typeof text !== "string" || text === "") return new Uint8Array();
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

/** A `STREAM.MSG.GET` answer: the message, "end" for 404, or a description of the error. */
function parseStoredMessage(data: Uint8Array): StoredMessage | "end" | string {
  let r: {
    error?: { code?: number; description?: string };
    message?: { subject?: unknown; seq?: unknown; data?: unknown; hdrs?: unknown; time?: unknown };
  };
  try {
    r = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return "something that is not JSON";
  }
  if (r.error) return r.error.code === 404 ? "end" : `${r.error.code} ${r.error.description}`;
  const sm = r.message;
  if (!sm || typeof sm.subject !== "string" || !Number.isSafeInteger(sm.seq)) {
    return "without a message";
  }
  const hdrs = fromBase64(sm.hdrs);
  const stamp = typeof sm.time === "string" ? Date.parse(sm.time) : NaN;
  return {
    subject: sm.subject,
    seq: sm.seq as number,
    data: fromBase64(sm.data),
    ...(hdrs.length ? { headers: decodeHeaders(hdrs) } : {}),
    time: Number.isNaN(stamp) ? new Date() : new Date(stamp),
  };
}
