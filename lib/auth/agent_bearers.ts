/**
 * The auth service's answer to a user-mode supervisor (`POST /agents`): ledger rows and bearers
 * for the agents it runs. A request counts only with a request proof by a `supervisor` cred of
 * the space (lib/trust/agent_bearer_rail.ts), fresh and used once. What it grants is frozen
 * here, not asked for:
 *
 * - every row is for one owner, derived from the space's owner secret under a name no IdP
 *   login derives to, so a supervisor can never write, revoke or take a bearer of a human's row;
 * - no scope (an agent's bearer carries none), no reserved name (`manager`, `delivery`, ...);
 * - at most {@linkcode MAX_SUPERVISED_ROWS} rows of at most
 *   {@linkcode MAX_SUPERVISED_GRANT_BYTES} of grants each, so a supervisor cannot fill the
 *   ledger the IdP users share, nor make the callout's read of it slow;
 * - bearers of the longest lifetime a bearer may have (900 s), only for the row's lifecycle;
 * - at most {@linkcode AGENT_BEARER_RATE} proven requests a second per caller, and
 *   {@linkcode UNPROVEN_PER_MIN} unproven ones a minute in all.
 *
 * @module
 */
import { CotalError, isCotalError } from "../errors.ts";
import { TokenBuckets } from "../rate.ts";
import { isReservedActor } from "../signer/mod.ts";
import {
  AGENT_BEARER_RAIL,
  AGENT_BEARER_SUBJECT,
  type AgentBearerGrant,
  MAX_AGENT_BEARER_BODY_BYTES,
  proofHeadersOf,
  type RequestTrust,
  RequestVerifier,
} from "../trust/mod.ts";
import { MAX_BEARER_TTL_SEC } from "./constants.ts";
import { isActorToken, isLifecycleUid } from "./grammar.ts";
import type { UserTokenIssuer } from "./issuer.ts";
import { isPlainObject } from "./jwks.ts";
import type { ActorLedger } from "./ledger.ts";
import { deriveOwnerToken } from "./owner.ts";
import { jsonAnswer, MinuteWindow, readCapped } from "./http_answers.ts";

/** Rows one space's supervised agents may hold in the ledger at once. */
export const MAX_SUPERVISED_ROWS = 1_024;
/**
 * The largest grant (its JSON) a supervised row may hold: the callout reads the whole ledger at
 * every connect, so the supervisor's share of it is bounded in bytes too (at most ~2 MiB).
 */
export const MAX_SUPERVISED_GRANT_BYTES = 2_048;
/** Proven requests one supervisor may make: a steady rate past a burst. */
export const AGENT_BEARER_RATE = Object.freeze({ perSecond: 20, burst: 256 });
/** Requests whose proof fails, tolerated per minute in all before 429. */
export const UNPROVEN_PER_MIN = 60;
/** The label every supervised agent's row carries. */
export const SUPERVISED_LABEL = "cotal-supervise";

/**
 * The owner a space's supervised agents are granted under: the owner secret's HMAC of a name
 * that is not a JSON array, where every IdP login's subject is one (`[issuer, sub]`).
 */
export function supervisedOwner(ownerSecret: Uint8Array): Promise<string> {
  return deriveOwnerToken(ownerSecret, "cotal:supervised-agents");
}

/** What {@linkcode createAgentBearerHandler} needs. */
export interface AgentBearerHandlerOptions {
  readonly space: string;
  /** The data account's keys: a caller's cred must be signed by one of them. */
  readonly trust: RequestTrust;
  readonly ledger: ActorLedger;
  readonly issuer: Pick<UserTokenIssuer, "issue">;
  /** {@linkcode supervisedOwner} of the space's owner secret. */
  readonly owner: string;
  /** The callout's sentinel creds, handed to the supervisor with `hello`. */
  readonly sentinelCreds: string;
  readonly log?: (event: Record<string, string | number | boolean | undefined>) => void;
  readonly now?: () => number;
}

const TD = new TextDecoder("utf-8", { fatal: true });
const GRANT_KEYS = new Set(["subscribe", "allowSubscribe", "allowPublish", "role"]);

