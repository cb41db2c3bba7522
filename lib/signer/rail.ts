/**
 * The signer rail's stream: requests are published on `<root>.sign.req.<owner>.<actor>.<nonce>`
 * as before, but the broker keeps them in a small stream the signer pulls from, instead of
 * pushing them at a subscription.
 *
 * Why: a core subscription takes whatever its publishers send as fast as they send it, and the
 * broker cuts a subscriber that falls 64 MiB behind as a slow consumer. Four connections of a
 * supervisor's cred sending 1 MB messages on its own rail cut the signer 5 to 7 times in 3,000
 * messages (tests/signer/signer_flood_test.ts), and a member may aim JetStream answers at the same
 * subjects. Pulled, the signer holds at most {@linkcode SIGN_PULL_WINDOW} requests at once; the
 * stream refuses a message over {@linkcode SIGN_RAIL_LIMITS}`.maxMsgBytes` before anyone reads it,
 * and keeps at most `maxBytes` (the oldest go first).
 *
 * @module
 */
import {
  AckPolicy,
  type ConsumerConfig,
  type ConsumerMessages,
  DeliverPolicy,
  DiscardPolicy,
  Events,
  type JetStreamManager,
  type JsMsg,
  nanos,
  type NatsConnection,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "nats";
import { signRail, spaceNames } from "../trust/mod.ts";

/** The largest request body taken (an agent's grant lists are the long part). */
export const MAX_SIGN_REQUEST_BYTES = 64 * 1024;

/** The durable the signer reads the rail with. */
export const SIGN_RAIL_DURABLE = "signer";

/** Requests the signer holds at once (pulled, not yet answered). */
export const SIGN_PULL_WINDOW = 256;

/**
 * The rail stream's frozen caps. A request is a proof (the caller's JWT and two signatures, about
 * 2 KiB) and a body of at most {@linkcode MAX_SIGN_REQUEST_BYTES}; a caller waits 10 s for its
 * answer, so nothing older than 30 s is worth keeping.
 */
export const SIGN_RAIL_LIMITS = Object.freeze({
  maxMsgBytes: MAX_SIGN_REQUEST_BYTES + 8 * 1024,
  maxBytes: 16 * 1024 * 1024,
  maxMsgs: 4_096,
  maxAgeMs: 30_000,
});

/** The rail stream's name for `space`. */
export function signRailStream(space: string): string {
  return spaceNames(space).signStream;
}

/** The rail stream's config for `space`. */
export function signRailStreamConfig(
  space: string,
  token: string,
): Partial<StreamConfig> & { name: string } {
  const root = spaceNames(space).root;
  return {
    name: signRailStream(space),
    // Only the subjects of the rail's token: a broker answer a member aims at a subject it can
    // name is stored nowhere (lib/trust/sign_rail_token.ts).
    subjects: [signRail.request(root, token, "*", "*", "*")],
    retention: RetentionPolicy.Limits,
    // On disk, so the stream outlives a broker restart: a memory stream was gone after one, and
    // a provisioner cred (which a supervisor may ask for) could take its subjects into another
    // stream before the signer made it again (red team 45). Its caps keep the writes small.
    storage: StorageType.File,
    num_replicas: 1,
    max_msg_size: SIGN_RAIL_LIMITS.maxMsgBytes,
    max_bytes: SIGN_RAIL_LIMITS.maxBytes,
    max_msgs: SIGN_RAIL_LIMITS.maxMsgs,
    max_age: nanos(SIGN_RAIL_LIMITS.maxAgeMs),
    discard: DiscardPolicy.Old,
    duplicate_window: nanos(SIGN_RAIL_LIMITS.maxAgeMs),
    allow_direct: false,
    allow_rollup_hdrs: false,
    deny_delete: true,
    deny_purge: true,
  };
}

/** The signer's durable: ack-less (a request is answered once, or re-sent by its caller). */
export function signRailConsumerConfig(): Partial<ConsumerConfig> & { durable_name: string } {
  return {
    durable_name: SIGN_RAIL_DURABLE,
    ack_policy: AckPolicy.None,
    // A durable is new with its stream (at start, or after a broker restart lost both): it
    // reads what arrived between the two creates too. Nothing is older than 30 s, and a request
    // read twice is refused as a replay.
    deliver_policy: DeliverPolicy.All,
    max_waiting: 16,
  };
}

/**
 * Creates the rail stream and the signer's durable, or brings an existing stream's caps in line.
 * Idempotent; the signer runs it at start and whenever the broker lost the stream.
 */
export async function ensureSignRail(
  jsm: JetStreamManager,
  space: string,
  token: string,
): Promise<"made" | "kept"> {
  const cfg = signRailStreamConfig(space, token);
  let made = false;
  try {
    const have = await jsm.streams.info(cfg.name);
    const c = have.config;
    if (
      c.max_msg_size !== cfg.max_msg_size || c.max_bytes !== cfg.max_bytes ||
      c.max_msgs !== cfg.max_msgs || c.max_age !== cfg.max_age || c.discard !== cfg.discard ||
      JSON.stringify(c.subjects) !== JSON.stringify(cfg.subjects)
    ) {
      await jsm.streams.update(cfg.name, cfg);
    }
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.streams.add(cfg);
    made = true;
  }
  try {
    await jsm.consumers.info(cfg.name, SIGN_RAIL_DURABLE);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    await jsm.consumers.add(cfg.name, signRailConsumerConfig());
    made = true;
  }
  return made ? "made" : "kept";
}

function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; api_error?: { err_code?: number }; message?: string };
  return e?.api_error?.err_code === 10059 || e?.api_error?.err_code === 10014 ||
    /not found/i.test(e?.message ?? "");
}

