/**
 * Grants of the host-side profiles: supervisor, provisioner, deprovisioner, delivery,
 * membership-rw, purger, channel-writer, teardown, backup and control-caller (reference B §2.1).
 *
 * @module
 */
import {
  js,
  JS_INFO,
  kvGet,
  kvKey,
  kvRead,
  kvStream,
  lifecycleKey,
  signRail,
} from "./grant_names.ts";
import type { GrantContext, GrantSet } from "./profile_context.ts";
import { watchBuckets } from "./profiles_members.ts";

/** The manager: its lease and renewal keys, its presence key, and the delivery-admin rail. */
export function supervisorGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n, principal: { owner: o, actor: a } } = ctx;
  const P = n.root;
  const mgr = n.buckets.manager;
  g.pub(JS_INFO, ...kvGet(mgr), kvKey(mgr, "lease.*"), kvKey(mgr, "renewal"));
  // A lease bucket filled with answers a member aimed at made-up keys: it purges those rows.
  g.pub(js.streamPurge(kvStream(mgr)));
  g.pub(kvKey(n.buckets.presence, `${o}.${a}`));
  // Its CotalEndpoint (presence, the roster that tells it an agent is ready) watches the
  // channel registry too; the registry holds no secret.
  watchBuckets(g, n.buckets.presence, n.buckets.channels);
  g.pub(`${P}.ctl.delivery-admin.${o}.${a}`);
  // Liveness responder: queue-subscribes the probe rail, replies only under it.
  g.pub(`${P}.live.manager.*.*.reply.>`);
  g.sub(`${P}.ctl.delivery-admin.${o}.${a}.>`, `${P}.live.manager.*.*`);
  // The manager's control rail: requests to the class (queue group) or to one instance,
  // replies only on the reply rail (derived from the request subject, never a payload address),
  // and attach session frames (it writes `out`, reads `in`).
  g.sub(`${P}.ep.one.manager.*.*.*.*.*`, `${P}.ep.inst.manager.*.*.*.*.*.*`);
  g.pub(`${P}.ep.reply.manager.*.*.*.*.*.*`);
  g.pub(`${P}.eps.manager.*.*.out`);
  g.sub(`${P}.eps.manager.*.*.in`);
  // The signer's rail, as itself: with a remote signer the manager holds no signing seed.
  const t = ctx.signRailToken;
  if (t) {
    g.pub(signRail.request(P, t, o, a, "*"));
    g.sub(signRail.reply(P, t, o, a, "*"));
  }
}

/**
 * The signer daemon (lib/signer): pulls every caller's request from the signer rail's stream
 * (which it creates and keeps), answers on the reply rail. Nothing else: no other stream, no
 * messaging plane, no core subscription of the request rail (the broker would push a flood at
 * it).
 */
export function signerGrants(ctx: GrantContext, g: GrantSet): void {
  const P = ctx.names.root;
  const st = ctx.names.signStream;
  if (ctx.signRailToken) g.pub(signRail.reply(P, ctx.signRailToken, "*", "*", "*"));
  g.pub(JS_INFO, js.streamInfo(st), js.streamCreate(st), js.streamUpdate(st));
  g.pub(
    `$JS.API.CONSUMER.CREATE.${st}.signer`,
    `$JS.API.CONSUMER.CREATE.${st}.signer.>`,
    js.durableCreate(st, "signer"),
    js.consumerInfo(st, "signer"),
    js.msgNext(st, "signer"),
  );
}

/**
 * The operator's side of the manager's control rail (`cotal spawn|ps|despawn|attach`): requests
 * carrying only its own `<owner>.<actor>` as the caller, its own replies, and attach session
 * frames. Nothing on the messaging planes, no KV, no JetStream.
 */
export function controlCallerGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n, principal: { owner: o, actor: a } } = ctx;
  const P = n.root;
  g.pub(`${P}.ep.one.manager.*.${o}.${a}.*.*`, `${P}.ep.inst.manager.*.*.${o}.${a}.*.*`);
  g.sub(`${P}.ep.reply.manager.*.*.${o}.${a}.*.*`);
  // The delivery daemon's admin rail, as itself (what was set aside; operator-grade anyway).
  g.pub(`${P}.ctl.delivery-admin.${o}.${a}`);
  g.sub(`${P}.ctl.delivery-admin.${o}.${a}.reply.>`);
  g.pub(`${P}.eps.manager.*.*.in`);
  g.sub(`${P}.eps.manager.*.*.out`);
}

