/**
 * The auth service's loopback HTTP face: `GET /health`, `GET /jwks`, `POST /exchange`
 * (an IdP token for a Cotal bearer) and `POST /agents` (a supervisor's agents' bearers, proven by
 * its cred instead of the capability), JSON only, with no CORS. The exchange is guarded by a
 * capability only processes that can read `auth-service.json` hold; a browser is refused by
 * its `Origin` header before anything else, and bodies are capped at 64 KiB.
 *
 * @module
 */

import { isCotalError } from "../errors.ts";
import { jsonAnswer, MinuteWindow, readCapped } from "./http_answers.ts";
import type { IdpBridge } from "./idp_bridge.ts";
import type { UserTokenIssuer } from "./issuer.ts";
import { isPlainObject } from "./jwks.ts";
import { AGENT_BEARER_PATH } from "../trust/mod.ts";

/** Largest exchange body read, in bytes (a larger one gets 413). */
export const MAX_EXCHANGE_BODY_BYTES = 64 * 1024;
/** Requests with a missing or wrong capability tolerated per minute before 429. */
export const BAD_CAP_PER_MIN = 30;
/** Refused exchanges (valid capability, bad credential) tolerated per minute before 429. */
export const FAILED_EXCHANGE_PER_MIN = 30;
/** `Cache-Control` max-age of `GET /jwks`, in seconds. */
export const JWKS_MAX_AGE_SEC = 300;

/** One line of the service's audit log (never a token, capability or key). */
export type AuthServiceEvent = Record<string, string | number | boolean | undefined>;

/** Options for {@linkcode createExchangeHandler}. */
export interface ExchangeHandlerOptions {
  space: string;
  /** The capability callers present as `Authorization: Bearer <cap>`. */
  cap: string;
  issuer: Pick<UserTokenIssuer, "issuer" | "jwks">;
  bridge: Pick<IdpBridge, "exchange">;
  log?: (event: AuthServiceEvent) => void;
  /** False while the callout cannot answer (its broker connection is down): health is 503. */
  calloutUp?: () => boolean;
  /** `POST /agents`: a user-mode supervisor's requests (lib/auth/agent_bearers.ts). */
  agents?: (req: Request) => Promise<Response>;
}

type Route = (req: Request) => Promise<Response>;

// Request-shape refusals: the caller sent something malformed, not a bad credential.
const SHAPE_CODES = new Set(["actor_bad_name", "bearer_bad_ttl"]);
const EXCHANGE_KEYS = new Set(["idpToken", "actor", "ttlSec"]);

/**
 * Build the request handler of the loopback face. Routes live in a `Map`, so a path such as
 * `/toString` or `/__proto__` can never resolve to an inherited property.
 */
