/**
 * The delivery daemon's first steps after its cred: the broker connection (waited for however
 * long the broker is away) and the context every part shares, with its registry mirrors
 * (members, channels, ACL) running.
 *
 * @module
 */
import type { KV, NatsConnection } from "nats";
import { connectWhenUp } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import type { AclRecord } from "../wire/mod.ts";
import {
  bucketNames,
  type ChannelConfig,
  streamNames,
  strictChannelRow,
  subjectRoot,
} from "../wire/mod.ts";
import {
  type ChannelMembers,
  type DeliveryContext,
  type DeliveryLogger,
  Fence,
  newCounters,
} from "./context.ts";
import type { RenewingCred } from "./cred_renewal.ts";
import { KvMirror } from "./kv_mirror.ts";
import { type MembershipRecord, parseMemberKey, parseMemberRecord } from "./members.ts";
import { PublishGate } from "./publish_gate.ts";

/** Connects with `cred`, waiting for a broker that is not up yet. */
export async function connectDelivery(
  servers: string[],
  cred: RenewingCred,
  connId: string,
  log: DeliveryLogger,
): Promise<NatsConnection> {
  try {
    return await connectWhenUp({
      servers,
      authenticator: cred.authenticator(),
      inboxPrefix: `_INBOX_${connId}`,
      name: "cotal-delivery",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 2500,
      maxPingOut: 2,
      // Async stack traces cost an Error per request: far too much on the copy path.
      noAsyncTraces: true,
    }, { waiting: (why) => log.warn(`the broker is not up (${why}); waiting for it`) });
  } catch (err) {
    throw new CotalError(
      "broker_unreachable",
      `Could not connect to ${servers.join(",")} (${(err as Error)?.message ?? err}); check the ` +
        `delivery cred belongs to this broker.`,
    );
  }
}

function decodeJson<T>(_key: string, value: Uint8Array): T | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(value));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v as T : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The shared context of `space`'s daemon on `nc`, its mirrors started. `holdsLease` says whether
 * a member row overwritten by something that is no row may be put back (only the lease holder
 * writes rows). On failure the mirrors it started are stopped.
 */
export async function openDeliveryContext(opts: {
  nc: NatsConnection;
  space: string;
  holder: string;
  connId: string;
  log: DeliveryLogger;
  holdsLease: () => boolean;
}): Promise<DeliveryContext> {
  const { nc, space, log } = opts;
  const buckets = bucketNames(space);
  const byChannel = new Map<string, ChannelMembers>();
  let ctx: DeliveryContext | undefined;
  const mirrors: { stop(): void }[] = [];
  try {
    // A row overwritten by something no writer wrote (a broker answer a member aimed at the
    // key) is put back while this daemon holds the lease: compare-and-set on the bad revision,
    // the last good bytes, so a restart does not read the junk as the row.
    const putBack = (bucket: string, what: string) => {
      let kv: Promise<KV> | undefined;
      return (key: string, raw: Uint8Array, revision: number) => {
        if (!opts.holdsLease()) return;
        kv ??= nc.jetstream().views.kv(bucket, { bindOnly: true });
        kv.then((b) => b.update(key, raw, revision)).then(
          () =>
            log.warn(`${what} ${JSON.stringify(key)} was overwritten by no writer; put it back`),
          () => {},
        );
      };
    };
    const members = await KvMirror.start<MembershipRecord>(nc, {
      bucket: buckets.members,
      decode: (_k, v) => parseMemberRecord(v),
      onUndecodable: putBack(buckets.members, "member row"),
      onChange: (key, rec) => {
        const k = parseMemberKey(key);
        if (!k) return;
        const set = byChannel.get(k.channel) ?? new Map();
        if (rec) set.set(key, rec);
        else set.delete(key);
        if (set.size > 0) byChannel.set(k.channel, set);
        else byChannel.delete(k.channel);
      },
    });
    mirrors.push(members);
    const [channels, acl] = await Promise.all([
      KvMirror.start<ChannelConfig>(nc, {
        bucket: buckets.channels,
        decode: strictChannelRow,
        onUndecodable: putBack(buckets.channels, "channel row"),
      }),
      KvMirror.start<AclRecord>(nc, {
        bucket: buckets.acl,
        decode: (_k, v) => {
          const raw = decodeJson<Record<string, unknown>>(_k, v);
          if (!raw || !Array.isArray(raw.allowSubscribe)) return undefined;
          return {
            allowSubscribe: raw.allowSubscribe as string[],
            issuedAllowSubscribe: Array.isArray(raw.issuedAllowSubscribe)
              ? raw.issuedAllowSubscribe as string[]
              : raw.allowSubscribe as string[],
            revision: typeof raw.revision === "number" ? raw.revision : 0,
            updatedAt: typeof raw.updatedAt === "number" ? raw.updatedAt : 0,
          };
        },
        onUndecodable: putBack(buckets.acl, "ACL row"),
      }),
    ]);
    mirrors.push(channels, acl);
    ctx = {
      space,
      root: subjectRoot(space),
      streams: streamNames(space),
      buckets,
      nc,
      js: nc.jetstream(),
      jsm: await nc.jetstreamManager(),
      gate: new PublishGate(nc, `_INBOX_${opts.connId}`),
      self: opts.holder,
      fence: new Fence(),
      log,
      channels,
      members,
      acl,
      membersKv: await nc.jetstream().views.kv(buckets.members, { bindOnly: true }),
      byChannel,
      counters: newCounters(),
    };
    return ctx;
  } catch (err) {
    for (const m of mirrors) m.stop();
    throw err;
  }
}