/** A running pull of the rail. */
export interface SignRailPull {
  /** Stops pulling and waits for the requests in hand. */
  stop(): Promise<void>;
}

/** How long the pull waits before it makes the rail again after losing it. */
const RAIL_RETRY_MS = 1_000;

/**
 * Pulls `space`'s rail on `nc`, calling `handle` for each request with at most
 * {@linkcode SIGN_PULL_WINDOW} in hand; resolves once the first pull is open. The stream and the
 * durable are made again whenever the pull loses them (a broker that lost its store)
 * and after every reconnect. `handle` must not throw.
 */
export async function pullSignRail(
  nc: NatsConnection,
  space: string,
  token: string,
  handle: (m: JsMsg) => Promise<void>,
  log: (line: string) => void,
): Promise<SignRailPull> {
  const stream = signRailStream(space);
  let stopped = false;
  let current: ConsumerMessages | undefined;
  const inflight = new Set<Promise<void>>();
  // Woken when a request in hand is answered and the window has room again.
  let slot: (() => void) | undefined;
  let opened: (() => void) | undefined;
  let failedOpen: ((err: unknown) => void) | undefined;
  const firstOpen = new Promise<void>((resolve, reject) => {
    opened = resolve;
    failedOpen = reject;
  });

  let opens = 0;
  const open = async (): Promise<ConsumerMessages> => {
    const jsm = await nc.jetstreamManager({ timeout: RAIL_API_TIMEOUT_MS });
    if (await ensureSignRail(jsm, space, token) === "made" && opens > 0) {
      log(`cotal-signer made its rail's stream ${stream} again (the broker had lost it)`);
    }
    opens++;
    const consumer = await nc.jetstream({ timeout: RAIL_API_TIMEOUT_MS }).consumers.get(
      stream,
      SIGN_RAIL_DURABLE,
    );
    return await consumer.consume({ max_messages: SIGN_PULL_WINDOW });
  };

  const reconnects = (async () => {
    for await (const s of nc.status()) {
      if (s.type === Events.Reconnect) current?.stop();
    }
  })().catch(() => {});

  const run = (async () => {
    let attempts = 0;
    while (!stopped) {
      try {
        const messages = current = await open();
        attempts = 0;
        opened?.();
        (async () => {
          for await (const s of await messages.status()) {
            if (s.type === "consumer_deleted" || s.type === "consumer_not_found") messages.stop();
          }
        })().catch(() => {});
        for await (const m of messages) {
          const p: Promise<void> = handle(m).catch(() => {}).finally(() => {
            inflight.delete(p);
            slot?.();
            slot = undefined;
          });
          inflight.add(p);
          if (inflight.size >= SIGN_PULL_WINDOW) await new Promise<void>((r) => slot = r);
        }
      } catch (err) {
        attempts++;
        // The first open fails the start (a broker that refuses the rail is a setup error the
        // operator must see); later ones are retried, said once every ten tries.
        if (failedOpen && attempts >= RAIL_OPEN_ATTEMPTS) {
          failedOpen(err);
          return;
        }
        if (attempts % 10 === 1) {
          log(`cotal-signer could not open its rail (${(err as Error)?.message ?? err}); retrying`);
        }
        if (!stopped) await new Promise((r) => setTimeout(r, RAIL_RETRY_MS));
      }
    }
  })();
  // Once open, a later loss is retried for good, never a start failure.
  await firstOpen.finally(() => failedOpen = undefined);
  return {
    async stop() {
      stopped = true;
      current?.stop();
      slot?.();
      await run;
      await Promise.allSettled([...inflight]);
      void reconnects;
    },
  };
}

/** How long one JetStream API call of the rail's set-up waits. */
const RAIL_API_TIMEOUT_MS = 5_000;
/** Opens tried before a start fails. */
const RAIL_OPEN_ATTEMPTS = 5;
