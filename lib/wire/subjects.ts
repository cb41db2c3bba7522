/**
 * Subject builders and `parseSubject`, the one authority on what a Cotal subject means.
 *
 * The sender's `<owner>.<actor>` sits in every application subject, so the broker
 * forge-locks it through each agent's publish grant; receivers trust the subject, not the
 * payload.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import {
  assertConcreteChannel,
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidPrincipal,
  assertValidRole,
  describe,
  isLifecycleUid,
  isPrincipalToken,
  isValidChannel,
  type Principal,
  token,
} from "./names.ts";

/** Control services still served on the legacy `ctl` rail (the delivery daemon only). */
export const CTL_SERVICES: readonly string[] = Object.freeze(["delivery", "delivery-admin"]);
/** Planes that answer the liveness probe rail. */
export const LIVE_PLANES: readonly string[] = Object.freeze(["manager", "delivery"]);

/** The root of one space's subject tree: `cotal.<token(space)>`. */
export function subjectRoot(space: string): string {
  return `cotal.${token(space)}`;
}

function p(pr: Principal): string {
  const v = assertValidPrincipal(pr, { anyOwner: true });
  return `${v.owner}.${v.actor}`;
}

/** Multicast: `cotal.<s>.chat.<owner>.<actor>.<channel>` (the channel must be concrete). */
export function chatSubject(space: string, sender: Principal, channel: string): string {
  assertConcreteChannel(channel);
  return `${subjectRoot(space)}.chat.${p(sender)}.${channel}`;
}

/** Read filter for a channel from anyone: `cotal.<s>.chat.*.*.<channel>` (wildcards allowed). */
export function chatReadFilter(space: string, channel: string): string {
  assertValidChannel(channel);
  return `${subjectRoot(space)}.chat.*.*.${channel}`;
}

/** Unicast: `cotal.<s>.inst.<toOwner>.<toActor>.<fromOwner>.<fromActor>`. */
export function instSubject(space: string, recipient: Principal, sender: Principal): string {
  return `${subjectRoot(space)}.inst.${p(recipient)}.${p(sender)}`;
}

/** A principal's DM receive filter: `cotal.<s>.inst.<owner>.<actor>.>`. */
export function dmFilter(space: string, recipient: Principal): string {
  return `${subjectRoot(space)}.inst.${p(recipient)}.>`;
}

/** Anycast: `cotal.<s>.svc.<role>.<owner>.<actor>`. */
export function svcSubject(space: string, role: string, sender: Principal): string {
  assertValidRole(role);
  return `${subjectRoot(space)}.svc.${role}.${p(sender)}`;
}

/** A role's serve filter: `cotal.<s>.svc.<role>.>`. */
export function svcFilter(space: string, role: string): string {
  assertValidRole(role);
  return `${subjectRoot(space)}.svc.${role}.>`;
}

/** Plane-3 mixed pre-auth store: `cotal.<s>.dinbox.<owner>.<actor>.<uid>`. */
export function dinboxSubject(space: string, member: Principal, lifecycleUid: string): string {
  assertValidLifecycleUid(lifecycleUid);
  return `${subjectRoot(space)}.dinbox.${p(member)}.${lifecycleUid}`;
}

/** Plane-3 per-member post-auth delivery: `cotal.<s>.dlv.<owner>.<actor>.<uid>`. */
export function dlvSubject(space: string, member: Principal, lifecycleUid: string): string {
  assertValidLifecycleUid(lifecycleUid);
  return `${subjectRoot(space)}.dlv.${p(member)}.${lifecycleUid}`;
}

/** Control request: `cotal.<s>.ctl.<service>.<owner>.<actor>` (`delivery`, `delivery-admin`). */
export function ctlSubject(space: string, service: string, caller: Principal): string {
  if (!CTL_SERVICES.includes(service)) {
    throw new CotalError(
      "invalid_ctl_service",
      `The control service ${describe(service)} is not served on the ctl rail; use one of ` +
        `${CTL_SERVICES.join(", ")}.`,
    );
  }
  return `${subjectRoot(space)}.ctl.${service}.${p(caller)}`;
}

/** Liveness probe: `cotal.<s>.live.<plane>.<owner>.<actor>` (`manager` or `delivery`). */
export function liveSubject(space: string, plane: string, caller: Principal): string {
  if (!LIVE_PLANES.includes(plane)) {
    throw new CotalError(
      "invalid_plane",
      `The plane ${describe(plane)} has no liveness rail; use one of ${LIVE_PLANES.join(", ")}.`,
    );
  }
  return `${subjectRoot(space)}.live.${plane}.${p(caller)}`;
}

