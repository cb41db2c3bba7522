/**
 * Agent provisioning: the bind-only durables an agent cannot create itself (its `dm_` and
 * `dlv_` per lifecycle, and its role's `svc_` queue) and its ACL row. A consumer create's
 * filter sits in the request body where no broker ACL can reach it, so agents are denied
 * every create and the provisioner pre-creates the durables with the right filters.
 *
 * @module
 */

import {
  AckPolicy,
  type ConsumerConfig,
  type ConsumerInfo,
  DeliverPolicy,
  type JetStreamManager,
  nanos,
  type NatsConnection,
} from "nats";
import { CotalError } from "../errors.ts";
import {
  type CredentialSigner,
  type Identity,
  type LifetimeOpts,
  localSigner,
  type MintAuth,
  mintWith,
} from "../trust/mod.ts";
import { liveAclUids, reissueAclRow } from "./acl.ts";
import { type BrokerTarget, withBroker } from "./connect.ts";
import { bindKv, listKeys } from "./kv.ts";
import * as names from "./names.ts";
import {
  aclKey,
  bucketNames,
  chathistDurableName,
  dlvDurableName,
  dmDurableName,
  streamNames,
  svcDurableName,
} from "./resources.ts";
import { isNotFound, jsmCall, wrapJs } from "./js_errors.ts";
import { dlvSubject, dmFilter, svcFilter } from "./subjects.ts";

/** Ack wait of every pre-created durable. */
export const DURABLE_ACK_WAIT_MS = 60_000;

/** The channel verbs of one agent. */
export interface AgentChannelPolicy {
  /** Channels joined at boot; must be covered by `allowSubscribe`. Default `["general"]` when
   * `allowSubscribe` is also unset, else none. */
  subscribe?: readonly string[];
  /** Read ACL (wildcards allowed); default `subscribe`. An empty list means no channels. */
  allowSubscribe?: readonly string[];
  /** Concrete channels the agent may post to; default none (publish is default-deny). */
  allowPublish?: readonly string[];
  /** The anycast role whose `svc_<role>` queue it serves. */
  role?: string;
}

/** The verbs after defaults and validation. */
export interface ResolvedChannelPolicy {
  /** Channels joined at boot. */
  subscribe: string[];
  /** Channels it may read. */
  allowSubscribe: string[];
  /** Channels it may post to. */
  allowPublish: string[];
  /** The role whose tasks it serves. */
  role?: string;
}

/** True when the channel pattern `pattern` covers every channel `channel` can name. */
export function channelCovers(pattern: string, channel: string): boolean {
  const p = pattern.split(".");
  const c = channel.split(".");
  for (let i = 0; i < p.length; i++) {
    if (p[i] === ">") return c.length > i;
    if (i >= c.length || c[i] === ">") return false;
    if (p[i] !== "*" && p[i] !== c[i]) return false;
  }
  return p.length === c.length;
}

function list(v: readonly string[] | undefined, what: string): string[] | undefined {
  if (v === undefined) return undefined;
  if (!Array.isArray(v)) {
    throw new CotalError("invalid_channel", `${what} must be an array of channel names.`);
  }
  return [...new Set(v)];
}

/**
 * Apply the defaults and refuse an inconsistent policy: every `subscribe` entry must be
 * covered by `allowSubscribe`, publish targets must be concrete.
 */
export function resolveChannelPolicy(policy: AgentChannelPolicy = {}): ResolvedChannelPolicy {
  const allow0 = list(policy.allowSubscribe, "allowSubscribe");
  const subscribe = list(policy.subscribe, "subscribe") ?? (allow0 ? [] : ["general"]);
  const allowSubscribe = allow0 ?? [...subscribe];
  const allowPublish = list(policy.allowPublish, "allowPublish") ?? [];
  for (const ch of [...subscribe, ...allowSubscribe]) names.assertValidChannel(ch);
  for (const ch of allowPublish) names.assertConcreteChannel(ch);
  for (const ch of subscribe) {
    if (!allowSubscribe.some((a) => channelCovers(a, ch))) {
      throw new CotalError(
        "subscribe_outside_acl",
        `Boot channel ${names.describe(ch)} is not covered by allowSubscribe ` +
          `${JSON.stringify(allowSubscribe)}; add it to allowSubscribe or drop it from subscribe.`,
      );
    }
  }
  if (policy.role !== undefined) names.assertValidRole(policy.role);
  return policy.role === undefined
    ? { subscribe, allowSubscribe, allowPublish }
    : { subscribe, allowSubscribe, allowPublish, role: policy.role };
}

/** Options of {@linkcode provisionAgentDurables}. */
export interface ProvisionAgentDurablesOptions extends BrokerTarget, AgentChannelPolicy {
  /** The space. */
  space: string;
  /** The agent's principal (`local` or a derived `u_` owner). */
  principal: names.Principal;
  /** The incarnation's never-reused uid; durables and the ACL row are keyed on it. */
  lifecycleUid: string;
  /** false: a live-only launch; no ACL row is written (no durable membership possible). */
  durableMembership?: boolean;
}

