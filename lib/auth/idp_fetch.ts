/**
 * Network reads from an IdP: OIDC discovery and its JWKS. Every read has a timeout and a size
 * cap, follows no redirect (a redirect would move the pin), and goes only to an `https:` URL
 * or plain `http:` on loopback.
 *
 * @module
 */

import { concatBytes } from "../bytes.ts";
import { CotalError } from "../errors.ts";
import { DEFAULT_IDP_FETCH_TIMEOUT_MS, MAX_JWKS_BYTES } from "./constants.ts";
import { isPlainObject } from "./jwks.ts";

/** Options for one IdP read. */
export interface IdpFetchOptions {
  /** Milliseconds for the whole request, body included; default 10 000, at most 30 000. */
  timeoutMs?: number;
}

/** What OIDC discovery pins: the issuer (checked to be exactly the one asked for) and its JWKS. */
export interface DiscoveredIdp {
  issuer: string;
  jwksUrl: string;
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);
const MAX_TIMEOUT_MS = 30_000;

/**
 * Check a URL Cotal will fetch IdP material from and return it normalised (trailing slashes
 * dropped). Refuses (`idp_url_refused`) anything but `https:` or loopback `http:`, and any
 * userinfo (the `https://real@evil/` spoof), query or fragment.
 */
export function checkIdpUrl(raw: string, what = "IdP URL"): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw urlRefused(what, "is not an absolute URL");
  }
  if (url.username !== "" || url.password !== "" || raw.includes("@")) {
    throw urlRefused(what, "carries user:pass@ (a host spoof)");
  }
  if (url.search !== "" || url.hash !== "" || raw.includes("?") || raw.includes("#")) {
    throw urlRefused(what, "carries a query or fragment");
  }
  if (url.protocol === "http:" && !LOOPBACK_HOSTS.has(url.hostname)) {
    throw urlRefused(what, "uses http:// on a non-loopback host");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw urlRefused(what, `uses the scheme ${url.protocol}`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

function urlRefused(what: string, why: string): CotalError {
  return new CotalError(
    "idp_url_refused",
    `The ${what} ${why}; use https:// (or http:// on 127.0.0.1, localhost or [::1]) with no ` +
      "credentials, query or fragment.",
  );
}

/**
 * Fetch a JSON object from `url` with a timeout and a byte cap. Throws `idp_fetch_timeout`,
 * `idp_fetch_failed` (network, redirect, non-200, not JSON) or `idp_response_too_large`.
 */
export async function fetchIdpJson(
  url: string,
  opts: IdpFetchOptions & { maxBytes?: number; what?: string } = {},
): Promise<Record<string, unknown>> {
  const what = opts.what ?? "IdP document";
  const timeoutMs = fetchTimeout(opts.timeoutMs);
  const maxBytes = opts.maxBytes ?? MAX_JWKS_BYTES;
  const target = checkIdpUrl(url, `${what} URL`);
  const signal = AbortSignal.timeout(timeoutMs);
  let body: Uint8Array;
  try {
    const res = await fetch(target, {
      redirect: "error",
      signal,
      headers: { accept: "application/json" },
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw failed(what, target, `it answered HTTP ${res.status}`);
    }
    const declared = Number(res.headers.get("content-length") ?? "0");
    if (declared > maxBytes) {
      await res.body?.cancel();
      throw tooLarge(what, target, maxBytes);
    }
    body = await readCapped(res, maxBytes, what, target);
  } catch (err) {
    if (err instanceof CotalError) throw err;
    if (signal.aborted) {
      throw new CotalError(
        "idp_fetch_timeout",
        `Fetching the ${what} from ${target} took longer than ${timeoutMs} ms; check that the ` +
          "IdP is reachable.",
        { cause: err },
      );
    }
    throw failed(what, target, "the request failed (network error or redirect)", err);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw failed(what, target, "its body is not JSON");
  }
  if (!isPlainObject(doc)) throw failed(what, target, "its body is not a JSON object");
  return doc;
}

/**
 * OIDC discovery for a pinned issuer: read `<issuer>/.well-known/openid-configuration`, require
 * its `issuer` to equal `issuer` exactly, and return the `jwks_uri` it names (URL-checked).
 */
export async function discoverIdp(
  issuer: string,
  opts: IdpFetchOptions = {},
): Promise<DiscoveredIdp> {
  const base = checkIdpUrl(issuer, "IdP issuer");
  const doc = await fetchIdpJson(`${base}/.well-known/openid-configuration`, {
    ...opts,
    what: "OIDC discovery document",
  });
  if (doc.issuer !== issuer) {
    throw new CotalError(
      "idp_discovery_mismatch",
      `The discovery document at ${base} names a different issuer than ${
        JSON.stringify(issuer)
      }; ` +
        "pin the issuer string the IdP itself publishes.",
    );
  }
  if (typeof doc.jwks_uri !== "string") {
    throw failed("OIDC discovery document", base, "it has no jwks_uri");
  }
  return { issuer, jwksUrl: checkIdpUrl(doc.jwks_uri, "IdP JWKS URL") };
}

/** Check a timeout option: a bad value is refused, never silently replaced or clamped. */
export function fetchTimeout(ms: number | undefined): number {
  if (ms === undefined) return DEFAULT_IDP_FETCH_TIMEOUT_MS;
  if (!Number.isSafeInteger(ms) || ms <= 0 || ms > MAX_TIMEOUT_MS) {
    throw new CotalError(
      "idp_bad_options",
      `The IdP fetch timeout ${String(ms)} is not an integer in 1..${MAX_TIMEOUT_MS} ms.`,
    );
  }
  return ms;
}

async function readCapped(
  res: Response,
  maxBytes: number,
  what: string,
  target: string,
): Promise<Uint8Array> {
  if (!res.body) return new Uint8Array();
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      throw tooLarge(what, target, maxBytes);
    }
    chunks.push(value);
  }
  return concatBytes(chunks);
}

function failed(what: string, target: string, why: string, cause?: unknown): CotalError {
  return new CotalError(
    "idp_fetch_failed",
    `Could not read the ${what} from ${target}: ${why}; check the pinned IdP URL.`,
    cause === undefined ? undefined : { cause },
  );
}

function tooLarge(what: string, target: string, maxBytes: number): CotalError {
  return new CotalError(
    "idp_response_too_large",
    `The ${what} from ${target} is larger than ${maxBytes} bytes; an IdP key set is far smaller, ` +
      "so check the pinned URL.",
  );
}