/** What a Cotal subject carries, as decided by {@linkcode parseSubject}. */
export type ParsedSubject =
  | { kind: "chat"; space: string; sender: Principal; channel: string; rest: string }
  | { kind: "inst"; space: string; sender: Principal; recipient: Principal; rest: string }
  | { kind: "svc"; space: string; sender: Principal; role: string; rest: string }
  | { kind: "ctl"; space: string; sender: Principal; service: string; rest: string }
  | { kind: "live"; space: string; sender: Principal; plane: string; rest: string }
  | {
    kind: "dinbox" | "dlv";
    space: string;
    member: Principal;
    lifecycleUid: string;
    rest: string;
  };

/** Why a subject did not parse. `retired` covers `ctl.<service>` rails that must not be handled. */
export type SubjectRefusal = "malformed" | "retired" | "unknown-kind" | "other-space";

/** The result of {@linkcode parseSubject}. */
export type SubjectParse =
  | ({ ok: true } & ParsedSubject)
  | { ok: false; reason: SubjectRefusal };

function principalAt(t: string[], i: number): Principal | undefined {
  const owner = t[i];
  const actor = t[i + 1];
  return isPrincipalToken(owner) && isPrincipalToken(actor) ? { owner, actor } : undefined;
}

/**
 * Parse a subject into its kind and sender (token indexes on `split(".")`: `cotal`=0,
 * space=1, kind=2). Owner tokens are only checked for grammar here: a receiver must still
 * drop a sender whose owner fails `isPrincipalOwnerToken` (an nkey-shaped legacy owner).
 * With `space`, a subject from another space is refused.
 */
export function parseSubject(subject: string, opts: { space?: string } = {}): SubjectParse {
  const bad = (reason: SubjectRefusal): SubjectParse => ({ ok: false, reason });
  if (typeof subject !== "string") return bad("malformed");
  const t = subject.split(".");
  if (t.length < 6 || t[0] !== "cotal" || t[1] === "") return bad("malformed");
  const space = t[1];
  if (opts.space !== undefined && space !== token(opts.space)) return bad("other-space");
  switch (t[2]) {
    case "chat": {
      const sender = principalAt(t, 3);
      const channel = t.slice(5).join(".");
      if (!sender || !isValidChannel(channel, { concrete: true })) return bad("malformed");
      return { ok: true, kind: "chat", space, sender, channel, rest: channel };
    }
    case "inst": {
      if (t.length !== 7) return bad("malformed");
      const recipient = principalAt(t, 3);
      const sender = principalAt(t, 5);
      if (!recipient || !sender) return bad("malformed");
      const rest = `${recipient.owner}.${recipient.actor}`;
      return { ok: true, kind: "inst", space, sender, recipient, rest };
    }
    case "svc":
    case "ctl":
    case "live": {
      if (t.length !== 6) return bad("malformed");
      const sender = principalAt(t, 4);
      const what = t[3];
      if (!sender || !/^[A-Za-z0-9_-]+$/.test(what)) return bad("malformed");
      if (t[2] === "svc") return { ok: true, kind: "svc", space, sender, role: what, rest: what };
      if (t[2] === "ctl") {
        // The ctl rail survives only for the delivery daemon; ctl.manager etc. are retired.
        if (!CTL_SERVICES.includes(what)) return bad("retired");
        return { ok: true, kind: "ctl", space, sender, service: what, rest: what };
      }
      if (!LIVE_PLANES.includes(what)) return bad("malformed");
      return { ok: true, kind: "live", space, sender, plane: what, rest: what };
    }
    case "dinbox":
    case "dlv": {
      if (t.length !== 6) return bad("malformed");
      const member = principalAt(t, 3);
      const lifecycleUid = t[5];
      if (!member || !isLifecycleUid(lifecycleUid)) return bad("malformed");
      return { ok: true, kind: t[2], space, member, lifecycleUid, rest: lifecycleUid };
    }
    default:
      return bad("unknown-kind");
  }
}

/**
 * NATS subject matching: `*` matches one token, a final `>` one or more. `a.>` does not
 * match bare `a`, so an ACL that should cover both must list both.
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  const pt = pattern.split(".");
  const st = subject.split(".");
  for (let i = 0; i < pt.length; i++) {
    if (pt[i] === ">") return i === pt.length - 1 && st.length > i;
    if (i >= st.length) return false;
    if (pt[i] !== "*" && pt[i] !== st[i]) return false;
  }
  return pt.length === st.length;
}
