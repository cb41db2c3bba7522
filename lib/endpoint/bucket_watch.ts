/**
 * Watching a KV bucket without a consumer: the rows as they stand (Direct Get, walking the
 * bucket's stream by `next_by_subj`), then every write as it happens (a core subscription to
 * `$KV.<bucket>.>`, opened first so nothing falls between the two).
 *
 * npm:nats's `kv.watch()` creates a push consumer, and a credential allowed to create one can
 * give it any deliver subject (the broker does not check it): an agent could make the broker
 * deliver a stream into another client's subscription, and create consumers without bound. With
 * this watch an agent needs no consumer-create grant on any bucket at all.
 *
 * @module
 */
import type { MsgHdrs, NatsConnection, Subscription } from "nats";
import { kvStreamName } from "../wire/resources.ts";

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

/** How long one Direct Get of the snapshot may take. */
export const DIRECT_GET_TIMEOUT_MS = 5_000;
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
      // A JetStream delivery (one some consumer was pointed here) is not a write.
      if (m.reply?.startsWith("$JS.ACK.")) return;
      const e: WatchedEntry = {
        key: m.subject.slice(prefix.length),
        value: m.data,
        operation: operationOf(m.headers),
        created: new Date(),
      };
      if (initialized) onEntry(e, true);
      else early.push(e);
    },
  });
  try {
    await nc.flush();
    const api = `$JS.API.DIRECT.GET.${kvStreamName(bucket)}`;
    let seq = 1;
    for (let n = 0; n < MAX_SNAPSHOT_ROWS; n++) {
      const m = await nc.request(
        api,
        new TextEncoder().encode(JSON.stringify({ seq, next_by_subj: `${prefix}>` })),
        { timeout: DIRECT_GET_TIMEOUT_MS },
      );
      const h = m.headers;
      // The end of the stream answers 404 with no message; any other status is a failure.
      if (h?.code === 404) break;
      const subject = h?.get("Nats-Subject") ?? "";
      const at = Number(h?.get("Nats-Sequence"));
      if (h?.hasError || !subject.startsWith(prefix) || !Number.isSafeInteger(at) || at < seq) {
        throw new Error(`a Direct Get of ${bucket} answered ${h?.code ?? "without headers"}`);
      }
      const stamp = Date.parse(h?.get("Nats-Time-Stamp") ?? "");
      onEntry({
        key: subject.slice(prefix.length),
        value: m.data,
        operation: operationOf(h),
        created: Number.isNaN(stamp) ? new Date() : new Date(stamp),
      }, false);
      seq = at + 1;
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
