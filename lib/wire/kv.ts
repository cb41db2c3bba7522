/**
 * KV access that works with Cotal's narrow credentials: buckets are bound (never created
 * here), point reads use STREAM.MSG.GET, and keys are enumerated from STREAM.INFO's subject
 * list, because the provisioner and channel-writer profiles hold no consumer-create grant on
 * the registry buckets (a key listing through nats.js would need one).
 *
 * @module
 */

import type { JetStreamManager, KV, KvEntry, NatsConnection } from "nats";
import { kvStreamName } from "./resources.ts";
import { isNotFound, jsmCall, wrapJs } from "./js_errors.ts";

/** Bind an existing bucket without creating or inspecting it. */
export function bindKv(nc: NatsConnection, bucket: string): Promise<KV> {
  // allow_direct false: direct gets need a grant the narrow profiles do not all carry.
  return nc.jetstream().views.kv(bucket, { bindOnly: true, allow_direct: false });
}

/** The live (last operation PUT) entry of `key`, or undefined when absent or deleted. */
export async function liveEntry(kv: KV, key: string, bucket: string): Promise<KvEntry | undefined> {
  const e = await jsmCall(`read ${key} from ${bucket}`, () => kv.get(key));
  return e && e.operation === "PUT" ? e : undefined;
}

/**
 * Keys present in a bucket under `filter` (a key pattern, default all), including keys whose
 * last operation is a delete; callers read each one to tell live rows from tombstones.
 */
export async function listKeys(
  jsm: JetStreamManager,
  bucket: string,
  filter = ">",
): Promise<string[]> {
  const stream = kvStreamName(bucket);
  const prefix = `$KV.${bucket}.`;
  let info;
  try {
    info = await jsm.streams.info(stream, { subjects_filter: `${prefix}${filter}` });
  } catch (err) {
    if (isNotFound(err)) return [];
    throw wrapJs(`list the keys of ${bucket}`, err);
  }
  const subjects = info.state.subjects ?? {};
  return Object.keys(subjects).filter((s) => s.startsWith(prefix)).map((s) =>
    s.slice(prefix.length)
  ).sort();
}

/** Parse a KV value as a JSON object, or undefined when it is not one. */
export function jsonObject(e: KvEntry): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(e.value));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Encode a value as JSON bytes for a KV put. */
export function jsonBytes(v: unknown): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(v));
}

/**
 * Purges every key of `bucket` under `filter` whose stored row `isRow` does not take (a broker
 * answer a member aimed at the key), reading each row with the stream's message get (its JSON
 * answer, which no status line or header block can confuse). Resolves with how many it purged.
 * For a bucket full of such rows: its owner clears them before writing again.
 */
export async function purgeJunkRows(
  nc: NatsConnection,
  bucket: string,
  filter: string,
  isRow: (key: string, value: Uint8Array) => boolean,
): Promise<number> {
  const jsm = await nc.jetstreamManager();
  const stream = kvStreamName(bucket);
  let purged = 0;
  for (const key of await listKeys(jsm, bucket, filter)) {
    const subject = `$KV.${bucket}.${key}`;
    const m = await jsm.streams.getMessage(stream, { last_by_subj: subject }).catch(() => null);
    if (m && isRow(key, m.data)) continue;
    await jsm.streams.purge(stream, { filter: subject }).then(() => purged++, () => {});
  }
  return purged;
}

/** True when a JetStream write was refused because its stream or bucket is full. */
export function isStoreFull(err: unknown): boolean {
  const code = (err as { api_error?: { err_code?: number } })?.api_error?.err_code;
  return code === 10047 || /maximum bytes exceeded|insufficient resources/i.test(String(err));
}