/** The handler of `POST /agents`: a JSON answer, or `{error, code}` with a 4xx status. */
export function createAgentBearerHandler(
  opts: AgentBearerHandlerOptions,
): (req: Request) => Promise<Response> {
  const verifier = new RequestVerifier(opts.trust, AGENT_BEARER_RAIL, {
    ...(opts.now ? { now: opts.now } : {}),
  });
  const rate = new TokenBuckets(AGENT_BEARER_RATE, opts.now ? { now: opts.now } : {});
  const unproven = new MinuteWindow(UNPROVEN_PER_MIN, opts.now ?? Date.now);
  const log = opts.log ?? (() => {});
  const { ledger, owner } = opts;

  async function answer(doc: Record<string, unknown>): Promise<unknown> {
    const op = doc.op;
    if (op === "hello") return { owner, sentinelCreds: opts.sentinelCreds };
    const actor = doc.actor;
    const lifecycleUid = doc.lifecycleUid;
    if (!isActorToken(actor) || isReservedActor(actor)) {
      throw new CotalError(
        "actor_bad_name",
        `The agent name ${JSON.stringify(String(actor).slice(0, 64))} is not an actor token ` +
          "of 1-64 characters of [A-Za-z0-9_], or is one of the mesh's own names.",
      );
    }
    if (!isLifecycleUid(lifecycleUid)) {
      throw new CotalError("agent_bearer_bad_request", "The request's lifecycleUid is malformed.");
    }
    if (op === "grant") {
      const g = doc.grant;
      if (!isPlainObject(g) || Object.keys(g).some((k) => !GRANT_KEYS.has(k))) {
        throw new CotalError(
          "agent_bearer_bad_request",
          "The grant must be {subscribe, allowSubscribe, allowPublish, role?}.",
        );
      }
      const grant = g as unknown as AgentBearerGrant;
      if (JSON.stringify(grant).length > MAX_SUPERVISED_GRANT_BYTES) {
        throw new CotalError(
          "agent_bearer_bad_request",
          `The agent's grant is over ${MAX_SUPERVISED_GRANT_BYTES} bytes of JSON; name fewer ` +
            "channels (a pattern such as team.* covers many).",
        );
      }
      // Counted inside the ledger's serialised write: a burst of grants at once cannot each
      // count the same rows and all pass (red team 48).
      const row = await ledger.grant({
        owner,
        actor,
        subscribe: grant.subscribe,
        allowSubscribe: grant.allowSubscribe,
        allowPublish: grant.allowPublish,
        ...(grant.role !== undefined ? { role: grant.role } : {}),
        scope: [],
        label: SUPERVISED_LABEL,
        lifecycleUid,
      }, { ownerCap: MAX_SUPERVISED_ROWS });
      return { owner, actor, lifecycleUid: row.lifecycleUid };
    }
    if (op === "bearer") {
      const row = await ledger.authorize(owner, actor);
      if (row.lifecycleUid !== lifecycleUid) {
        throw new CotalError(
          "agent_bearer_stale",
          `${actor}'s row is for another lifecycle; a bearer is issued only for the current one.`,
        );
      }
      const issued = await opts.issuer.issue({
        space: opts.space,
        owner,
        actor,
        scope: [],
        lifecycleUid,
        ttlSec: MAX_BEARER_TTL_SEC,
      });
      return { token: issued.token, exp: issued.exp };
    }
    if (op === "revoke") {
      // A newer lifecycle's row under the same name is not this request's to remove (checked
      // inside the ledger's serialised write).
      return { revoked: await ledger.revoke(owner, actor, { lifecycleUid }) };
    }
    throw new CotalError(
      "agent_bearer_bad_request",
      "The request's op must be hello, grant, bearer or revoke.",
    );
  }

  return async (req) => {
    if (req.headers.has("origin")) {
      return jsonAnswer(403, {
        error: "Browsers may not call the auth service.",
        code: "origin_refused",
      });
    }
    const type = (req.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
    if (type !== "application/json") {
      await req.body?.cancel().catch(() => {});
      return jsonAnswer(415, {
        error: "Supervisor requests are application/json.",
        code: "unsupported_media_type",
      });
    }
    const body = await readCapped(req, MAX_AGENT_BEARER_BODY_BYTES);
    if (body === undefined) {
      return jsonAnswer(413, {
        error: `The request body is over ${MAX_AGENT_BEARER_BODY_BYTES} bytes.`,
        code: "body_too_large",
      });
    }
    let doc: unknown;
    try {
      doc = JSON.parse(TD.decode(body));
    } catch {
      return jsonAnswer(400, { error: "The request body is not JSON.", code: "bad_json" });
    }
    const caller = isPlainObject(doc) && isPlainObject(doc.caller) ? doc.caller : undefined;
    const nonce = isPlainObject(doc) ? doc.nonce : undefined;
    if (
      !isPlainObject(doc) || typeof caller?.owner !== "string" ||
      typeof caller?.actor !== "string" || typeof nonce !== "string" || nonce.length < 8 ||
      nonce.length > 64
    ) {
      return jsonAnswer(400, {
        error: "The request must be {op, caller: {owner, actor}, nonce, ...}.",
        code: "agent_bearer_bad_request",
      });
    }
    const who = { owner: caller.owner as string, actor: caller.actor as string };
    try {
      if (verifier.used(who, nonce)) throw verifierReplay();
      await verifier.verify(
        AGENT_BEARER_SUBJECT,
        body,
        proofHeadersOf(req.headers),
        who,
        nonce,
        true,
      );
    } catch (err) {
      const refusal = isCotalError(err) ? err.message : "The request's proof could not be read.";
      log({ event: "agents", outcome: "refused", code: AGENT_BEARER_RAIL.code });
      if (!unproven.take()) {
        return jsonAnswer(429, {
          error: "Too many unproven requests; wait a minute.",
          code: "throttled",
        });
      }
      return jsonAnswer(401, { error: refusal, code: AGENT_BEARER_RAIL.code });
    }
    if (!rate.take(`${who.owner}.${who.actor}`)) {
      return jsonAnswer(429, {
        error: `Over ${AGENT_BEARER_RATE.perSecond} requests a second; ask again shortly.`,
        code: "throttled",
      });
    }
    try {
      const out = await answer(doc);
      log({ event: "agents", op: String(doc.op), outcome: "allow", actor: stringOr(doc.actor) });
      return jsonAnswer(200, out);
    } catch (err) {
      if (!isCotalError(err)) {
        log({ event: "agents", op: String(doc.op).slice(0, 16), outcome: "error" });
        return jsonAnswer(500, {
          error: "The request failed inside the auth service.",
          code: "internal",
        });
      }
      log({ event: "agents", op: String(doc.op).slice(0, 16), outcome: "deny", code: err.code });
      const status = err.code === "actor_not_granted"
        ? 404
        : err.code === "agent_bearer_stale"
        ? 409
        : err.code === "ledger_unreadable"
        ? 503
        : 400;
      return jsonAnswer(status, { error: err.message, code: err.code });
    }
  };
}

function verifierReplay(): CotalError {
  return new CotalError(
    AGENT_BEARER_RAIL.code,
    `The ${AGENT_BEARER_RAIL.what} was refused: its nonce was used before (a replay).`,
  );
}

function stringOr(v: unknown): string | undefined {
  return typeof v === "string" ? v.slice(0, 64) : undefined;
}