/** What {@linkcode provisionAgentDurables} did. */
export interface ProvisionedDurables extends ResolvedChannelPolicy {
  /** The durables made: DM, DLV and the role's task queue. */
  durables: { dm: string; dlv: string; svc?: string };
  /** Durable names this call created (the others already existed for this lifecycle). */
  created: string[];
  /** The ACL row key written, when one was. */
  aclKey?: string;
}

/**
 * Pre-create one lifecycle's bind-only `dm_` (starting after the DM stream's current last
 * sequence, so a recycled alias inherits nothing) and `dlv_` durables, the role's `svc_`
 * queue, and write its ACL row. Idempotent per lifecycle. Refuses while another lifecycle of
 * the same principal still has a live ACL row (two live rows would make the delivery daemon's
 * alias lookup ambiguous). Needs a `provisioner` credential.
 */
export async function provisionAgentDurables(
  opts: ProvisionAgentDurablesOptions,
): Promise<ProvisionedDurables> {
  const principal = names.assertValidPrincipal(opts.principal);
  names.assertValidLifecycleUid(opts.lifecycleUid);
  const policy = resolveChannelPolicy(opts);
  return await withBroker(
    opts,
    (nc) => provisionOn(nc, opts.space, principal, opts.lifecycleUid, policy, opts),
    { name: "cotal-provision" },
  );
}

async function provisionOn(
  nc: NatsConnection,
  space: string,
  principal: names.Principal,
  uid: string,
  policy: ResolvedChannelPolicy,
  opts: { durableMembership?: boolean },
): Promise<ProvisionedDurables> {
  const jsm = await nc.jetstreamManager();
  const s = streamNames(space);
  const acl = bucketNames(space).acl;
  const kv = await bindKv(nc, acl);
  const writeAcl = opts.durableMembership !== false;
  if (writeAcl) {
    const others = (await liveAclUids(jsm, kv, acl, principal)).filter((u) => u !== uid);
    if (others.length > 0) {
      throw new CotalError(
        "lifecycle_still_live",
        `Principal ${principal.owner}.${principal.actor} still has a live lifecycle ` +
          `${
            others.join(", ")
          }; deprovision it with deprovisionAgent before provisioning a new one.`,
      );
    }
  }
  const dm = dmDurableName(principal, uid);
  const dlv = dlvDurableName(principal, uid);
  const created: string[] = [];
  const base: Partial<ConsumerConfig> = {
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(DURABLE_ACK_WAIT_MS),
  };
  // The DM frontier: a fresh lifecycle starts after everything already stored.
  const dmInfo = await jsmCall(`read stream ${s.dm}`, () => jsm.streams.info(s.dm));
  const frontier = dmInfo.state.last_seq;
  const dmCfg: Partial<ConsumerConfig> = frontier > 0
    ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: frontier + 1 }
    : { deliver_policy: DeliverPolicy.All };
  if (await ensureDurable(jsm, s.dm, dm, dmFilter(space, principal), { ...base, ...dmCfg })) {
    created.push(dm);
  }
  const dlvCfg = { ...base, deliver_policy: DeliverPolicy.All };
  if (await ensureDurable(jsm, s.dlv, dlv, dlvSubject(space, principal, uid), dlvCfg)) {
    created.push(dlv);
  }
  let svc: string | undefined;
  if (policy.role !== undefined) {
    svc = svcDurableName(policy.role);
    const svcCfg = { ...base, deliver_policy: DeliverPolicy.All };
    if (await ensureDurable(jsm, s.task, svc, svcFilter(space, policy.role), svcCfg)) {
      created.push(svc);
    }
  }
  const result: ProvisionedDurables = {
    ...policy,
    durables: svc === undefined ? { dm, dlv } : { dm, dlv, svc },
    created,
  };
  if (writeAcl) {
    await reissueAclRow(kv, acl, principal, uid, policy.allowSubscribe);
    result.aclKey = aclKey(principal, uid);
  }
  return result;
}

/** Create a durable unless it exists; an existing one must carry the same filter. */
async function ensureDurable(
  jsm: JetStreamManager,
  stream: string,
  name: string,
  filter: string,
  cfg: Partial<ConsumerConfig>,
): Promise<boolean> {
  const have = await consumerInfo(jsm, stream, name);
  if (have) {
    if (have.config.filter_subject !== filter) {
      throw new CotalError(
        "durable_conflict",
        `Durable ${name} on ${stream} exists with filter ${
          names.describe(have.config.filter_subject)
        } ` +
          `instead of ${names.describe(filter)}; delete it and provision again.`,
      );
    }
    return false;
  }
  await jsmCall(
    `create durable ${name} on ${stream}`,
    () => jsm.consumers.add(stream, { ...cfg, durable_name: name, filter_subject: filter }),
  );
  return true;
}

