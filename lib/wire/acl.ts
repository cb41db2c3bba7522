/**
 * The durable ACL registry (`cotal_acl_<s>`): one row per lifecycle, key
 * `<owner>.<actor>.<uid>`, holding the read ACL the delivery daemon re-authorizes every
 * backstop entry against. Written by the provisioner in the same act that bakes the list into
 * the agent's JWT.
 *
 * @module
 */

import type { JetStreamManager, KV } from "nats";
import { CotalError } from "../errors.ts";
import { jsonBytes, jsonObject, listKeys, liveEntry } from "./kv.ts";
import { describe, type Principal } from "./names.ts";
import { aclKey } from "./resources.ts";
import { jsmCall } from "./js_errors.ts";

/** One lifecycle's read ACL. A present `[]` means "reads nothing"; an absent row means unknown. */
export interface AclRecord {
  /** The current read ACL (channels, wildcards allowed). */
  allowSubscribe: string[];
  /** The ceiling baked into the last issued credential. */
  issuedAllowSubscribe: string[];
  /** Increases by one on every write of the row. */
  revision: number;
  /** Epoch ms of the write. */
  updatedAt: number;
}

/** Read one lifecycle's row, or undefined when absent or deleted. */
export async function readAclRow(
  kv: KV,
  bucket: string,
  principal: Principal,
  lifecycleUid: string,
): Promise<AclRecord | undefined> {
  const key = aclKey(principal, lifecycleUid);
  const e = await liveEntry(kv, key, bucket);
  if (!e) return undefined;
  const raw = jsonObject(e);
  if (!raw || !Array.isArray(raw.allowSubscribe)) {
    throw new CotalError(
      "registry_corrupt",
      `The ACL row ${
        describe(key)
      } in ${bucket} is not an ACL record; deprovision and provision the lifecycle again.`,
    );
  }
  const allow = raw.allowSubscribe as string[];
  return {
    allowSubscribe: allow,
    issuedAllowSubscribe: Array.isArray(raw.issuedAllowSubscribe)
      ? raw.issuedAllowSubscribe as string[]
      : allow,
    revision: typeof raw.revision === "number" ? raw.revision : 0,
    updatedAt: typeof raw.updatedAt === "number" ? raw.updatedAt : 0,
  };
}

/**
 * Write the row at issue time: the read ACL and its ceiling both become `allowSubscribe`.
 * Call it only in the act that bakes the same list into the credential.
 */
export async function reissueAclRow(
  kv: KV,
  bucket: string,
  principal: Principal,
  lifecycleUid: string,
  allowSubscribe: readonly string[],
): Promise<AclRecord> {
  const prev = await readAclRow(kv, bucket, principal, lifecycleUid);
  const row: AclRecord = {
    allowSubscribe: [...allowSubscribe],
    issuedAllowSubscribe: [...allowSubscribe],
    revision: (prev?.revision ?? 0) + 1,
    updatedAt: Date.now(),
  };
  const key = aclKey(principal, lifecycleUid);
  await jsmCall(`write the ACL row ${key}`, () => kv.put(key, jsonBytes(row)));
  return row;
}

/** Lifecycle uids of `principal` that have a live ACL row. */
export async function liveAclUids(
  jsm: JetStreamManager,
  kv: KV,
  bucket: string,
  principal: Principal,
): Promise<string[]> {
  const prefix = `${principal.owner}.${principal.actor}.`;
  const uids: string[] = [];
  for (const key of await listKeys(jsm, bucket, `${prefix}*`)) {
    if (await liveEntry(kv, key, bucket)) uids.push(key.slice(prefix.length));
  }
  return uids;
}
