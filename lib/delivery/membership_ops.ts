/**
 * Durable membership, as served on `ctl.delivery`: join (with its activation catch-up), leave
 * and list. The caller is always the authenticated subject sender; a lifecycle uid in a
 * request can only name the caller's own rows.
 *
 * A join writes the member row first, then copies what the fan-out may have judged without it:
 * every authentic message on the channel in `(joinCursor, fence]`, where the fence is the
 * larger of the CHAT frontier and the fan-out's delivered sequence, read after the row write.
 * Everything above the fence reaches the fan-out after the row exists, so the two paths meet
 * without a gap; the overlap is collapsed by copy ids.
 *
 * @module
 */

import { headersOf } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import {
  channelCovers,
  chatReadFilter,
  decodeMessage,
  dinboxSubject,
  isLifecycleUid,
  isValidChannel,
  kvStreamName,
  type Principal,
} from "../wire/mod.ts";
import { scanChat } from "./chat_scan.ts";
import { FANOUT_DURABLE, MAX_MEMBERSHIPS_PER_LIFECYCLE } from "./constants.ts";
import { aliasAclRows, type DeliveryContext } from "./context.ts";
import { copyId, entryHeaders, type InboxEntry, renderFrame } from "./frames.ts";
import { casMember, type MembershipRecord } from "./members.ts";

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

/** A concrete channel name (a type guard over the wire rule). */
export function isConcrete(channel: unknown): channel is string {
  return isValidChannel(channel, { concrete: true });
}

function dot(p: Principal): string {
  return `${p.owner}.${p.actor}`;
}

/** Rows (joined or left) the member's lifecycle holds in the members bucket. */
function rowsOf(ctx: DeliveryContext, member: string, uid: string): number {
  const suffix = `/${member}.${uid}`;
  let n = 0;
  for (const [key] of ctx.members.entries()) if (key.endsWith(suffix)) n++;
  return n;
}

/** The caller's single live lifecycle (its ACL row); refuses none or several. */
export function resolveLifecycle(
  ctx: DeliveryContext,
  caller: Principal,
): { uid: string; allowSubscribe: string[]; issuedAllowSubscribe: string[] } {
  const rows = aliasAclRows(ctx, dot(caller));
  if (rows.length === 0) {
    refuse(
      "not_provisioned",
      `${dot(caller)} has no ACL row in this space; provision the agent with durable ` +
        `membership before joining a durable channel.`,
    );
  }
  if (rows.length > 1) {
    refuse(
      "ambiguous_lifecycle",
      `${dot(caller)} has ${rows.length} live lifecycles; deprovision the stale one first.`,
    );
  }
  const [uid, rec] = rows[0];
  return {
    uid,
    allowSubscribe: rec.allowSubscribe,
    issuedAllowSubscribe: rec.issuedAllowSubscribe,
  };
}

async function chatFrontier(ctx: DeliveryContext): Promise<number> {
  return (await ctx.jsm.streams.info(ctx.streams.chat)).state.last_seq;
}

/** What a join answers. */
export interface JoinResult {
  durable: boolean;
  generation?: number;
  lifecycleUid?: string;
  activated?: boolean;
  /** Copies written by the catch-up. */
  caughtUp?: number;
  reason?: string;
}

