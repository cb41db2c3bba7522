/**
 * The profile matrix: validates a mint's inputs and computes a profile's exact grants.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import { spaceNames } from "./grant_names.ts";
import * as token from "./space_token.ts";
import { type GrantContext, GrantSet } from "./profile_context.ts";
import { isSignRailToken } from "./sign_rail_token.ts";
import {
  adminGrants,
  agentGrants,
  observerGrants,
  operatorGrants,
  probeGrants,
} from "./profiles_members.ts";
import {
  backupGrants,
  channelWriterGrants,
  controlCallerGrants,
  deliveryGrants,
  deprovisionerGrants,
  membershipRwGrants,
  provisionerGrants,
  purgerGrants,
  signerGrants,
  supervisorGrants,
  teardownGrants,
} from "./profiles_infra.ts";
import type { MintOpts, Permissions, Principal, Profile } from "./types.ts";

const GRANTS: Readonly<Record<Profile, (ctx: GrantContext, g: GrantSet) => void>> = Object.freeze({
  agent: agentGrants,
  observer: observerGrants,
  admin: adminGrants,
  supervisor: supervisorGrants,
  provisioner: provisionerGrants,
  deprovisioner: deprovisionerGrants,
  delivery: deliveryGrants,
  "membership-rw": membershipRwGrants,
  purger: purgerGrants,
  "channel-writer": channelWriterGrants,
  teardown: teardownGrants,
  backup: backupGrants,
  "control-caller": controlCallerGrants,
  operator: operatorGrants,
  probe: probeGrants,
  signer: signerGrants,
});

/** Every data-account profile, in matrix order. */
export const PROFILES: readonly Profile[] = Object.freeze(Object.keys(GRANTS) as Profile[]);

/** True when `p` names a data-account profile (an unknown string never falls through to agent). */
export function isProfile(p: unknown): p is Profile {
  return typeof p === "string" && Object.hasOwn(GRANTS, p);
}

/** Options of {@linkcode permissionsFor}: the mint options plus the (required) connection id. */
export interface PermissionOpts extends Omit<MintOpts, "expiresAt" | "expiresInSeconds"> {
  connId: string;
  /**
   * The signer rail's token (lib/trust/sign_rail_token.ts), which only a holder of the space's
   * signing key computes: the supervisor's and the signer's rail grants need it.
   */
  signRailToken?: string;
}

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

function channels(list: readonly string[] | undefined, what: string, concrete: boolean): string[] {
  if (list === undefined) return [];
  if (!Array.isArray(list)) refuse("invalid_channel", `${what} must be an array of channel names.`);
  for (const ch of list) token.assertValidChannel(ch, { concrete });
  return [...new Set(list)];
}

// Options that only make sense for one profile are refused elsewhere, so a caller's mistake
// (a role on a provisioner, a target on an agent) is loud instead of silently ignored.
const ONLY_FOR: ReadonlyArray<[keyof PermissionOpts, Profile]> = [
  ["lifecycleUid", "agent"],
  ["allowSubscribe", "agent"],
  ["allowPublish", "agent"],
  ["role", "agent"],
  ["deprovisionTarget", "deprovisioner"],
];

/**
 * The exact permission block of a `profile` credential in `space`. Refuses an unknown
 * profile, an agent without a `lifecycleUid`, channel names the token rules would rewrite,
 * malformed principals, and options that do not belong to the profile.
 */
export function permissionsFor(space: string, profile: Profile, opts: PermissionOpts): Permissions {
  if (!isProfile(profile)) {
    refuse(
      "unknown_profile",
      `Unknown profile ${JSON.stringify(String(profile))}; use one of ${PROFILES.join(", ")}.`,
    );
  }
  if (typeof space !== "string" || space.trim() === "") {
    refuse("invalid_space", "The space name is empty; pass the space the credential is for.");
  }
  for (const [key, only] of ONLY_FOR) {
    if (opts[key] !== undefined && profile !== only) {
      refuse(
        "invalid_mint_option",
        `The ${key} option applies only to the ${only} profile, not ${profile}; remove it.`,
      );
    }
  }
  token.assertConnId(opts.connId);
  const principal: Principal = opts.principal ?? { owner: "local", actor: opts.connId };
  token.assertPrincipalOwner(principal.owner);
  token.assertValidActor(principal.actor);

  if (profile === "agent") {
    if (opts.lifecycleUid === undefined) {
      refuse(
        "missing_lifecycle_uid",
        "An agent credential needs a lifecycleUid (it keys the agent's durables); pass one from newLifecycleUid().",
      );
    }
    token.assertLifecycleUid(opts.lifecycleUid);
    if (opts.role !== undefined) token.assertValidRole(opts.role);
  }
  if (profile === "deprovisioner") {
    const t = opts.deprovisionTarget;
    if (t === undefined) {
      refuse(
        "missing_deprovision_target",
        "A deprovisioner credential is pinned to one lifecycle; pass deprovisionTarget {owner, actor, lifecycleUid}.",
      );
    }
    token.assertPrincipalOwner(t.owner);
    token.assertValidActor(t.actor);
    token.assertLifecycleUid(t.lifecycleUid);
  }
  const ctx: GrantContext = {
    names: spaceNames(space),
    connId: opts.connId,
    principal: { owner: principal.owner, actor: principal.actor },
    lifecycleUid: opts.lifecycleUid,
    allowSubscribe: channels(opts.allowSubscribe, "allowSubscribe", false),
    allowPublish: channels(opts.allowPublish, "allowPublish", true),
    role: opts.role,
    deprovisionTarget: opts.deprovisionTarget && { ...opts.deprovisionTarget },
    ...(isSignRailToken(opts.signRailToken) ? { signRailToken: opts.signRailToken } : {}),
  };
  const g = new GrantSet();
  GRANTS[profile](ctx, g);
  // Every delivery rides the per-connection inbox, so nobody can wildcard-sniff `_INBOX.>`.
  g.sub(`_INBOX_${ctx.connId}.>`);
  return g.toPermissions();
}
