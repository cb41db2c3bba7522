/**
 * The persisted trust records (`auth/broker.json`, `auth/account.<hex>.json`) and the chain
 * validator. The SYS seed is stripped on every write; parse errors never echo stored bytes.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import {
  type AccountClaims,
  decodeJwt,
  isPublicKey,
  type OperatorClaims,
  parseSeed,
  publicKeyFromSeed,
} from "../nats/mod.ts";
import { token } from "./space_token.ts";
import type { BrokerAuth, SpaceAccountAuth, SpaceAuth } from "./types.ts";

function corrupt(what: string, why: string): never {
  throw new CotalError(
    "corrupt_trust_record",
    `The ${what} record ${why}; restore it from backup.`,
  );
}

function field(obj: unknown, key: string, what: string): string {
  const v = (obj as Record<string, unknown> | undefined)?.[key];
  if (typeof v !== "string" || v === "") corrupt(what, `lacks ${key}`);
  return v;
}

function parseJson(text: string, what: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    corrupt(what, "is not valid JSON");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    corrupt(what, "is not a JSON object");
  }
  return v as Record<string, unknown>;
}

/** The `auth/broker.json` text: operator seed and JWT, SYS public key and JWT, generation. */
export function serializeBrokerAuth(broker: BrokerAuth): string {
  const record = {
    operator: { seed: broker.operator.seed, jwt: broker.operator.jwt },
    // The SYS seed is deliberately absent: $SYS creds are minted only at (re)provisioning.
    sys: { pub: broker.sys.pub, jwt: broker.sys.jwt },
    gen: broker.gen,
  };
  return JSON.stringify(record, null, 2) + "\n";
}

/** The `auth/account.<hex>.json` text: the space and its data account keys. */
export function serializeSpaceAccountAuth(account: SpaceAccountAuth): string {
  const a = account.account;
  const record = {
    space: account.space,
    account: {
      pub: a.pub,
      seed: a.seed,
      jwt: a.jwt,
      signingSeed: a.signingSeed,
      signingPub: a.signingPub,
    },
  };
  return JSON.stringify(record, null, 2) + "\n";
}

/** Parses and verifies `auth/broker.json` (self-signed operator, operator-signed SYS, generation). */
export async function parseBrokerAuth(text: string): Promise<BrokerAuth> {
  const what = "broker trust";
  const r = parseJson(text, what);
  const seed = field(r.operator, "seed", what);
  const jwt = field(r.operator, "jwt", what);
  const sysPub = field(r.sys, "pub", what);
  const sysJwt = field(r.sys, "jwt", what);
  let gen = 0;
  if ("gen" in r) {
    if (typeof r.gen !== "number" || !Number.isSafeInteger(r.gen) || r.gen < 0) {
      corrupt(what, "has a generation that is not a non-negative integer");
    }
    gen = r.gen;
  }
  if (safeKind(seed) !== "operator") {
    corrupt(what, "holds an operator seed that is not an operator seed");
  }
  const broker: BrokerAuth = {
    operator: { pub: await publicKeyFromSeed(seed), seed, jwt },
    sys: { pub: sysPub, jwt: sysJwt },
    gen,
  };
  await validateBrokerChain(broker, what);
  return broker;
}

/**
 * Parses and verifies `auth/account.<hex>.json`. With `expectedSpace`, a record holding another
 * space is refused (by its label and by the account JWT's name).
 */
export async function parseSpaceAccountAuth(
  text: string,
  expectedSpace?: string,
): Promise<SpaceAccountAuth> {
  const what = "space account";
  const r = parseJson(text, what);
  if (typeof r.space !== "string" || r.space === "") corrupt(what, "lacks space");
  const space = r.space;
  if (expectedSpace !== undefined && space !== expectedSpace) {
    throw new CotalError(
      "wrong_space",
      `The account record holds space ${JSON.stringify(space)}, not ${
        JSON.stringify(expectedSpace)
      }; it was stored under the wrong key.`,
    );
  }
  const a = r.account;
  const account = {
    pub: field(a, "pub", what),
    seed: field(a, "seed", what),
    jwt: field(a, "jwt", what),
    signingSeed: field(a, "signingSeed", what),
    signingPub: field(a, "signingPub", what),
  };
  const rec: SpaceAccountAuth = { space, account };
  await validateAccountChain(rec, undefined, what);
  return rec;
}

function safeKind(seed: string): string | undefined {
  try {
    return parseSeed(seed).kind;
  } catch {
    return undefined;
  }
}