/** `durableJoin {channel}` for `caller`. */
export async function durableJoin(
  ctx: DeliveryContext,
  caller: Principal,
  channel: unknown,
  token: number,
): Promise<JoinResult> {
  if (!isConcrete(channel)) {
    refuse("invalid_channel", "durableJoin needs one concrete channel name (no wildcards).");
  }
  await Promise.all([ctx.acl.sync(), ctx.members.sync()]);
  const life = resolveLifecycle(ctx, caller);
  if (!life.allowSubscribe.some((p) => channelCovers(p, channel))) {
    refuse(
      "not_allowed",
      `${dot(caller)} may not read channel ${JSON.stringify(channel)}; widen its ACL first.`,
    );
  }
  const member = dot(caller);
  const uid = life.uid;
  const key = `${channel}/${member}.${uid}`;
  const existing = ctx.members.get(key);
  const open = existing && existing.value.leaveCursor === undefined;
  if (open && existing.value.activated) {
    return {
      durable: true,
      generation: existing.value.generation,
      lifecycleUid: uid,
      activated: true,
    };
  }
  if (!existing && rowsOf(ctx, member, uid) >= MAX_MEMBERSHIPS_PER_LIFECYCLE) {
    refuse(
      "too_many_memberships",
      `${member} already has ${MAX_MEMBERSHIPS_PER_LIFECYCLE} durable channels (joined or left); ` +
        `re-join one of them, or ask the operator to respawn the agent.`,
    );
  }
  // A row stuck mid-activation resumes from its own cursor; a new or re-join starts at the frontier.
  const joinCursor = open ? existing.value.joinCursor : await chatFrontier(ctx);
  const generation = open ? existing.value.generation : (existing?.value.generation ?? 0) + 1;
  const record: MembershipRecord = {
    channel,
    owner: member,
    lifecycleUid: uid,
    state: "durable-active",
    joinCursor,
    generation,
    activated: false,
    writerIdentity: ctx.self,
    updatedAt: Date.now(),
  };
  if (!ctx.fence.mayAct(token)) refuse("quiesced", "The delivery daemon lost its lease; retry.");
  let revision = await casMember(ctx.membersKv, key, record, existing?.revision);
  if (revision === undefined) {
    return { durable: false, reason: "membership changed concurrently; retry the join" };
  }
  await ctx.members.until(revision);

  const fanout = await ctx.jsm.consumers.info(ctx.streams.chat, FANOUT_DURABLE);
  const fence = Math.max(await chatFrontier(ctx), fanout.delivered.stream_seq);
  let caughtUp = 0;
  if (fence > joinCursor) {
    const pubs: Promise<unknown>[] = [];
    await scanChat(ctx, {
      name: `cu_${caller.owner}-${caller.actor}-${uid}_${generation}`,
      filter: chatReadFilter(ctx.space, channel),
      fromSeq: joinCursor + 1,
      toSeq: fence,
      onMessage: (m) => {
        const d = decodeMessage(m.subject, m.data, { space: ctx.space, headers: headersOf(m) });
        if (!d.ok || dot(d.sender) === member) return;
        if (!ctx.fence.mayAct(token)) {
          refuse("quiesced", "The delivery daemon lost its lease; retry.");
        }
        const entry: InboxEntry = {
          msgId: d.message.id,
          channel,
          seq: m.seq,
          reason: "durable-channel",
          generation,
        };
        pubs.push(
          ctx.gate.publish(dinboxSubject(ctx.space, caller, uid), renderFrame(channel, d.message), {
            msgID: copyId(entry.msgId, member, uid, generation),
            headers: entryHeaders(entry),
          }),
        );
      },
    });
    await Promise.all(pubs);
    caughtUp = pubs.length;
  }
  const current = ctx.members.get(key);
  if (!current || current.revision !== revision) {
    return { durable: false, reason: "activation superseded by a concurrent leave or re-join" };
  }
  revision = await casMember(ctx.membersKv, key, {
    ...record,
    activated: true,
    updatedAt: Date.now(),
  }, revision);
  if (revision === undefined) {
    return { durable: false, reason: "activation superseded by a concurrent leave or re-join" };
  }
  await ctx.members.until(revision);
  return { durable: true, generation, lifecycleUid: uid, activated: true, caughtUp };
}

/** `durableLeave {channel, generation, lifecycleUid}` for `caller`; not ACL-gated on purpose. */
export async function durableLeave(
  ctx: DeliveryContext,
  caller: Principal,
  body: { channel?: unknown; generation?: unknown; lifecycleUid?: unknown },
  token: number,
): Promise<{ left: boolean; alreadyLeft?: boolean; leaveCursor?: number; generation?: number }> {
  const { channel, generation, lifecycleUid } = body;
  if (!isConcrete(channel)) {
    refuse("invalid_channel", "durableLeave needs one concrete channel name.");
  }
  if (typeof generation !== "number" || !Number.isSafeInteger(generation) || generation < 1) {
    refuse("invalid_generation", "durableLeave needs the generation the join answered.");
  }
  if (!isLifecycleUid(lifecycleUid)) {
    refuse("invalid_lifecycle_uid", "durableLeave needs the caller's own lifecycle uid.");
  }
  await ctx.members.sync();
  // The uid is confined to the authenticated alias: a lie only reaches the caller's own rows.
  const key = `${channel}/${dot(caller)}.${lifecycleUid}`;
  const row = ctx.members.get(key);
  if (!row || row.value.leaveCursor !== undefined) return { left: true, alreadyLeft: true };
  if (row.value.generation !== generation) {
    refuse(
      "stale_leave",
      `The membership of ${JSON.stringify(channel)} is at generation ${row.value.generation}, ` +
        `not ${generation} (it was re-joined); list memberships and leave the current one.`,
    );
  }
  const leaveCursor = await chatFrontier(ctx);
  if (!ctx.fence.mayAct(token)) refuse("quiesced", "The delivery daemon lost its lease; retry.");
  const record: MembershipRecord = {
    ...row.value,
    state: "live-confirmed",
    leaveCursor,
    updatedAt: Date.now(),
    writerIdentity: ctx.self,
  };
  const revision = await casMember(ctx.membersKv, key, record, row.revision);
  if (revision === undefined) {
    refuse("membership_contended", "The membership changed; retry the leave.");
  }
  await ctx.members.until(revision);
  return { left: true, leaveCursor, generation };
}

