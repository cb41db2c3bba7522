/**
 * Grants of the profiles that act as (or watch) space members: agent, observer, admin,
 * operator and probe (reference B §2.1, A §6.3).
 *
 * @module
 */
import { js, JS_INFO, kvGet, kvKey, kvWatch, lifecycleKey } from "./grant_names.ts";
import type { GrantContext, GrantSet } from "./profile_context.ts";

/**
 * An agent: posts only as itself and only to `allowPublish`; reads `allowSubscribe` live and
 * through a filter-pinned history consumer; binds (never creates) its DM, DLV and role
 * consumers; writes only its own presence key.
 */
export function agentGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n, principal: { owner: o, actor: a } } = ctx;
  const P = n.root;
  const uid = ctx.lifecycleUid!;
  const key = lifecycleKey(o, a, uid);
  const chat = n.streams.chat;
  const hist = `chathist_${key}`;

  for (const ch of ctx.allowPublish) g.pub(`${P}.chat.${o}.${a}.${ch}`);
  g.pub(`${P}.inst.*.*.${o}.${a}`, `${P}.svc.*.${o}.${a}`, `${P}.ctl.delivery.${o}.${a}`);
  g.pub(`${P}.live.*.${o}.${a}`);
  g.pub(JS_INFO, js.streamInfo(chat));
  for (const ch of ctx.allowSubscribe) {
    g.pub(js.consumerCreateFiltered(chat, hist, `${P}.chat.*.*.${ch}`));
  }
  if (ctx.allowSubscribe.length > 0) {
    g.pub(js.consumerInfo(chat, hist), js.msgNext(chat, hist), js.consumerDelete(chat, hist));
  }
  // DM and DLV are bind-only: the provisioner pre-created the durables with their filters.
  for (const [st, durable] of [[n.streams.dm, `dm_${key}`], [n.streams.dlv, `dlv_${key}`]]) {
    g.pub(js.consumerInfo(st, durable), js.msgNext(st, durable), js.ack(st, durable));
  }
  // Presence: watch everyone (no consumer: see kvWatch), write only the own key.
  watchBuckets(g, n.buckets.presence, n.buckets.channels);
  g.pub(kvKey(n.buckets.presence, `${o}.${a}`));
  g.pub(...kvGet(n.buckets.delivery));
  if (ctx.role) {
    const durable = `svc_${ctx.role}`;
    const st = n.streams.task;
    g.pub(js.streamInfo(st), js.consumerInfo(st, durable), js.msgNext(st, durable));
    g.pub(js.ack(st, durable));
  }
  // A create's filter_subject sits in the body, out of reach of the ACL: deny every form.
  for (const st of [n.streams.dm, n.streams.task, n.streams.dlv]) {
    g.denyPub(...js.consumerCreate(st), js.durableCreate(st));
  }

  g.sub(`${P}.ctl.delivery.${o}.${a}.>`, `${P}.inst.${o}.${a}.*.*`);
  for (const ch of ctx.allowSubscribe) g.sub(`${P}.chat.*.*.${ch}`);
}

/** Consumer-less watches of `buckets` (what a CotalEndpoint needs for presence and channels). */
export function watchBuckets(g: GrantSet, ...buckets: string[]): void {
  for (const b of buckets) {
    const w = kvWatch(b);
    g.pub(...w.pub);
    g.sub(...w.sub);
  }
}

/**
 * The one consumer an observer or admin cred may make, read, ack and delete on `stream`:
 * `hist_<connId>` (its inbox token, its own). A stream's consumers are named in the API
 * subjects, so these verbs reach no other: red team 30 pulled, acked and deleted the delivery
 * daemon's `fanout` durable with an observer cred, which took channel posts from offline
 * members and stopped durable delivery for the space. The name sits in the create subject (the
 * filtered form, one filter subject), never only in a body the ACL cannot see.
 */
export function historyConsumerName(connId: string): string {
  return `hist_${connId}`;
}

function ownHistoryConsumer(ctx: GrantContext, g: GrantSet, stream: string): void {
  const name = historyConsumerName(ctx.connId);
  // The filtered create only: the broker then takes one filter subject, the one in the
  // subject (red team 31 re-created it with 6,000 filters, and each create held the stream's
  // other creates, members' history reads among them, for seconds).
  g.pub(js.streamInfo(stream), `$JS.API.CONSUMER.CREATE.${stream}.${name}.>`);
  g.pub(js.consumerInfo(stream, name));
  g.pub(js.msgNext(stream, name), js.consumerDelete(stream, name), js.ack(stream, name));
}

/** An observer: every channel live and in history, presence, channels and the membership feed; writes nothing. */
export function observerGrants(ctx: GrantContext, g: GrantSet): void {
  const n = ctx.names;
  g.pub(JS_INFO);
  ownHistoryConsumer(ctx, g, n.streams.chat);
  watchBuckets(g, n.buckets.presence, n.buckets.channels);
  // The membership feed read like presence: rows and writes, never a consumer of its own (red
  // team 31 made 1,024 durables there with an observer cred, fat ones filling the broker's
  // memory).
  watchBuckets(g, n.buckets.membership);
  g.sub(`${n.root}.chat.>`);
}

/** An admin: the observer plus DMs and anycast (live and DM history); still writes nothing. */
export function adminGrants(ctx: GrantContext, g: GrantSet): void {
  observerGrants(ctx, g);
  const n = ctx.names;
  // DM history through its own consumer only: every member's dm_ durable is on DM too.
  ownHistoryConsumer(ctx, g, n.streams.dm);
  // The messaging planes only: a space-wide `>` would also collect request nonces.
  g.sub(`${n.root}.inst.>`, `${n.root}.svc.>`);
}

/** A transient operator (`cotal send`/`dm`/`ask`): posts as itself anywhere, reads its own DMs. */
export function operatorGrants(ctx: GrantContext, g: GrantSet): void {
  const { names: n, principal: { owner: o, actor: a } } = ctx;
  const P = n.root;
  g.pub(`${P}.chat.${o}.${a}.>`, `${P}.inst.*.*.${o}.${a}`, `${P}.svc.*.${o}.${a}`);
  g.pub(`${P}.live.*.${o}.${a}`);
  g.pub(JS_INFO, kvKey(n.buckets.presence, `${o}.${a}`));
  watchBuckets(g, n.buckets.presence, n.buckets.channels);
  g.sub(`${P}.inst.${o}.${a}.*.*`);
}

/** A probe: proves the broker accepts a connect and nothing else. */
export function probeGrants(_ctx: GrantContext, g: GrantSet): void {
  g.denyPub(">");
}
