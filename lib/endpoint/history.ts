/**
 * Channel history reads through the agent's pinned `chathist_<owner>-<actor>-<uid>` consumer.
 *
 * The consumer is created on the extended subject
 * `$JS.API.CONSUMER.CREATE.<CHAT>.<name>.<filter>`, whose trailing filter the broker pins to
 * the agent's read ACL; it is ack-less, memory-only, and deleted after each read. One name per
 * lifecycle means reads on one endpoint must not overlap: the caller serializes them.
 *
 * @module
 */

import { headersOf, UNDECODABLE } from "../nats/mod.ts";
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type MsgHdrs,
  nanos,
  ReplayPolicy,
} from "nats";
import { CotalError } from "../errors.ts";
import { isNotFound, wrapJs } from "../wire/mod.ts";

/** One retained message as read from the stream. */
export interface RawHistoryItem {
  seq: number;
  subject: string;
  data: Uint8Array;
  /** The stored headers: a broker answer someone aimed at the channel is dropped by them. */
  headers?: MsgHdrs;
}

/** What to read. */
export interface HistoryRead {
  stream: string;
  /** The consumer name the credential may create (`chathist_…`). */
  name: string;
  /** One `cotal.<s>.chat.*.*.<channel>` filter. */
  filter: string;
  /** Keep only the newest N (the window widens until it holds N or reaches the stream start). */
  limit?: number;
  /** Ignore anything after this stream sequence (a join's watermark). */
  upToSeq?: number;
  /** Start here instead of a sequence window (a replay window, a reconnect gap). */
  startTime?: Date;
  signal?: AbortSignal;
}

/** Messages fetched per pull; small enough to keep a read's memory flat. */
const BATCH = 256;
/** Empty pulls a read tries while its consumer still counts messages pending (2 s each). */
const MAX_EMPTY_PULLS = 5;
/** How long an abandoned history consumer lives on the broker. */
const INACTIVE_MS = 30_000;
/** The most messages one unbounded read (a gap fill) surfaces. */
export const MAX_UNBOUNDED_READ = 10_000;

/**
 * Read retained messages matching `read.filter`, oldest first. With `limit`, the newest
 * `limit` of them; with `upToSeq`, none after that sequence.
 */
export async function readHistory(
  jsm: JetStreamManager,
  js: JetStreamClient,
  read: HistoryRead,
): Promise<RawHistoryItem[]> {
  const info = await jsm.streams.info(read.stream).catch((err) => {
    if (isNotFound(err)) return undefined;
    throw wrapJs(`read the ${read.stream} stream info`, err);
  });
  if (!info) return [];
  const first = Math.max(1, info.state.first_seq);
  const upTo = Math.min(read.upToSeq ?? info.state.last_seq, info.state.last_seq);
  if (info.state.messages === 0 || upTo < first) return [];
  if (read.startTime || read.limit === undefined) {
    const items = await readFrom(jsm, js, read, { startTime: read.startTime, seq: first }, upTo);
    return read.limit === undefined ? items : items.slice(-read.limit);
  }
  // Widen a sequence window back from the upper bound until it holds `limit` matches.
  let span = Math.max(64, read.limit * 2);
  for (;;) {
    const start = Math.max(first, upTo - span + 1);
    const items = await readFrom(
      jsm,
      js,
      read,
      { seq: start },
      upTo,
      start > first ? read.limit : undefined,
    );
    if (items.length >= read.limit || start <= first) return items.slice(-read.limit);
    span *= 4;
  }
}

async function readFrom(
  jsm: JetStreamManager,
  js: JetStreamClient,
  read: HistoryRead,
  from: { seq: number; startTime?: Date },
  upTo: number,
  /** Give up early (the caller widens) when fewer than this many can match. */
  atLeast?: number,
): Promise<RawHistoryItem[]> {
  const config = {
    name: read.name,
    filter_subject: read.filter,
    ack_policy: AckPolicy.None,
    replay_policy: ReplayPolicy.Instant,
    inactive_threshold: nanos(INACTIVE_MS),
    mem_storage: true,
    num_replicas: 1,
    ...(from.startTime
      ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: from.startTime.toISOString() }
      : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from.seq }),
  };
  const ci = await createFresh(jsm, read.stream, config);
  const out: RawHistoryItem[] = [];
  try {
    // `num_pending` overcounts (it includes messages past `upTo`) but never undercounts, so a
    // window already too small is widened without reading it.
    let remaining = ci.num_pending;
    if (atLeast !== undefined && remaining < atLeast) return out;
    const consumer = await js.consumers.get(read.stream, read.name);
    let emptyPulls = 0;
    while (remaining > 0 && out.length < MAX_UNBOUNDED_READ) {
      read.signal?.throwIfAborted();
      const batch = await consumer.fetch({
        max_messages: Math.min(remaining, BATCH),
        expires: 2_000,
      });
      let got = 0;
      let past = false;
      for await (const m of batch) {
        got++;
        remaining--;
        if (m.seq > upTo) {
          past = true;
          continue;
        }
        // A row whose header block cannot be read is left out, as it would be live.
        const headers = headersOf(m);
        if (headers === UNDECODABLE) continue;
        out.push({ seq: m.seq, subject: m.subject, data: m.data, headers });
      }
      if (past) break;
      if (got === 0) {
        // Nothing within the pull's expiry: the messages aged out meanwhile, or a loaded broker
        // was slow to answer. Only the consumer's own count tells the two apart, and a slow
        // answer must not end a gap fill short of what the stream still holds.
        const pending = await consumer.info().then((i) => i.num_pending).catch(() => 0);
        if (pending === 0 || ++emptyPulls >= MAX_EMPTY_PULLS) break;
        remaining = pending;
      }
    }
    return out;
  } finally {
    await jsm.consumers.delete(read.stream, read.name).catch(() => {});
  }
}

// A consumer left by a crashed read (same name, other config) makes the create fail: delete
// it and try once more.
async function createFresh(
  jsm: JetStreamManager,
  stream: string,
  config: Parameters<JetStreamManager["consumers"]["add"]>[1],
) {
  try {
    return await jsm.consumers.add(stream, config);
  } catch (err) {
    const code = (err as { api_error?: { err_code?: number } }).api_error?.err_code;
    const exists = code === 10148 || code === 10013 || /already (exists|in use)/i.test(String(err));
    if (!exists) throw historyError(stream, err);
    await jsm.consumers.delete(stream, config.name!).catch(() => {});
    try {
      return await jsm.consumers.add(stream, config);
    } catch (err2) {
      throw historyError(stream, err2);
    }
  }
}

function historyError(stream: string, err: unknown): CotalError {
  const e = wrapJs(`open a history read on ${stream}`, err);
  if (e.code === "permission_denied") {
    return new CotalError(
      "permission_denied",
      "The broker refused the history read: the channel is not within this agent's read ACL; ask for it in allowSubscribe.",
      { cause: err },
    );
  }
  return e;
}
