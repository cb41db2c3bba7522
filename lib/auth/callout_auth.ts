/**
 * `createCalloutAuth`: the per-space auth-callout account. Its operator-signed JWT carries
 * `authorization { auth_users, allowed_accounts, xkey }`, which is the whole callout
 * configuration (no server-config block): clients presenting its sentinel creds are sent to
 * the callout, and the callout may place them only into the space's data account.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import {
  createAccount,
  createCurve,
  createUser,
  encodeJwt,
  isPublicKey,
  NO_STORAGE_ACCOUNT_LIMITS,
  type OperatorLimits,
  renderCreds,
  seedSigner,
  type Signer,
} from "../nats/mod.ts";
import { token } from "../trust/mod.ts";

/** The subject nats-server sends authorization requests to (ADR-26). */
export const AUTH_CALLOUT_SUBJECT = "$SYS.REQ.USER.AUTH";

/** The callout account of one space, with its two users and its xkey. Every seed is secret. */
export interface CalloutAuth {
  /** The space this callout serves. */
  space: string;
  /** The data account (`A…`) the callout may place users into. */
  dataAccount: string;
  /** The space account the admitted users belong to. */
  account: {
    pub: string;
    seed: string;
    /** Signs the callout's users and every authorization response. */
    signingSeed: string;
    signingPub: string;
    /** Operator-signed; preload it with `serverConfig(..., { extraAccounts })`. */
    jwt: string;
  };
  /** The responder's creds: subscribes the request subject, can never publish to it. */
  calloutCreds: string;
  /** Deny-all creds every user-mode client presents with its bearer. */
  sentinelCreds: string;
  /** The curve key requests are sealed to (`SX…` seed, `X…` public key). */
  xkey: { seed: string; pub: string };
}

/** What {@linkcode createCalloutAuth} needs. */
export interface CreateCalloutAuthOptions {
  /** The space this callout serves. */
  space: string;
  /** The broker's operator seed (`SO…`): it signs the callout account JWT. */
  operatorSeed: string;
  /** The space's data account public key (`A…`). */
  accountPub: string;
}

// No JetStream (mem/disk 0): the callout account holds no streams; everything else unlimited.
const CALLOUT_LIMITS: Readonly<OperatorLimits> = NO_STORAGE_ACCOUNT_LIMITS;

/** The account JWT name of a space's callout account. */
export function calloutAccountName(space: string): string {
  return `AUTH_${token(space)}`;
}

/**
 * Create the callout account of `space`: a fresh account and signing key, the callout service
 * user (the only `auth_users` entry; `pub` allows everything except the request subject, so a
 * leaked callout cred cannot inject forged requests), the sentinel user (denies every publish
 * and subscribe), and a fresh xkey.
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const callout = await createCalloutAuth({
 *   space: "demo", operatorSeed: auth.operator.seed, accountPub: auth.account.pub,
 * });
 * const conf = serverConfig(auth, [auth], { storeDir, extraAccounts: [callout.account] });
 * ```
 */
export async function createCalloutAuth(opts: CreateCalloutAuthOptions): Promise<CalloutAuth> {
  const space = opts?.space;
  if (typeof space !== "string" || space.trim() === "") {
    throw new CotalError("callout_bad_space", "The callout account needs a non-empty space name.");
  }
  if (!isPublicKey(opts.accountPub, "account")) {
    throw new CotalError(
      "callout_bad_account",
      "The data account key is not an account public key (A…); pass the space's account.pub.",
    );
  }
  let operator: Signer;
  try {
    operator = await seedSigner(opts.operatorSeed);
  } catch (cause) {
    throw new CotalError(
      "callout_bad_operator",
      "The operator seed is missing or not a seed; pass the broker's operator seed (SO…).",
      { cause },
    );
  }
  if (!isPublicKey(operator.publicKey, "operator")) {
    throw new CotalError(
      "callout_bad_operator",
      "The seed that would sign the callout account is not an operator seed (SO…).",
    );
  }
  const account = await createAccount();
  const signing = await createAccount();
  const xkey = await createCurve();
  const calloutUser = await createUser();
  const sentinelUser = await createUser();
  const jwt = await encodeJwt({
    sub: account.publicKey,
    name: calloutAccountName(space),
    nats: {
      type: "account",
      limits: { ...CALLOUT_LIMITS },
      signing_keys: [signing.publicKey],
      authorization: {
        auth_users: [calloutUser.publicKey],
        allowed_accounts: [opts.accountPub],
        xkey: xkey.publicKey,
      },
    },
  }, operator);
  const signer = await seedSigner(signing.seed);
  const calloutJwt = await encodeJwt({
    sub: calloutUser.publicKey,
    name: `cotal-auth-callout-${token(space)}`,
    nats: {
      type: "user",
      issuer_account: account.publicKey,
      pub: { allow: [">"], deny: [AUTH_CALLOUT_SUBJECT] },
      sub: { allow: [AUTH_CALLOUT_SUBJECT] },
    },
  }, signer);
  const sentinelJwt = await encodeJwt({
    sub: sentinelUser.publicKey,
    name: `cotal-sentinel-${token(space)}`,
    nats: {
      type: "user",
      issuer_account: account.publicKey,
      pub: { deny: [">"] },
      sub: { deny: [">"] },
    },
  }, signer);
  return {
    space,
    dataAccount: opts.accountPub,
    account: {
      pub: account.publicKey,
      seed: account.seed,
      signingSeed: signing.seed,
      signingPub: signing.publicKey,
      jwt,
    },
    calloutCreds: await renderCreds(calloutJwt, calloutUser.seed),
    sentinelCreds: await renderCreds(sentinelJwt, sentinelUser.seed),
    xkey: { seed: xkey.seed, pub: xkey.publicKey },
  };
}
