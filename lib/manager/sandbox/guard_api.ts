/**
 * The JetStream API requests an agent may make through its relay, read as the broker will read
 * them: the body checked and re-serialized. See `protocol_guard.ts` for why.
 *
 * @module
 */

import { plainKeys, refuse } from "./guard_text.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Largest JetStream API request body: the requests an agent makes (a consumer create, a pull,
 * a stream info, a stored-message get) are a few hundred bytes; parsing is what the guard
 * spends its time on, so a megabyte of keys is refused before it is read.
 */
export const GUARD_MAX_API_BODY = 8 * 1024;
/**
 * The longest idle time an agent's consumer may live past its last use: its history reads ask
 * for 30 s (lib/endpoint/history.ts).
 */
export const GUARD_MAX_CONSUMER_IDLE_NS = 60 * 1e9;
/**
 * The shortest idle heartbeat a pull may ask for: the broker sends one to every waiting pull at
 * that interval for as long as the pull waits (red team 43 asked for 1 ns on 512 pulls an hour
 * long: 7.7 million heartbeats in 10 s, half a broker core). nats.js asks for half its expiry.
 */
export const GUARD_MIN_PULL_HEARTBEAT_NS = 1e9;
/** The longest a pull may wait for messages (nats.js asks for 30 s). */
export const GUARD_MAX_PULL_EXPIRES_NS = 300 * 1e9;

/**
 * The fields an agent's consumer may set: what a history read names (lib/endpoint/history.ts).
 * An allowlist, not the host minus what was found: each field past these was an amplifier (a
 * deliver subject, a durable name, an ack wait of 1 ms with no delivery cap: red teams 4, 20a,
 * 44), and the next unread one would be another.
 */
export const GUARD_CONSUMER_FIELDS: ReadonlySet<string> = new Set([
  "name",
  "description",
  "filter_subject",
  "filter_subjects",
  "ack_policy",
  "replay_policy",
  "inactive_threshold",
  "mem_storage",
  "num_replicas",
  "deliver_policy",
  "opt_start_seq",
  "opt_start_time",
  "headers_only",
]);
/** The fields a pull may set (what nats.js's fetch and consume send). */
export const GUARD_PULL_FIELDS: ReadonlySet<string> = new Set([
  "batch",
  "expires",
  "no_wait",
  "max_bytes",
  "idle_heartbeat",
]);

function onlyFields(r: Record<string, unknown>, allowed: ReadonlySet<string>, what: string) {
  for (const k of Object.keys(r)) {
    if (!allowed.has(k)) {
      refuse(`${what} may not set ${k} (it may set ${[...allowed].join(", ")})`);
    }
  }
}

/**
 * A JetStream API request body, checked and re-serialized (undefined for any other subject).
 * What the broker reads is then exactly what was checked: a repeated key (which nats-server's
 * decoder merges into what it already read, where `JSON.parse` keeps only the last) or any
 * other parser difference cannot carry a field past the check.
 */
export function checkApiBody(subject: string, body: Uint8Array): Uint8Array | undefined {
  if (!subject.startsWith("$JS.API.")) return undefined;
  if (body.length === 0) return undefined;
  if (body.length > GUARD_MAX_API_BODY) {
    refuse(`a JetStream API request is larger than ${GUARD_MAX_API_BODY / 1024} KiB`);
  }
  let req: unknown;
  try {
    req = JSON.parse(dec.decode(body));
  } catch {
    refuse("a JetStream API request body is not JSON");
  }
  const r = plainKeys(req, "a JetStream API request");
  const api = subject.slice("$JS.API.".length);
  if (
    api.startsWith("STREAM.INFO.") &&
    (r.subjects_filter !== undefined || r.deleted_details !== undefined)
  ) {
    refuse("a stream info request may not list subjects or deleted messages");
  }
  if (api.startsWith("CONSUMER.DURABLE.CREATE.")) {
    refuse("an agent creates no durable consumer (its durables are made for it)");
  }
  if (api.startsWith("CONSUMER.CREATE.")) {
    const cfg = r.config === undefined ? {} : plainKeys(r.config, "a consumer config");
    onlyFields(r, new Set(["stream_name", "config", "action"]), "a consumer create");
    if (cfg.deliver_subject !== undefined) {
      refuse("a consumer of an agent has no deliver subject (agents read by pulling)");
    }
    if (cfg.durable_name !== undefined) {
      refuse("a consumer of an agent is not durable (it goes when idle)");
    }
    const idle = cfg.inactive_threshold;
    if (
      typeof idle !== "number" || !Number.isSafeInteger(idle) || idle <= 0 ||
      idle > GUARD_MAX_CONSUMER_IDLE_NS
    ) {
      refuse(
        `a consumer of an agent needs an inactive_threshold of at most ${
          GUARD_MAX_CONSUMER_IDLE_NS / 1e9
        } s`,
      );
    }
    // Its consumers read history, ack-less (lib/endpoint/history.ts): one that waits for acks is
    // redelivered at its ack_wait, which the agent would name (red team 44 asked for 1 ms with
    // no delivery cap and never acked: 1.1 GB of its channel's history resent in 10 s).
    if (cfg.ack_policy !== "none") {
      refuse('a consumer of an agent has ack_policy "none" (agents read history ack-less)');
    }
    onlyFields(cfg, GUARD_CONSUMER_FIELDS, "a consumer of an agent");
  }
  if (api.startsWith("CONSUMER.MSG.NEXT.")) checkPull(r);
  return enc.encode(JSON.stringify(r));
}

function checkPull(r: Record<string, unknown>): void {
  onlyFields(r, GUARD_PULL_FIELDS, "a pull");
  const whole = (v: unknown): v is number =>
    typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
  const hb = r.idle_heartbeat;
  if (hb !== undefined && hb !== 0 && !(whole(hb) && hb >= GUARD_MIN_PULL_HEARTBEAT_NS)) {
    refuse(
      `a pull's idle_heartbeat is 0 or at least ${GUARD_MIN_PULL_HEARTBEAT_NS / 1e9} s`,
    );
  }
  const expires = r.expires;
  if (expires !== undefined && !(whole(expires) && expires <= GUARD_MAX_PULL_EXPIRES_NS)) {
    refuse(`a pull waits at most ${GUARD_MAX_PULL_EXPIRES_NS / 1e9} s (its expires)`);
  }
}