/** `listMemberships {lifecycleUid?}`: the caller's open rows, activated or not. */
export async function listMemberships(
  ctx: DeliveryContext,
  caller: Principal,
  lifecycleUid: unknown,
): Promise<
  {
    memberships: {
      channel: string;
      generation: number;
      activated: boolean;
      lifecycleUid: string;
    }[];
  }
> {
  if (lifecycleUid !== undefined && !isLifecycleUid(lifecycleUid)) {
    refuse("invalid_lifecycle_uid", "listMemberships takes the caller's own lifecycle uid.");
  }
  await ctx.members.sync();
  const member = dot(caller);
  const out = [];
  for (const [, e] of ctx.members.entries()) {
    const r = e.value;
    if (r.owner !== member || r.leaveCursor !== undefined) continue;
    if (lifecycleUid !== undefined && r.lifecycleUid !== lifecycleUid) continue;
    out.push({
      channel: r.channel,
      generation: r.generation,
      activated: r.activated,
      lifecycleUid: r.lifecycleUid,
    });
  }
  out.sort((a, b) => a.channel.localeCompare(b.channel));
  return { memberships: out };
}

/** How often the rows of lifecycles that no longer exist are removed. */
export const ROW_PRUNE_INTERVAL_MS = 60_000;

/**
 * Removes the member rows of lifecycles whose ACL row is gone (deprovisioned: despawned or
 * replaced), so what an agent joined does not stay in the members bucket for good. A row is
 * written only after its lifecycle's ACL row was seen, so with the ACL mirror synced an absent
 * ACL row means the lifecycle ended. Returns the rows removed.
 */
export async function pruneEndedRows(ctx: DeliveryContext, token: number): Promise<number> {
  await Promise.all([ctx.acl.sync(), ctx.members.sync()]);
  let removed = 0;
  for (const [key] of [...ctx.members.entries()]) {
    const slash = key.indexOf("/");
    const lifecycle = key.slice(slash + 1);
    if (slash <= 0 || ctx.acl.get(lifecycle) !== undefined) continue;
    if (!ctx.fence.mayAct(token)) break;
    // Removed from the stream outright: a KV delete or purge marker keeps the key (up to a
    // 4 KiB channel name) in the bucket.
    // The mirror forgets it too (a purge leaves no marker it would see): it was removed again,
    // and logged so, every minute for good (newcomer pass 8).
    await ctx.jsm.streams.purge(kvStreamName(ctx.buckets.members), {
      filter: `$KV.${ctx.buckets.members}.${key}`,
    }).then(() => {
      ctx.members.forget(key);
      removed++;
    }, () => {});
  }
  return removed;
}

/** Prunes ended lifecycles' rows now and every {@linkcode ROW_PRUNE_INTERVAL_MS}. */
export function startRowPrune(ctx: DeliveryContext, token: number): { stop(): void } {
  const run = () =>
    void pruneEndedRows(ctx, token).then((n) => {
      if (n > 0) ctx.log.info(`removed ${n} member rows of ended lifecycles`);
    }, (err) => ctx.log.warn(`member row prune failed (${(err as Error)?.message ?? err})`));
  run();
  const timer = setInterval(run, ROW_PRUNE_INTERVAL_MS);
  return { stop: () => clearInterval(timer) };
}
