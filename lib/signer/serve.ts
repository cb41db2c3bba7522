/**
 * The signer's rail: requests for user JWTs, each proven by its caller, checked against the
 * frozen policy (lib/signer/policy.ts) and the caller's rate, signed with the space's account
 * key, answered on the reply rail derived from the request's subject, and audited.
 *
 * Wire: a request on `<root>.sign.req.<owner>.<actor>.<nonce>` carries the caller proof
 * headers (lib/trust/request_proof.ts, context {@linkcode SIGN_CONTEXT}) and the JSON body
 * {@linkcode SignWireRequest}; the answer on `<root>.sign.reply.<owner>.<actor>.<nonce>` is
 * `{ ok: true, jwt }` or `{ ok: false, error: { code, message } }`. No seed crosses the wire:
 * the caller sends a public key and renders the creds with its own seed.
 *
 * @module
 */
import type { MsgHdrs, NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import {
  isProfile,
  PROOF_HEADER,
  type RequestTrust,
  RequestVerifier,
  resolveExpiry,
  signRail,
  signRailTokenFor,
  signUserJwt,
  spaceNames,
} from "../trust/mod.ts";
import type { MintAuth, MintOpts, Principal, Profile } from "../trust/mod.ts";
import type { AuditEntry, AuditLog } from "./audit.ts";
import {
  CallerRate,
  isReservedActor,
  SIGNER_CALLERS,
  SIGNER_POLICY,
  SIGNER_REPLAY_CAP,
} from "./policy.ts";
import { headersOf, UNDECODABLE } from "../nats/mod.ts";
import { MAX_SIGN_REQUEST_BYTES, pullSignRail } from "./rail.ts";

/** What the signer reads of a request pulled from its rail. */
interface RailMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers?: MsgHdrs;
}

/** The string every signer request's proof covers. */
export const SIGN_CONTEXT = "cotal-sign-request-v1";

/** The JSON body of a signing request. */
export interface SignWireRequest {
  readonly v: 1;
  readonly publicKey: string;
  readonly profile: string;
  readonly opts?: SignWireOpts;
}

/** The mint options a request may carry (no `expiresAt`, no `connId`: see {@linkcode serveSigner}). */
export type SignWireOpts = Pick<
  MintOpts,
  | "principal"
  | "lifecycleUid"
  | "allowSubscribe"
  | "allowPublish"
  | "role"
  | "deprovisionTarget"
  | "expiresInSeconds"
>;

const WIRE_OPTS: ReadonlySet<string> = new Set([
  "principal",
  "lifecycleUid",
  "allowSubscribe",
  "allowPublish",
  "role",
  "deprovisionTarget",
  "expiresInSeconds",
]);

export { MAX_SIGN_REQUEST_BYTES };

/** What {@linkcode serveSigner} needs. */
export interface SignerServeOptions {
  readonly nc: NatsConnection;
  readonly auth: MintAuth;
  readonly trust: RequestTrust;
  readonly audit: AuditLog;
  readonly now?: () => number;
  /** Where the rail's own trouble is said (losing and re-making its stream). */
  readonly log?: (line: string) => void;
}

/** Counts since start. */
export interface SignerStats {
  /** JWTs signed. */
  allowed: number;
  /** Requests refused, for any reason. */
  refused: number;
}

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

/** Checks a request body's shape; the mint itself checks the values. */
function parseRequest(data: Uint8Array): SignWireRequest {
  if (data.length > MAX_SIGN_REQUEST_BYTES) {
    refuse("signer_bad_request", `The request is over ${MAX_SIGN_REQUEST_BYTES} bytes.`);
  }
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(data));
  } catch {
    refuse("signer_bad_request", "The request body is not JSON.");
  }
  const r = v as Partial<SignWireRequest>;
  if (typeof v !== "object" || v === null || r.v !== 1) {
    refuse("signer_bad_request", "The request is not a version 1 signing request.");
  }
  if (typeof r.publicKey !== "string" || typeof r.profile !== "string") {
    refuse("signer_bad_request", "The request needs a publicKey and a profile.");
  }
  if (r.opts !== undefined && (typeof r.opts !== "object" || r.opts === null)) {
    refuse("signer_bad_request", "The request's opts is not an object.");
  }
  for (const k of Object.keys(r.opts ?? {})) {
    if (!WIRE_OPTS.has(k)) {
      refuse("signer_bad_request", `The option ${JSON.stringify(k)} is not one a signer takes.`);
    }
  }
  return r as SignWireRequest;
}

