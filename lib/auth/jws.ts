/**
 * Strict compact-JWS verification shared by the bearer validator and the IdP bridge. The
 * header is parsed and judged by us before jose sees the token: key-carrying headers are
 * refused outright (never used, never ignored), `alg` must be on the caller's allow-list, and
 * the key comes only from the caller's resolver.
 *
 * @module
 */

import { base64url, compactVerify } from "jose";
import { CotalError } from "../errors.ts";
import type { TokenRefusalReason } from "../error_codes/mod.ts";
import { MAX_TOKEN_LENGTH } from "./constants.ts";
import { isPlainObject, type JwsAlgorithm, type KeyResolver } from "./jwks.ts";

/** How a verifier names its refusals: codes are `<prefix>_<reason>`, messages name `what`. */
export interface RefusalLabel {
  prefix: "bearer" | "idp";
  what: string;
}

/** Options for {@linkcode verifyStrictJws}. */
export interface StrictJwsOptions extends RefusalLabel {
  algorithms: readonly JwsAlgorithm[];
  resolver: KeyResolver;
  /** When set, a header member outside `alg`, `kid`, `typ` is refused (our own bearers). */
  closedHeader?: boolean;
}

/** A signature-verified token: its header, its decoded payload object, and the key used. */
export interface VerifiedJws {
  header: Record<string, unknown>;
  payload: Record<string, unknown>;
  alg: JwsAlgorithm;
  kid: string;
}

// Headers that carry or point at a key: honouring any of them lets the token choose its key.
const KEY_HEADERS = ["jwk", "jku", "x5u", "x5c"];
const CLOSED_HEADER = new Set(["alg", "kid", "typ"]);
const B64URL_RE = /^[A-Za-z0-9_-]+$/;

/** Build the refusal for `label` with `reason`; the message never echoes token bytes. */
export function refuse(
  label: RefusalLabel,
  reason: TokenRefusalReason,
  message: string,
): CotalError {
  return new CotalError(`${label.prefix}_${reason}`, message);
}

/**
 * Verify a compact JWS strictly and return its header and payload. Throws a CotalError coded
 * `<prefix>_malformed`, `_embedded_key`, `_crit_header`, `_bad_header`, `_alg_refused`,
 * `_unknown_kid` or `_bad_signature`. Claims are not judged here.
 */
export async function verifyStrictJws(
  token: unknown,
  opts: StrictJwsOptions,
): Promise<VerifiedJws> {
  const { what } = opts;
  if (typeof token !== "string" || token.length === 0 || token.length > MAX_TOKEN_LENGTH) {
    throw refuse(
      opts,
      "malformed",
      `The ${what} is empty, not a string or longer than ${MAX_TOKEN_LENGTH} characters; ` +
        "present the compact token as issued.",
    );
  }
  const parts = token.split(".");
  // An empty signature part is let through here so `alg: none` is refused by name below.
  const shaped = parts.length === 3 && B64URL_RE.test(parts[0]) && B64URL_RE.test(parts[1]) &&
    (parts[2] === "" || B64URL_RE.test(parts[2]));
  if (!shaped) {
    throw refuse(
      opts,
      "malformed",
      `The ${what} is not a compact JWS (three base64url parts); present the token as issued.`,
    );
  }
  const header = decodeJsonObject(parts[0]);
  if (!header) {
    throw refuse(opts, "malformed", `The ${what} header is not a JSON object; re-issue the token.`);
  }
  const keyHeader = KEY_HEADERS.find((h) => h in header);
  if (keyHeader) {
    throw refuse(
      opts,
      "embedded_key",
      `The ${what} carries a "${keyHeader}" header; keys come only from the pinned JWKS, so ` +
        "a token that names its own key is refused.",
    );
  }
  if ("crit" in header || "b64" in header) {
    throw refuse(
      opts,
      "crit_header",
      `The ${what} carries a "crit" or "b64" header; Cotal understands no JWS extensions, so ` +
        "re-issue it without them.",
    );
  }
  if (opts.closedHeader) {
    const extra = Object.keys(header).find((k) => !CLOSED_HEADER.has(k));
    if (extra) {
      throw refuse(
        opts,
        "bad_header",
        `The ${what} header has the unexpected member ${JSON.stringify(extra.slice(0, 40))}; ` +
          "only alg, kid and typ are allowed.",
      );
    }
  }
  const alg = header.alg;
  if (typeof alg !== "string" || !(opts.algorithms as readonly string[]).includes(alg)) {
    throw refuse(
      opts,
      "alg_refused",
      `The ${what} algorithm ${
        typeof alg === "string" ? JSON.stringify(alg.slice(0, 20)) : "(missing)"
      } ` +
        `is refused; only ${opts.algorithms.join(", ")} are accepted (never none or HS*).`,
    );
  }
  const kid = header.kid;
  if (typeof kid !== "string" || kid === "" || kid.length > 256) {
    throw refuse(
      opts,
      "unknown_kid",
      `The ${what} header has no usable "kid"; the signer must name its key from the pinned JWKS.`,
    );
  }
  const key = await opts.resolver(kid, alg as JwsAlgorithm);
  if (!key) {
    throw refuse(
      opts,
      "unknown_kid",
      `The ${what} is signed with key ${JSON.stringify(kid.slice(0, 64))}, which is not in the ` +
        `pinned JWKS for ${alg}; re-issue it, or re-pin the key set if the signer rotated.`,
    );
  }
  let payloadBytes: Uint8Array;
  try {
    ({ payload: payloadBytes } = await compactVerify(token, key, { algorithms: [alg] }));
  } catch {
    throw refuse(
      opts,
      "bad_signature",
      `The ${what} signature does not verify against its pinned key; it was altered or forged.`,
    );
  }
  const payload = parseJsonObject(payloadBytes);
  if (!payload) {
    throw refuse(
      opts,
      "malformed",
      `The ${what} payload is not a JSON object; re-issue the token.`,
    );
  }
  return { header, payload, alg: alg as JwsAlgorithm, kid };
}

function decodeJsonObject(part: string): Record<string, unknown> | undefined {
  try {
    return parseJsonObject(base64url.decode(part));
  } catch {
    return undefined;
  }
}

function parseJsonObject(bytes: Uint8Array): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    return isPlainObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
