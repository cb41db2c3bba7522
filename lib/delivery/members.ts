/**
 * The durable-membership registry (`cotal_members_<s>`): one row per (channel, lifecycle),
 * key `<channel>/<owner>.<actor>.<uid>`, written only by the delivery daemon. Membership
 * windows are CHAT stream sequences, never wall clock.
 *
 * @module
 */

import type { KV } from "nats";
import { CotalError } from "../errors.ts";
import { jsonBytes } from "../wire/mod.ts";

/** `durable-active` while joined; `live-confirmed` once the durable half is tombstoned. */
export type MembershipState = "durable-active" | "live-confirmed";

/** One member row. */
export interface MembershipRecord {
  channel: string;
  /** The principal dot form `<owner>.<actor>`. */
  owner: string;
  lifecycleUid: string;
  state: MembershipState;
  /** CHAT sequence at the join: copies start after it. */
  joinCursor: number;
  /** CHAT sequence at the leave: nothing after it is delivered. */
  leaveCursor?: number;
  /** Bumped on every re-join, so a stale leave cannot close a newer membership. */
  generation: number;
  /** True once the join's catch-up finished; reporting only, never delivery eligibility. */
  activated: boolean;
  /** Who wrote the row (the daemon's principal). */
  writerIdentity: string;
  updatedAt: number;
}

/** A row with the KV revision it was read at. */
export interface MemberRow {
  record: MembershipRecord;
  revision: number;
}

/** `<channel>/<owner>.<actor>.<uid>` split back into its parts, or undefined. */
export function parseMemberKey(
  key: string,
): { channel: string; member: string; uid: string } | undefined {
  const slash = key.indexOf("/");
  if (slash <= 0) return undefined;
  const channel = key.slice(0, slash);
  const parts = key.slice(slash + 1).split(".");
  if (parts.length !== 3 || parts.some((p) => p === "")) return undefined;
  return { channel, member: `${parts[0]}.${parts[1]}`, uid: parts[2] };
}

/**
 * Whether a copy of CHAT sequence `seq` belongs to the member: `joinCursor < seq <=
 * leaveCursor` (an open row has no upper bound). `activated` is deliberately ignored: a member
 * mid-catch-up must still receive what is published meanwhile.
 */
export function durableEligible(rec: MembershipRecord, seq: number): boolean {
  if (seq <= rec.joinCursor) return false;
  return rec.leaveCursor === undefined || seq <= rec.leaveCursor;
}

/** Parse a stored row, or undefined when it is not one. */
export function parseMemberRecord(value: Uint8Array): MembershipRecord | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(value));
    if (
      typeof v !== "object" || v === null || typeof v.channel !== "string" ||
      typeof v.owner !== "string" || typeof v.lifecycleUid !== "string" ||
      !Number.isSafeInteger(v.joinCursor) || !Number.isSafeInteger(v.generation) ||
      (v.state !== "durable-active" && v.state !== "live-confirmed")
    ) return undefined;
    if (v.leaveCursor !== undefined && !Number.isSafeInteger(v.leaveCursor)) return undefined;
    return { ...v, activated: v.activated === true } as MembershipRecord;
  } catch {
    return undefined;
  }
}

function isWrongSeq(err: unknown): boolean {
  const code = (err as { api_error?: { err_code?: number } })?.api_error?.err_code;
  return code === 10071 || /wrong last sequence/i.test(String((err as Error)?.message));
}

/**
 * Write a row by compare-and-set: create when `revision` is undefined, else update at that
 * revision. Resolves the new revision, or `undefined` when another write got there first.
 */
export async function casMember(
  kv: KV,
  key: string,
  record: MembershipRecord,
  revision: number | undefined,
): Promise<number | undefined> {
  try {
    return revision === undefined
      ? await kv.create(key, jsonBytes(record))
      : await kv.update(key, jsonBytes(record), revision);
  } catch (err) {
    if (isWrongSeq(err)) return undefined;
    throw new CotalError(
      "members_write_failed",
      `Could not write the membership row ${JSON.stringify(key)} (${
        (err as Error)?.message ?? err
      }); check the delivery cred holds the members-bucket write grant.`,
      { cause: err },
    );
  }
}