export function createExchangeHandler(
  opts: ExchangeHandlerOptions,
): (req: Request) => Promise<Response> {
  const log = opts.log ?? (() => {});
  const capBytes = new TextEncoder().encode(`Bearer ${opts.cap}`);
  const badCap = new MinuteWindow(BAD_CAP_PER_MIN);
  const failed = new MinuteWindow(FAILED_EXCHANGE_PER_MIN);
  const jwks = (): Promise<Response> =>
    Promise.resolve(
      jsonAnswer(200, opts.issuer.jwks(), { "cache-control": `max-age=${JWKS_MAX_AGE_SEC}` }),
    );
  const routes = new Map<string, Map<string, Route>>([
    ["/health", new Map([["GET", health]])],
    ["/jwks", new Map([["GET", jwks]])],
    ["/exchange", new Map([["POST", exchange]])],
    ...(opts.agents ? [[AGENT_BEARER_PATH, new Map([["POST", opts.agents]])] as const] : []),
  ]);

  function health(): Promise<Response> {
    const up = opts.calloutUp?.() ?? true;
    return Promise.resolve(
      jsonAnswer(up ? 200 : 503, {
        ok: up,
        space: opts.space,
        issuer: opts.issuer.issuer,
        callout: up ? "connected" : "reconnecting",
      }),
    );
  }

  async function exchange(req: Request): Promise<Response> {
    // A browser always sends Origin on a cross-origin POST; the CLI and daemons never do.
    if (req.headers.has("origin")) {
      return refuse(req, 403, "origin_refused", "Browsers may not call the exchange.");
    }
    const auth = new TextEncoder().encode(req.headers.get("authorization") ?? "");
    if (!constantTimeEqual(auth, capBytes)) {
      if (!badCap.take()) {
        return refuse(
          req,
          429,
          "throttled",
          "Too many requests without the capability; wait a minute.",
        );
      }
      return refuse(
        req,
        401,
        "cap_refused",
        "The exchange capability is missing or wrong; read it from auth-service.json.",
      );
    }
    const read = await readExchangeBody(req);
    if ("code" in read) return refuse(req, read.status, read.code, read.error);
    const { doc } = read;
    // The throttle is checked only after a credential fails, so a peer over its budget that
    // presents a valid IdP token still gets its bearer.
    try {
      const out = await opts.bridge.exchange(doc.idpToken, {
        actor: doc.actor as string,
        ...(doc.ttlSec !== undefined ? { ttlSec: doc.ttlSec as number } : {}),
      });
      log({
        event: "exchange",
        outcome: "allow",
        principal: `${out.owner}.${out.actor}`,
        exp: out.exp,
      });
      return jsonAnswer(200, {
        token: out.token,
        owner: out.owner,
        actor: out.actor,
        exp: out.exp,
      });
    } catch (err) {
      if (!isCotalError(err)) {
        log({ event: "exchange", outcome: "error", code: "internal" });
        return jsonAnswer(500, {
          error: "The exchange failed inside the auth service.",
          code: "internal",
        });
      }
      if (SHAPE_CODES.has(err.code)) return refuse(req, 400, err.code, err.message);
      if (!failed.take()) {
        return refuse(req, 429, "throttled", "Too many refused exchanges; wait a minute.");
      }
      return refuse(req, 401, err.code, err.message);
    }
  }

  function refuse(req: Request, status: number, code: string, error: string): Response {
    log({
      event: "http_refused",
      status,
      code,
      method: req.method,
      path: new URL(req.url).pathname.slice(0, 64),
    });
    return jsonAnswer(status, { error, code });
  }

  return async (req) => {
    const path = new URL(req.url).pathname;
    const methods = routes.get(path);
    if (!methods) return jsonAnswer(404, { error: "Not found.", code: "not_found" });
    const route = methods.get(req.method);
    if (!route) {
      await req.body?.cancel().catch(() => {});
      return jsonAnswer(405, {
        error: `Use ${[...methods.keys()].join(", ")} on ${path}.`,
        code: "method_not_allowed",
      }, {
        allow: [...methods.keys()].join(", "),
      });
    }
    return await route(req);
  };
}

/** An exchange request's body, shape-checked: `{idpToken, actor, ttlSec?}`, or why it is refused. */
async function readExchangeBody(
  req: Request,
): Promise<
  { doc: { idpToken: string; actor?: unknown; ttlSec?: number } } | {
    status: number;
    code: string;
    error: string;
  }
> {
  const no = (status: number, code: string, error: string) => ({ status, code, error });
  const type = (req.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json") {
    return no(415, "unsupported_media_type", "The exchange takes an application/json body.");
  }
  const body = await readCapped(req, MAX_EXCHANGE_BODY_BYTES);
  if (body === undefined) {
    return no(413, "body_too_large", `The exchange body is over ${MAX_EXCHANGE_BODY_BYTES} bytes.`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    return no(400, "bad_json", "The exchange body is not JSON.");
  }
  if (!isPlainObject(doc)) {
    return no(400, "bad_request", "The exchange body is not a JSON object.");
  }
  if ("actorToken" in doc) {
    return no(
      400,
      "bad_request",
      "This auth service exchanges IdP tokens only ({idpToken, actor, ttlSec?}); agent secrets are not accepted.",
    );
  }
  const extra = Object.keys(doc).find((k) => !EXCHANGE_KEYS.has(k));
  if (extra !== undefined || typeof doc.idpToken !== "string") {
    return no(400, "bad_request", "The exchange body must be {idpToken, actor, ttlSec?}.");
  }
  if (doc.ttlSec !== undefined && typeof doc.ttlSec !== "number") {
    return no(400, "bearer_bad_ttl", "ttlSec must be a number of seconds.");
  }
  return { doc: doc as { idpToken: string; actor?: unknown; ttlSec?: number } };
}

function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) diff |= (a[i] ?? 0) ^ b[i];
  return diff === 0;
}