function allStreams(ctx: GrantContext): string[] {
  const s = ctx.names.streams;
  return [s.chat, s.dm, s.task, s.inbox, s.dlv];
}

function allBucketStreams(ctx: GrantContext): string[] {
  return Object.values(ctx.names.buckets).map(kvStream);
}

/**
 * Space setup: creates streams, buckets and bind-only durables, writes ACL and channel rows.
 * It can create a consumer on DM/DLV/TASK (the irreducible body-exfil surface), which is why
 * it is one-shot; it holds no MSG.NEXT/ACK there and no DELETE or PURGE anywhere.
 */
export function provisionerGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n } = ctx;
  const b = n.buckets;
  g.pub(JS_INFO);
  // Create, and bring an older space's caps, TTLs and key sets in line (a create never updates).
  // An update cannot delete or purge; the broker refuses a change of storage.
  for (const st of [...allStreams(ctx), ...allBucketStreams(ctx)]) {
    g.pub(js.streamInfo(st), js.streamCreate(st), js.streamUpdate(st));
  }
  for (const st of [n.streams.dm, n.streams.dlv, n.streams.task]) {
    g.pub(...js.consumerCreate(st), js.durableCreate(st), js.consumerInfo(st));
  }
  for (const bucket of [b.acl, b.channels]) {
    g.pub(kvKey(bucket, ">"), js.msgGet(kvStream(bucket)));
  }
}

/** Removes exactly one lifecycle's DM and DLV durables and its ACL row. */
export function deprovisionerGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n } = ctx;
  const t = ctx.deprovisionTarget!;
  const key = lifecycleKey(t.owner, t.actor, t.lifecycleUid);
  g.pub(JS_INFO);
  g.pub(js.consumerDelete(n.streams.dm, `dm_${key}`));
  g.pub(js.consumerDelete(n.streams.dlv, `dlv_${key}`));
  g.pub(js.consumerDelete(n.streams.chat, `chathist_${key}`));
  g.pub(js.streamInfo(kvStream(n.buckets.acl)));
  g.pub(kvKey(n.buckets.acl, `${t.owner}.${t.actor}.${t.lifecycleUid}`));
}

