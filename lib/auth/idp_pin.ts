/**
 * The IdP pin of a space: which IdP's tokens the bridge accepts. It is trust configuration,
 * stored through a SecretStore (`space.<hex>/idp.json`) so a hosted composition injects it
 * like everything else. Pinning is create-once: re-pointing a space at another IdP would
 * re-key every owner, so a different pin is refused rather than overwritten.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import { createOnce, FsSecretStore } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { checkIdpUrl } from "./idp_fetch.ts";
import {
  isPlainObject,
  type JsonWebKeySet,
  JWS_ALGORITHMS,
  type JwsAlgorithm,
  parseJwks,
} from "./jwks.ts";
import { idpPinKey } from "./keys.ts";

/** A space's IdP pin: spread it into `createIdpBridge` options. */
export interface IdpPin {
  /** The issuer URL tokens must name. */
  issuer: string;
  /** The audience tokens must carry. */
  audience: string;
  /** Exactly one of `jwksUrl` and `jwks`. */
  jwksUrl?: string;
  /** The issuer's keys, when pinned by value. */
  jwks?: JsonWebKeySet;
  /** The signature algorithms accepted. */
  algorithms?: JwsAlgorithm[];
  /** The `azp` a token must name, when set. */
  authorizedParty?: string;
}

const PIN_KEYS = new Set([
  "issuer",
  "audience",
  "jwksUrl",
  "jwks",
  "algorithms",
  "authorizedParty",
]);

/** A store for the pin: the injected one, or a filesystem store at the caller's state dir. */
export type PinStore = SecretStore | { stateDir: string };

/**
 * Pin `pin` for `space` if the space has none, and return the stored pin. When a pin exists,
 * it must equal `pin` exactly; otherwise `idp_pin_conflict` (remove the record deliberately to
 * migrate a space to another IdP).
 *
 * @example
 * ```ts
 * // Before runAuthService: the pin it verifies IdP tokens against.
 * await ensureIdpPin({ stateDir: userAuthStateDir(findCotalRoot(), "team") }, "team", {
 *   issuer: "https://idp.example", audience: "cotal",
 *   jwksUrl: "https://idp.example/.well-known/jwks.json",
 * });
 * ```
 */
export async function ensureIdpPin(where: PinStore, space: string, pin: IdpPin): Promise<IdpPin> {
  const store = toStore(where);
  const wanted = normalisePin(pin, "idp_pin_invalid");
  const text = JSON.stringify({ ver: 1, ...wanted });
  if (!(await createOnce(store, idpPinKey(space), text))) {
    const existing = await loadIdpPin(store, space);
    if (canonical(existing) !== canonical(wanted)) {
      throw new CotalError(
        "idp_pin_conflict",
        `Space ${JSON.stringify(space)} is already pinned to another IdP configuration; ` +
          "changing it re-keys every owner, so remove the pin record deliberately to migrate.",
      );
    }
    return existing;
  }
  return wanted;
}

/** Load the pin of `space`; refuses an absent (`idp_pin_missing`) or bad one (`idp_pin_malformed`). */
export async function loadIdpPin(where: PinStore, space: string): Promise<IdpPin> {
  const text = await toStore(where).get(idpPinKey(space));
  if (text === undefined) {
    throw new CotalError(
      "idp_pin_missing",
      `Space ${JSON.stringify(space)} has no IdP pin; enable user auth with an IdP first.`,
    );
  }
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch {
    rec = undefined;
  }
  if (!isPlainObject(rec) || rec.ver !== 1) {
    throw new CotalError(
      "idp_pin_malformed",
      `The IdP pin of space ${JSON.stringify(space)} is not a version 1 record; restore it.`,
    );
  }
  const { ver: _ver, ...pin } = rec;
  return normalisePin(pin as unknown as IdpPin, "idp_pin_malformed");
}

function normalisePin(pin: IdpPin, code: CotalErrorCode): IdpPin {
  const bad = (detail: string): never => {
    throw new CotalError(code, `The IdP pin is invalid: ${detail}.`);
  };
  if (!isPlainObject(pin)) bad("it is not an object");
  const extra = Object.keys(pin).find((k) => !PIN_KEYS.has(k));
  if (extra) bad(`unknown field ${JSON.stringify(extra.slice(0, 40))}`);
  for (const name of ["issuer", "audience"] as const) {
    if (typeof pin[name] !== "string" || pin[name] === "" || pin[name].length > 2048) {
      bad(`${name} must be a non-empty string`);
    }
  }
  if ((pin.jwksUrl === undefined) === (pin.jwks === undefined)) {
    bad("exactly one of jwksUrl and jwks is required");
  }
  const out: IdpPin = { issuer: pin.issuer, audience: pin.audience };
  if (pin.algorithms !== undefined) {
    if (
      !Array.isArray(pin.algorithms) || pin.algorithms.length === 0 ||
      !pin.algorithms.every((a) => JWS_ALGORITHMS.includes(a))
    ) bad("algorithms must be a non-empty subset of EdDSA, ES256, RS256");
    out.algorithms = [...new Set(pin.algorithms)].sort();
  }
  if (pin.jwksUrl !== undefined) {
    if (typeof pin.jwksUrl !== "string") bad("jwksUrl must be a string");
    out.jwksUrl = checkIdpUrl(pin.jwksUrl, "IdP JWKS URL");
  } else {
    if (parseJwks(pin.jwks, out.algorithms ?? JWS_ALGORITHMS).size === 0) {
      bad("the pinned JWKS has no signing key usable with the pinned algorithms");
    }
    out.jwks = structuredClone(pin.jwks);
  }
  if (pin.authorizedParty !== undefined) {
    if (typeof pin.authorizedParty !== "string" || pin.authorizedParty === "") {
      bad("authorizedParty must be a non-empty string");
    }
    out.authorizedParty = pin.authorizedParty;
  }
  return out;
}

function canonical(pin: IdpPin): string {
  return JSON.stringify(
    pin,
    (_k, v) => isPlainObject(v) ? Object.fromEntries(Object.entries(v).sort()) : v,
  );
}

function toStore(where: PinStore): SecretStore {
  if (isPlainObject(where) && typeof (where as { stateDir?: unknown }).stateDir === "string") {
    return new FsSecretStore((where as { stateDir: string }).stateDir);
  }
  return where as SecretStore;
}