function samePrincipal(a: Principal | undefined, b: { owner: string; actor: string }): boolean {
  return !!a && a.owner === b.owner && a.actor === b.actor;
}

/**
 * Requests handled at once, for one caller name and in all; past either a request is refused at
 * once (`signer_busy`), before its proof is checked, so a flood cannot queue work (or memory)
 * without bound, and one caller's flood fills only its own slots.
 */
export const MAX_SIGN_IN_FLIGHT = Object.freeze({ perCaller: 128, total: 1024 });

/** The policy's rule for `callerProfile` asking for `profile`, or a refusal. */
function ruleFor(callerProfile: string, profile: unknown) {
  const rule = isProfile(profile) ? SIGNER_POLICY[callerProfile]?.[profile as Profile] : undefined;
  if (!rule) {
    refuse(
      "signer_profile_refused",
      `A ${callerProfile} may not ask for ${JSON.stringify(profile)} credentials.`,
    );
  }
  return rule;
}

/**
 * What the rule holds a request to: its TTL, a self-only profile signed for the caller's own
 * key and principal, and no reserved name in what it names. Refuses (throws) otherwise.
 */
function checkRequest(
  rule: NonNullable<ReturnType<typeof ruleFor>>,
  req: SignWireRequest,
  caller: { ttl: number; callerKey: string; owner: string; actor: string },
): void {
  const o = req.opts ?? {};
  if (caller.ttl > rule.maxTtlSeconds) {
    refuse(
      "signer_ttl_refused",
      `A ${req.profile} credential from the signer lives at most ${rule.maxTtlSeconds} s; ${caller.ttl} s was asked.`,
    );
  }
  if (rule.selfOnly) {
    if (
      req.publicKey !== caller.callerKey ||
      !samePrincipal(o.principal, { owner: caller.owner, actor: caller.actor })
    ) {
      refuse(
        "signer_not_self",
        `A ${req.profile} credential is signed only for the caller itself (its key and principal).`,
      );
    }
  } else {
    for (const named of [o.principal?.actor, o.deprovisionTarget?.actor]) {
      if (isReservedActor(named)) {
        refuse(
          "signer_reserved_name",
          `The name ${
            JSON.stringify(named)
          } is the mesh's own (in any case); no signed credential names it.`,
        );
      }
    }
  }
}

/** The verifier of signing requests' caller proofs. */
function signVerifier(opts: SignerServeOptions): RequestVerifier {
  return new RequestVerifier(opts.trust, {
    context: SIGN_CONTEXT,
    profiles: SIGNER_CALLERS,
    code: "signer_unauthenticated",
    what: "signing request",
    hint: "Ask with a remote signer holding the caller's own creds of this space.",
  }, { replayCapPerCaller: SIGNER_REPLAY_CAP, ...(opts.now ? { now: opts.now } : {}) });
}

/**
 * A refusal as one sentence: a malformed value reaches the mint as an internal error, said as
 * `signer_bad_request`, not with the runtime's text.
 */
function asRefusal(err: unknown): CotalError {
  return err instanceof CotalError
    ? err
    : new CotalError("signer_bad_request", "The request's options are not well formed.");
}

/** The trail's line for a refusal, with what was known of the request when it was refused. */
function refusedEntry(
  e: CotalError,
  known: {
    caller: string;
    callerProfile?: string;
    principal?: string;
    req?: SignWireRequest;
    ttl?: number;
  },
): Omit<AuditEntry, "at"> {
  const { caller, callerProfile, principal, req, ttl } = known;
  return {
    caller,
    // A refusal before the proof verified names the subject's caller, unproven.
    ...(callerProfile ? { callerProfile } : { unproven: true }),
    ...(principal ? { principal } : {}),
    ...(req ? { profile: String(req.profile), subject: String(req.publicKey) } : {}),
    ...(ttl !== undefined ? { ttlSeconds: ttl } : {}),
    decision: "refused",
    code: e.code,
  };
}

/**
 * Serves the signer rail of `auth`'s space on `nc` (pulled from its stream, lib/signer/rail.ts)
 * until the returned `stop()`; resolves once the first pull is open. Each request
 * is refused (and audited) unless its proof verifies for an admitted caller profile, the caller
 * is within its rate, the policy lets that caller profile ask for the profile, the TTL is within
 * the policy's cap, a self-only profile is asked for the caller's own key and principal, and no
 * agent or control-caller speaks as a reserved name.
 */