/** A durable's info, or undefined when it does not exist. */
export async function consumerInfo(
  jsm: JetStreamManager,
  stream: string,
  name: string,
): Promise<ConsumerInfo | undefined> {
  try {
    return await jsm.consumers.info(stream, name);
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw wrapJs(`read the durable ${name} on ${stream}`, err);
  }
}

/** Options of {@linkcode deprovisionAgent}. */
export interface DeprovisionAgentOptions extends BrokerTarget {
  space: string;
  principal: names.Principal;
  lifecycleUid: string;
}

/** What {@linkcode deprovisionAgent} removed. */
export interface DeprovisionResult {
  /** Durables deleted by this call. */
  removed: string[];
  /** Durables that were already gone. */
  absent: string[];
  /** Whether an ACL row (live or tombstoned) existed and was purged. */
  aclPurged: boolean;
}

/**
 * Remove one lifecycle's `dm_` and `dlv_` durables and purge its ACL row, by exact name (the
 * role's shared `svc_` queue stays). Idempotent. Works with a `deprovisioner` credential
 * pinned to this lifecycle.
 */
export async function deprovisionAgent(opts: DeprovisionAgentOptions): Promise<DeprovisionResult> {
  const principal = names.assertValidPrincipal(opts.principal);
  names.assertValidLifecycleUid(opts.lifecycleUid);
  const s = streamNames(opts.space);
  const acl = bucketNames(opts.space).acl;
  return await withBroker(opts, async (nc) => {
    const jsm = await nc.jetstreamManager();
    const result: DeprovisionResult = { removed: [], absent: [], aclPurged: false };
    for (
      const [stream, name] of [
        [s.dm, dmDurableName(principal, opts.lifecycleUid)],
        [s.dlv, dlvDurableName(principal, opts.lifecycleUid)],
        // Its history consumer goes by itself when idle; one a member left durable would not.
        [s.chat, chathistDurableName(principal, opts.lifecycleUid)],
      ]
    ) {
      try {
        await jsm.consumers.delete(stream, name);
        result.removed.push(name);
      } catch (err) {
        if (!isNotFound(err)) throw wrapJs(`delete durable ${name} on ${stream}`, err);
        result.absent.push(name);
      }
    }
    const key = aclKey(principal, opts.lifecycleUid);
    if ((await listKeys(jsm, acl, key)).includes(key)) {
      const kv = await bindKv(nc, acl);
      await jsmCall(`purge the ACL row ${key}`, () => kv.purge(key));
      result.aclPurged = true;
    }
    return result;
  }, { name: "cotal-deprovision" });
}

/** Options of {@linkcode provisionAgent}: the durables' options plus what the mint needs. */
export interface ProvisionAgentOptions extends ProvisionAgentDurablesOptions, LifetimeOpts {
  /**
   * The space's signer: a full or stripped SpaceAuth held here, or a `CredentialSigner` (a
   * remote signer: then no seed is in this process). Its space must be `space`.
   */
  auth: MintAuth | CredentialSigner;
  /** The agent's nkey identity; its public key is the JWT subject and its reply-inbox token. */
  identity: Identity;
}

/** What {@linkcode provisionAgent} returns. */
export interface ProvisionedAgent extends ProvisionedDurables {
  /** The agent's creds file text (a secret). */
  creds: string;
}

/**
 * Provision an agent end to end: its durables and ACL row, then an `agent` credential whose
 * grants follow from the same resolved `subscribe` / `allowSubscribe` / `allowPublish` /
 * `role` (publish default-deny), so the broker's view and the ACL row cannot disagree. The
 * credential is minted first: a local refusal (say, a JWT over the control-line limit)
 * leaves nothing provisioned.
 */
export async function provisionAgent(opts: ProvisionAgentOptions): Promise<ProvisionedAgent> {
  const signer = "sign" in (opts.auth ?? {})
    ? opts.auth as CredentialSigner
    : localSigner(opts.auth as MintAuth);
  if (opts.auth?.space !== opts.space) {
    throw new CotalError(
      "space_mismatch",
      `The signer is for space ${
        names.describe(opts.auth?.space)
      } but the agent is provisioned in ` +
        `${names.describe(opts.space)}; pass the signer of the same space.`,
    );
  }
  const principal = names.assertValidPrincipal(opts.principal);
  names.assertValidLifecycleUid(opts.lifecycleUid);
  const policy = resolveChannelPolicy(opts);
  const creds = await mintWith(signer, opts.identity, "agent", {
    principal,
    lifecycleUid: opts.lifecycleUid,
    allowSubscribe: policy.allowSubscribe,
    allowPublish: policy.allowPublish,
    ...(policy.role !== undefined ? { role: policy.role } : {}),
    ...(opts.expiresInSeconds !== undefined ? { expiresInSeconds: opts.expiresInSeconds } : {}),
    ...(opts.expiresAt !== undefined ? { expiresAt: opts.expiresAt } : {}),
  });
  const durables = await provisionAgentDurables(opts);
  return { ...durables, creds };
}