/** The durable backstop: fan-out over CHAT, the pinned INBOX reader, DLV writes, control replies. */
export function deliveryGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n } = ctx;
  const P = n.root;
  const { chat, inbox, dlv, dm, task } = n.streams;
  const b = n.buckets;
  g.pub(JS_INFO, js.streamInfo(chat), js.streamInfo(inbox), js.streamInfo(dlv));
  // The storage warden: it sizes DM, TASK and DLV, reads DM and TASK as they grow (through its
  // one consumer name), deletes what no member wrote there and trims the largest senders.
  g.pub(js.streamInfo(dm), js.streamInfo(task), js.streamPurge(dm), js.streamPurge(task));
  for (const st of [dm, task]) {
    g.pub(`$JS.API.STREAM.MSG.DELETE.${st}`);
    g.pub(`$JS.API.CONSUMER.CREATE.${st}.warden`, `$JS.API.CONSUMER.CREATE.${st}.warden.>`);
    g.pub(js.consumerInfo(st, "warden"), js.msgNext(st, "warden"));
    g.pub(js.consumerDelete(st, "warden"));
  }
  // Whether a role was ever given (its task durable exists), for `recipientKnown`: a task to
  // a role nobody serves is acknowledged and kept by nobody. Read-only consumer info on TASK.
  g.pub(js.consumerInfo(task));
  g.pub(...js.consumerCreate(chat), js.durableCreate(chat), js.consumerInfo(chat));
  g.pub(js.msgNext(chat), js.consumerDelete(chat), js.ack(chat));
  // The consumer janitor lists CHAT's consumers to delete the ones that never expire.
  g.pub(js.consumerList(chat));
  // INBOX holds pre-authorisation copies: only the `reader` durable, by name.
  g.pub(
    `$JS.API.CONSUMER.CREATE.${inbox}.reader`,
    `$JS.API.CONSUMER.CREATE.${inbox}.reader.>`,
    js.durableCreate(inbox, "reader"),
    js.consumerInfo(inbox, "reader"),
    js.msgNext(inbox, "reader"),
    js.consumerDelete(inbox, "reader"),
    js.ack(inbox, "reader"),
  );
  g.pub(...kvRead(b.presence), ...kvRead(b.channels), ...kvRead(b.members), ...kvRead(b.acl));
  g.pub(kvKey(b.members, ">"));
  // It puts back a channel or ACL row a member's aimed broker answer overwrote (the last good
  // bytes, compare-and-set on the junk revision): a restart would read the junk as the row.
  g.pub(kvKey(b.channels, ">"), kvKey(b.acl, ">"));
  // The rows of ended lifecycles go whole (a purge marker would keep a long key's bytes).
  g.pub(js.streamPurge(kvStream(b.members)));
  g.pub(...kvRead(b.delivery), kvKey(b.delivery, "lease.*"));
  // What it set aside (dead letters, members' pending gap markers): its own records.
  g.pub(...kvRead(b.setaside), kvKey(b.setaside, ">"));
  // A set-aside bucket filled with answers a member aimed at made-up keys: it purges those.
  g.pub(js.streamPurge(kvStream(b.setaside)));
  g.pub(`${P}.dinbox.*.*.*`, `${P}.dlv.*.*.*`);
  g.pub(`${P}.ctl.delivery.*.*.reply.>`, `${P}.ctl.delivery-admin.*.*.reply.>`);
  g.pub(`${P}.live.delivery.*.*.reply.>`);
  g.sub(`${P}.ctl.delivery.*.*`, `${P}.ctl.delivery-admin.*.*`, `${P}.live.delivery.*.*`);
}

/** The membership feed writer: reads members, writes the display-only membership bucket. */
export function membershipRwGrants(ctx: GrantContext, g: GrantSet): void {
  const b = ctx.names.buckets;
  g.pub(JS_INFO, ...kvRead(b.members), ...kvRead(b.membership), kvKey(b.membership, ">"));
  // A bucket filled with answers a member aimed at made-up keys: the feed purges those.
  g.pub(js.streamPurge(kvStream(b.membership)));
}

/** History clear: purges CHAT and DM, reads nothing. */
export function purgerGrants(ctx: GrantContext, g: GrantSet): void {
  g.pub(JS_INFO, js.streamPurge(ctx.names.streams.chat), js.streamPurge(ctx.names.streams.dm));
}

/** Channel registry writes (`channels set`, defaults). */
export function channelWriterGrants(ctx: GrantContext, g: GrantSet): void {
  const bucket = ctx.names.buckets.channels;
  const st = kvStream(bucket);
  g.pub(JS_INFO, kvKey(bucket, ">"), js.streamInfo(st), js.streamCreate(st), js.msgGet(st));
}

/** Space teardown: the only profile holding STREAM.DELETE, on every stream and bucket it owns. */
export function teardownGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n } = ctx;
  g.pub(JS_INFO);
  for (const st of [...allStreams(ctx), ...allBucketStreams(ctx), n.signStream]) {
    g.pub(js.streamInfo(st), js.streamDelete(st));
  }
  g.pub(js.streamPurge(n.streams.chat), kvKey(n.buckets.channels, ">"));
  g.pub(...kvRead(n.buckets.presence), ...kvRead(n.buckets.channels));
}

/**
 * Space backup and restore (`cotal space backup|restore`): snapshots and restores of the space's
 * own streams and buckets through the JetStream snapshot API, and nothing else. It reads no
 * message subject and cannot delete: a restore only creates streams that do not exist.
 */
export function backupGrants(ctx: GrantContext, g: GrantSet): void {
  g.pub(JS_INFO);
  for (const st of [...allStreams(ctx), ...allBucketStreams(ctx)]) {
    g.pub(js.streamInfo(st), js.streamSnapshot(st), js.snapshotAck(st));
    g.pub(js.streamRestore(st), js.restoreChunk(st));
  }
}