export async function serveSigner(opts: SignerServeOptions): Promise<{
  stop(): Promise<void>;
  readonly stats: SignerStats;
}> {
  const { nc, auth, audit } = opts;
  const root = spaceNames(auth.space).root;
  const verifier = signVerifier(opts);
  const rate = new CallerRate(opts.now);
  const stats: SignerStats = { allowed: 0, refused: 0 };
  const token = await signRailTokenFor(auth);
  const prefix = `${root}.sign.req.${token}.`;

  let inFlight = 0;
  const inFlightBy = new Map<string, number>();
  const handle = async (m: RailMessage): Promise<void> => {
    const [owner, actor, nonce, ...extra] = m.subject.slice(prefix.length).split(".");
    if (!owner || !actor || !nonce || extra.length) return;
    const caller = `${owner}.${actor}`;
    const answer = (body: unknown) =>
      nc.publish(
        signRail.reply(root, token, owner, actor, nonce),
        new TextEncoder().encode(JSON.stringify(body)),
      );
    let callerProfile: string | undefined;
    let req: SignWireRequest | undefined;
    let ttl: number | undefined;
    let principal: string | undefined;
    // A message with no proof at all (a broker answer a member aimed here) is refused before it
    // takes one of the caller's in-flight slots: only a signed request may hold one.
    // Headers that cannot be read (any caller may send such bytes) count as no proof at all.
    const h = headersOf(m);
    const headers = h === UNDECODABLE ? undefined : h;
    const proofless = !headers?.get(PROOF_HEADER);
    inFlight++;
    const mine = (inFlightBy.get(caller) ?? 0) + (proofless ? 0 : 1);
    if (!proofless) inFlightBy.set(caller, mine);
    try {
      if (proofless) {
        refuse("signer_unauthenticated", "The signing request carries no caller proof.");
      }
      // What costs nothing to check comes before the proof (a hash and two signatures).
      if (mine > MAX_SIGN_IN_FLIGHT.perCaller || inFlight > MAX_SIGN_IN_FLIGHT.total) {
        refuse("signer_busy", "The signer is handling too many requests; try again shortly.");
      }
      if (m.data.length > MAX_SIGN_REQUEST_BYTES) {
        refuse("signer_bad_request", `The request is over ${MAX_SIGN_REQUEST_BYTES} bytes.`);
      }
      // A nonce this caller already used is a replay, proof or not: refused before the check.
      if (verifier.used({ owner, actor }, nonce)) {
        refuse("signer_unauthenticated", "The signing request's nonce was used before (a replay).");
      }
      const claims = await verifier.verify(
        m.subject,
        m.data,
        headers,
        { owner, actor },
        nonce,
        false,
      );
      callerProfile = claims.name;
      // Counted only once proven: anything aimed at a caller's subject by someone else (a
      // broker answer carries no proof) cannot spend that caller's rate. Its nonce is kept
      // only after, so requests over the rate fill no memory.
      if (!rate.take(caller)) {
        refuse("signer_rate_limited", "Too many signing requests from this caller; slow down.");
      }
      verifier.remember({ owner, actor }, nonce);
      req = parseRequest(m.data);
      const profile = req.profile;
      const rule = ruleFor(callerProfile!, profile);
      const o = req.opts ?? {};
      if (o.principal && typeof o.principal === "object") {
        principal = `${String(o.principal.owner)}.${String(o.principal.actor)}`;
      }
      const now = Math.floor((opts.now?.() ?? Date.now()) / 1000);
      ttl = resolveExpiry(profile as Profile, o, now) - now;
      checkRequest(rule, req, { ttl, callerKey: claims.sub, owner, actor });
      const jwt = await signUserJwt(auth, req.publicKey, profile as Profile, {
        ...o,
        expiresInSeconds: ttl,
      });
      stats.allowed++;
      audit.record({
        caller,
        callerProfile,
        profile,
        subject: req.publicKey,
        ...(principal ? { principal } : {}),
        ttlSeconds: ttl,
        decision: "allowed",
      });
      answer({ ok: true, jwt });
    } catch (err) {
      const e = asRefusal(err);
      stats.refused++;
      audit.record(refusedEntry(e, { caller, callerProfile, principal, req, ttl }));
      answer({ ok: false, error: { code: e.code, message: e.message } });
    } finally {
      inFlight--;
      if (!proofless) {
        const left = (inFlightBy.get(caller) ?? 1) - 1;
        if (left > 0) inFlightBy.set(caller, left);
        else inFlightBy.delete(caller);
      }
    }
  };

  const pull = await pullSignRail(nc, auth.space, token, handle, opts.log ?? (() => {}));
  return {
    stats,
    async stop() {
      await pull.stop();
      await nc.flush().catch(() => {});
      audit.flush();
    },
  };
}
