/**
 * Names of a space's JetStream resources: streams, KV buckets, durable consumers and the
 * registry keys. They match the reference implementation so the two interoperate.
 *
 * @module
 */

import {
  assertConcreteChannel,
  assertValidLifecycleUid,
  assertValidPrincipal,
  assertValidRole,
  type Principal,
} from "./names.ts";
import { spaceNames } from "../trust/mod.ts";

/** The five message streams of one space. */
export interface SpaceStreamNames {
  /** `CHAT_<s>`: multicast history, source of the durable fan-out. */
  readonly chat: string;
  /** `DM_<s>`: unicast inboxes. */
  readonly dm: string;
  /** `TASK_<s>`: anycast queue (one durable per role). */
  readonly task: string;
  /** `INBOX_<s>`: Plane-3 mixed pre-auth store (agents hold no grant on it). */
  readonly inbox: string;
  /** `DLV_<s>`: Plane-3 per-member post-auth delivery. */
  readonly dlv: string;
}

/** The KV buckets of one space (each is backed by the stream `KV_<bucket>`). */
export interface SpaceBucketNames {
  /** `cotal_presence_<s>`: presence records, bucket TTL 6 s. */
  readonly presence: string;
  /** `cotal_channels_<s>`: the channel registry and the `=defaults` row. */
  readonly channels: string;
  /** `cotal_members_<s>`: durable-channel membership rows (delivery daemon writes). */
  readonly members: string;
  /** `cotal_acl_<s>`: per-lifecycle read ACL rows (provisioner writes). */
  readonly acl: string;
  /** `cotal_membership_<s>`: the display-only membership feed (never an authorization input). */
  readonly membership: string;
  /** `cotal_delivery_<s>`: the delivery daemon's single-flight lease, bucket TTL 30 s. */
  readonly delivery: string;
  /** `cotal_manager_<s>`: manager liveness leases, bucket TTL 10 s. */
  readonly manager: string;
  /** `cotal_setaside_<s>`: what the delivery daemon set aside (dead letters, gap markers), 30 d. */
  readonly setaside: string;
}

/** Stream names for a space (one definition, shared with the trust layer's grants). */
export function streamNames(space: string): SpaceStreamNames {
  return Object.freeze({ ...spaceNames(space).streams });
}

/** KV bucket names for a space (one definition, shared with the trust layer's grants). */
export function bucketNames(space: string): SpaceBucketNames {
  return Object.freeze({ ...spaceNames(space).buckets });
}

/** The stream backing a KV bucket. */
export function kvStreamName(bucket: string): string {
  return `KV_${bucket}`;
}

function lifecycleName(pr: Principal, uid: string): string {
  const v = assertValidPrincipal(pr, { anyOwner: true });
  assertValidLifecycleUid(uid);
  return `${v.owner}-${v.actor}-${uid}`;
}

/** The bind-only DM durable of one lifecycle: `dm_<owner>-<actor>-<uid>`. */
export function dmDurableName(principal: Principal, lifecycleUid: string): string {
  return `dm_${lifecycleName(principal, lifecycleUid)}`;
}

/** The bind-only Plane-3 delivery durable of one lifecycle: `dlv_<owner>-<actor>-<uid>`. */
export function dlvDurableName(principal: Principal, lifecycleUid: string): string {
  return `dlv_${lifecycleName(principal, lifecycleUid)}`;
}

/** The transient pinned history consumer of one lifecycle: `chathist_<owner>-<actor>-<uid>`. */
export function chathistDurableName(principal: Principal, lifecycleUid: string): string {
  return `chathist_${lifecycleName(principal, lifecycleUid)}`;
}

/** The shared work queue of a role: `svc_<role>` (not lifecycle-scoped). */
export function svcDurableName(role: string): string {
  assertValidRole(role);
  return `svc_${role}`;
}

/** ACL registry key `<owner>.<actor>.<uid>`, stored as-is (never through `token()`). */
export function aclKey(principal: Principal, lifecycleUid: string): string {
  const v = assertValidPrincipal(principal, { anyOwner: true });
  assertValidLifecycleUid(lifecycleUid);
  return `${v.owner}.${v.actor}.${lifecycleUid}`;
}

/** Members registry key `<channel>/<owner>.<actor>.<uid>` (the channel is concrete). */
export function memberKey(channel: string, principal: Principal, lifecycleUid: string): string {
  assertConcreteChannel(channel);
  return `${channel}/${aclKey(principal, lifecycleUid)}`;
}

/** The reserved channel-registry key holding the space defaults. */
export const CHANNEL_DEFAULTS_KEY = "=defaults";