async function verified<T extends "operator" | "account">(
  jwt: string,
  type: T,
  what: string,
): Promise<T extends "operator" ? OperatorClaims : AccountClaims> {
  try {
    return await decodeJwt(jwt, { type }) as T extends "operator" ? OperatorClaims : AccountClaims;
  } catch (err) {
    throw new CotalError(
      "corrupt_trust_record",
      `The ${what} record's ${type} JWT does not verify (${
        (err as CotalError).code ?? "invalid"
      }); restore it from backup.`,
    );
  }
}

async function validateBrokerChain(b: BrokerAuth, what: string): Promise<void> {
  const op = await verified(b.operator.jwt, "operator", what);
  if (op.iss !== b.operator.pub || op.sub !== b.operator.pub) {
    corrupt(what, "has an operator JWT that is not self-signed by its operator seed");
  }
  if (op.nats.system_account !== b.sys.pub) corrupt(what, "names a different system account");
  const sys = await verified(b.sys.jwt, "account", what);
  if (sys.iss !== b.operator.pub || sys.sub !== b.sys.pub) {
    corrupt(what, "has a system account JWT not signed by its operator");
  }
  if (b.sys.signingSeed !== undefined && await publicKeyFromSeed(b.sys.signingSeed) !== b.sys.pub) {
    corrupt(what, "has a SYS seed that does not match the system account");
  }
}

async function validateAccountChain(
  a: SpaceAccountAuth,
  operatorPub: string | undefined,
  what: string,
): Promise<void> {
  const k = a.account;
  if (!isPublicKey(k.pub, "account") || !isPublicKey(k.signingPub, "account")) {
    corrupt(what, "holds a public key that is not an account key");
  }
  if (safeKind(k.seed) !== "account" || await publicKeyFromSeed(k.seed) !== k.pub) {
    corrupt(what, "holds an account seed that does not match its public key");
  }
  if (
    safeKind(k.signingSeed) !== "account" || await publicKeyFromSeed(k.signingSeed) !== k.signingPub
  ) {
    corrupt(what, "holds a signing seed that does not match its signing key");
  }
  const claims = await verified(k.jwt, "account", what);
  if (claims.sub !== k.pub) corrupt(what, "has an account JWT for another account");
  if (operatorPub !== undefined && claims.iss !== operatorPub) {
    throw new CotalError(
      "foreign_account",
      `The account of space ${
        JSON.stringify(a.space)
      } was signed by another operator; use the broker trust it was created under.`,
    );
  }
  // The name is signed: a chain relabelled with another space's label is caught here.
  if (claims.name !== token(a.space)) {
    throw new CotalError(
      "wrong_space",
      `The account JWT is named ${JSON.stringify(claims.name)}, not the wire token of space ${
        JSON.stringify(a.space)
      }; the bundle was relabelled.`,
    );
  }
  const keys = (claims.nats.signing_keys ?? []).map((s) => typeof s === "string" ? s : s.key);
  if (!keys.includes(k.signingPub)) {
    throw new CotalError(
      "stale_signing_key",
      "The account JWT no longer lists this signing key; load the record written by the last rotation.",
    );
  }
}

/**
 * Verifies a full {@linkcode SpaceAuth} chain cryptographically: operator self-signature and
 * seed, SYS and account JWTs signed by that operator, account and signing seeds matching their
 * keys, the signing key listed, and (with `expectedSpace`) the signed account name. A stripped
 * bundle is refused: it carries nothing to verify against.
 */
export async function validateSpaceAuth(auth: SpaceAuth, expectedSpace?: string): Promise<void> {
  const what = "space trust";
  if (!auth?.operator?.seed || !auth.account?.jwt) {
    throw new CotalError(
      "stripped_bundle",
      "A stripped signer bundle has no chain to validate; validate the full trust records instead.",
    );
  }
  if (expectedSpace !== undefined && auth.space !== expectedSpace) {
    throw new CotalError(
      "wrong_space",
      `The trust bundle is for space ${JSON.stringify(auth.space)}, not ${
        JSON.stringify(expectedSpace)
      }.`,
    );
  }
  if (
    safeKind(auth.operator.seed) !== "operator" ||
    await publicKeyFromSeed(auth.operator.seed) !== auth.operator.pub
  ) {
    corrupt(what, "holds an operator seed that does not match its operator key");
  }
  await validateBrokerChain(auth, what);
  await validateAccountChain({ space: auth.space, account: auth.account }, auth.operator.pub, what);
}
