/**
 * JetStream stream snapshot and restore over the `$JS.API.STREAM.SNAPSHOT` / `RESTORE` API,
 * which npm:nats does not wrap. A snapshot is the server's own consistent archive of a stream
 * (messages, sequence numbers and consumers), so a restored stream is the stream, not a replay.
 */
import { createInbox, type NatsConnection } from "nats";
import { CotalError } from "../errors.ts";

/** What the server says about a snapshot it is about to send. */
export interface SnapshotHeader {
  config: Record<string, unknown>;
  state: Record<string, unknown>;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

function apiError(what: string, body: Uint8Array): CotalError | undefined {
  let v: { error?: { description?: string; code?: number } };
  try {
    v = JSON.parse(dec.decode(body));
  } catch {
    return new CotalError("snapshot_failed", `${what}: the broker's answer was not JSON.`);
  }
  if (v.error) {
    return new CotalError(
      "snapshot_failed",
      `${what}: ${v.error.description ?? "error"} (${v.error.code ?? "?"}).`,
    );
  }
  return undefined;
}

/**
 * Streams a snapshot of `stream` into `sink`, acknowledging each chunk (the server's flow
 * control), until the empty end-of-snapshot message. Returns the stream's config and state.
 */
export async function snapshotStream(
  nc: NatsConnection,
  stream: string,
  sink: (chunk: Uint8Array) => Promise<void>,
  opts: { inboxPrefix?: string; timeoutMs?: number; chunkSize?: number } = {},
): Promise<SnapshotHeader & { bytes: number }> {
  const deliver = createInbox(opts.inboxPrefix);
  const sub = nc.subscribe(deliver);
  let bytes = 0;
  const done = (async () => {
    for await (const m of sub) {
      if (m.data.length === 0) return;
      await sink(m.data);
      bytes += m.data.length;
      if (m.reply) m.respond();
    }
    throw new CotalError("snapshot_failed", `The snapshot of ${stream} ended before its end mark.`);
  })();
  try {
    const res = await nc.request(
      `$JS.API.STREAM.SNAPSHOT.${stream}`,
      enc.encode(
        JSON.stringify({ deliver_subject: deliver, chunk_size: opts.chunkSize ?? 128 * 1024 }),
      ),
      { timeout: opts.timeoutMs ?? 10_000 },
    );
    const err = apiError(`snapshot of ${stream}`, res.data);
    if (err) throw err;
    const header = JSON.parse(dec.decode(res.data)) as SnapshotHeader;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new CotalError(
              "snapshot_failed",
              `The snapshot of ${stream} stalled for ${opts.timeoutMs ?? 30_000} ms.`,
            ),
          ),
        opts.timeoutMs ?? 30_000,
      );
    });
    try {
      await Promise.race([done, timeout]);
    } finally {
      clearTimeout(timer);
    }
    return { config: header.config, state: header.state, bytes };
  } finally {
    sub.unsubscribe();
    await done.catch(() => {});
  }
}

/**
 * Restores a stream from snapshot chunks: the server must not already have a stream of that
 * name. Each chunk is a request (the server acknowledges it); an empty one ends the restore and
 * its answer is the restored stream's info.
 */
export async function restoreStream(
  nc: NatsConnection,
  header: SnapshotHeader,
  chunks: AsyncIterable<Uint8Array>,
  opts: { timeoutMs?: number } = {},
): Promise<Record<string, unknown>> {
  const name = String(header.config.name);
  const timeout = opts.timeoutMs ?? 10_000;
  const res = await nc.request(
    `$JS.API.STREAM.RESTORE.${name}`,
    enc.encode(JSON.stringify({ config: header.config, state: header.state })),
    { timeout },
  );
  const err = apiError(`restore of ${name}`, res.data);
  if (err) throw err;
  const { deliver_subject: deliver } = JSON.parse(dec.decode(res.data));
  if (typeof deliver !== "string") {
    throw new CotalError("snapshot_failed", `The broker gave no subject to restore ${name} to.`);
  }
  for await (const chunk of chunks) {
    if (chunk.length === 0) continue;
    await nc.request(deliver, chunk, { timeout });
  }
  const fin = await nc.request(deliver, new Uint8Array(), { timeout: Math.max(timeout, 30_000) });
  const finErr = apiError(`restore of ${name}`, fin.data);
  if (finErr) throw finErr;
  return JSON.parse(dec.decode(fin.data));
}
