/**
 * The trust authorities: one operator + system account per broker, one data account (with a
 * signing key) per space, and the operations that compose, strip and rotate them.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import {
  type AccountClaims,
  createAccount,
  createOperator,
  decodeJwt,
  decodeJwtUnverified,
  DEFAULT_ACCOUNT_LIMITS,
  encodeJwt,
  isPublicKey,
  type JetStreamLimits,
  NO_STORAGE_ACCOUNT_LIMITS,
  type OperatorLimits,
  publicKeyFromSeed,
  seedSigner,
  type Signer,
} from "../nats/mod.ts";
import { token } from "./space_token.ts";
import type { BrokerAuth, SpaceAccountAuth, SpaceAuth } from "./types.ts";

/** The system account: unlimited connections, JetStream off (it must never hold streams). */
const SYS_LIMITS: Readonly<OperatorLimits> = NO_STORAGE_ACCOUNT_LIMITS;

const MIB = 1024 * 1024;

/**
 * What one space may store on the broker, signed into its account JWT (frozen: nothing an
 * agent or a request sends reaches them). One agent can then fill at most its own space's
 * share, never the broker's disk: the space's streams total about 4 GiB of caps, the KV
 * buckets a few hundred MiB (docs/SPEC.md, "Limits").
 */
export const SPACE_JETSTREAM_LIMITS: Readonly<JetStreamLimits> = Object.freeze({
  mem_storage: 256 * MIB,
  // The streams' own caps total about 4 GiB (docs/SPEC.md §4-5), with room for the buckets.
  disk_storage: 4608 * MIB,
  streams: 32,
  // Per stream: every agent's DM/DLV durables and history consumers fit with room to spare.
  consumer: 1024,
  max_ack_pending: -1,
  mem_max_stream_bytes: 64 * MIB,
  disk_max_stream_bytes: 2 * 1024 * MIB,
});

/** The connections one space's account may hold at once (frozen, server-side). */
export const SPACE_MAX_CONNECTIONS = 4096;

/**
 * A data account: at most {@linkcode SPACE_MAX_CONNECTIONS} connections, subjects unlimited, JetStream on within
 * {@linkcode SPACE_JETSTREAM_LIMITS}. Without explicit limits a JWT account defaults to zero
 * connections and no JetStream.
 */
const DATA_LIMITS: Readonly<OperatorLimits> = Object.freeze({
  ...DEFAULT_ACCOUNT_LIMITS,
  ...SPACE_JETSTREAM_LIMITS,
  // A cred carries no connection limit of its own, so one member could open the broker's
  // connections until every space was refused (red team 20a: 400 of 400 accepted on one cred).
  // A space holds at most this many: the other spaces keep theirs.
  conn: SPACE_MAX_CONNECTIONS,
});

/** Whether an account JWT already carries this build's data-account limits. */
export function hasSpaceLimits(accountJwt: string): boolean {
  const limits = (decodeJwtUnverified(accountJwt).nats as { limits?: Record<string, unknown> })
    .limits ?? {};
  return Object.entries(DATA_LIMITS).every(([k, v]) => limits[k] === v);
}

/** The operator JWT name for a broker label. */
export function operatorName(label: string): string {
  return `cotal-${token(label)}`;
}

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

/** The operator's self-signed JWT naming `sysPub` its system account, and that account's JWT. */
async function operatorAndSysJwts(
  opSigner: Signer,
  opPub: string,
  name: string,
  sysPub: string,
): Promise<{ operatorJwt: string; sysJwt: string }> {
  const operatorJwt = await encodeJwt({
    sub: opPub,
    name,
    nats: { type: "operator", system_account: sysPub },
  }, opSigner);
  const sysJwt = await encodeJwt({
    sub: sysPub,
    name: "SYS",
    nats: { type: "account", limits: { ...SYS_LIMITS } },
  }, opSigner);
  return { operatorJwt, sysJwt };
}

/**
 * Mints broker trust: a fresh operator (self-signed, `system_account` set) and system account.
 * The SYS seed stays in memory (`sys.signingSeed`) so `$SYS` creds can be minted now; the
 * records never persist it.
 */
export async function createBrokerAuth(label: string): Promise<BrokerAuth> {
  if (typeof label !== "string" || label.trim() === "") {
    refuse("invalid_label", "The broker label is empty; pass a name such as the space or host.");
  }
  const op = await createOperator();
  const sys = await createAccount();
  const opSigner = await seedSigner(op.seed);
  const { operatorJwt, sysJwt } = await operatorAndSysJwts(
    opSigner,
    op.publicKey,
    operatorName(label),
    sys.publicKey,
  );
  return {
    operator: { pub: op.publicKey, seed: op.seed, jwt: operatorJwt },
    sys: { pub: sys.publicKey, jwt: sysJwt, signingSeed: sys.seed },
    gen: 0,
  };
}

async function operatorSigner(broker: Pick<BrokerAuth, "operator">) {
  if (!broker?.operator?.seed) {
    refuse(
      "missing_operator_seed",
      "This trust bundle has no operator seed (it is stripped or a public record); load the full broker.json.",
    );
  }
  const signer = await seedSigner(broker.operator.seed);
  if (signer.publicKey !== broker.operator.pub) {
    refuse(
      "operator_mismatch",
      "The operator seed does not match the operator public key in this bundle; the broker record is corrupt.",
    );
  }
  return signer;
}

/**
 * Signs a new data account for `space` under `broker`'s operator: named `token(space)`, one
 * signing key (which signs every user of the space), JetStream enabled.
 */
export async function createSpaceAccountAuth(
  broker: Pick<BrokerAuth, "operator">,
  space: string,
): Promise<SpaceAccountAuth> {
  if (typeof space !== "string" || space.trim() === "") {
    refuse("invalid_space", "The space name is empty; pass the space to create an account for.");
  }
  const signer = await operatorSigner(broker);
  const account = await createAccount();
  const signing = await createAccount();
  const jwt = await encodeJwt({
    sub: account.publicKey,
    name: token(space),
    nats: { type: "account", limits: { ...DATA_LIMITS }, signing_keys: [signing.publicKey] },
  }, signer);
  return {
    space,
    account: {
      pub: account.publicKey,
      seed: account.seed,
      jwt,
      signingSeed: signing.seed,
      signingPub: signing.publicKey,
    },
  };
}

/**
 * Re-issues the system account of broker trust: a new SYS key, the operator JWT re-signed to
 * name it. The operator key and every data account stay, so space creds are untouched; only
 * `$SYS` creds (membership observer, connection evictor) must be minted again, which the
 * returned bundle can do while its SYS seed is in memory. `gen` goes up by one.
 */
export async function rotateSystemAccount(broker: BrokerAuth): Promise<BrokerAuth> {
  const opSigner = await operatorSigner(broker);
  const previous = await decodeJwt(broker.operator.jwt, { type: "operator", ignoreTimes: true });
  const sys = await createAccount();
  const { operatorJwt, sysJwt } = await operatorAndSysJwts(
    opSigner,
    broker.operator.pub,
    previous.name ?? operatorName("cotal"),
    sys.publicKey,
  );
  return {
    operator: { ...broker.operator, jwt: operatorJwt },
    sys: { pub: sys.publicKey, jwt: sysJwt, signingSeed: sys.seed },
    gen: broker.gen + 1,
  };
}

/**
 * Re-signs an existing space account under `broker`'s operator, keeping its keys: the account
 * public key, its seed and its signing key stay, so every credential its signing key issued
 * keeps working on the new broker. This is how a backed-up space is restored into a broker with
 * another operator. The account's name, limits and signing keys are re-stated, not copied.
 */
export async function adoptSpaceAccount(
  broker: Pick<BrokerAuth, "operator">,
  account: SpaceAccountAuth,
): Promise<SpaceAccountAuth> {
  const a = account?.account;
  if (!a || !isPublicKey(a.pub, "account") || !isPublicKey(a.signingPub, "account")) {
    refuse("invalid_account", "The account record to adopt is incomplete; pass a full record.");
  }
  if (
    await publicKeyFromSeed(a.seed) !== a.pub ||
    await publicKeyFromSeed(a.signingSeed) !== a.signingPub
  ) {
    refuse(
      "invalid_account",
      "The account record's seeds do not match its public keys; the record is corrupt.",
    );
  }
  const signer = await operatorSigner(broker);
  const jwt = await encodeJwt({
    sub: a.pub,
    name: token(account.space),
    nats: { type: "account", limits: { ...DATA_LIMITS }, signing_keys: [a.signingPub] },
  }, signer);
  return { space: account.space, account: { ...a, jwt } };
}

/**
 * Merges broker trust and one space account into the {@linkcode SpaceAuth} read view,
 * refusing an account that this operator did not sign.
 */
export function composeSpaceAuth(broker: BrokerAuth, account: SpaceAccountAuth): SpaceAuth {
  const iss = decodeJwtUnverified(account.account.jwt).iss;
  if (iss !== broker.operator.pub) {
    refuse(
      "foreign_account",
      `The account of space ${
        JSON.stringify(account.space)
      } was signed by another operator; use the broker trust it was created under.`,
    );
  }
  return {
    space: account.space,
    operator: { ...broker.operator },
    sys: { ...broker.sys },
    account: { ...account.account },
    gen: broker.gen,
  };
}

/** The one-space convenience: new broker trust plus one data account, composed. */
export async function createSpaceAuth(space: string): Promise<SpaceAuth> {
  const broker = await createBrokerAuth(space);
  return composeSpaceAuth(broker, await createSpaceAccountAuth(broker, space));
}

/**
 * The mint-only bundle: keeps `space`, `account.pub` and `account.signingSeed`, blanks every
 * other seed and JWT. It still holds the signing seed, so it can mint any profile in the space.
 */
export function stripSpaceAuth(auth: SpaceAuth): SpaceAuth {
  return {
    space: auth.space,
    operator: { pub: "", seed: "", jwt: "" },
    sys: { pub: "", jwt: "" },
    account: {
      pub: auth.account.pub,
      seed: "",
      jwt: "",
      signingSeed: auth.account.signingSeed,
      signingPub: "",
    },
    gen: 0,
  };
}

/**
 * Replaces the space's signing key: the account JWT is re-signed with `signing_keys: [new]`,
 * so once the broker reloads the re-rendered config every cred signed by the old key is
 * refused. Needs the operator and account seeds (a stripped bundle is refused). SYS is untouched.
 */
export async function rotateDataAccountSigningKey(auth: SpaceAuth): Promise<SpaceAuth> {
  const signing = await createAccount();
  const jwt = await accountJwtWithSigningKey(auth, signing.publicKey);
  return {
    ...auth,
    operator: { ...auth.operator },
    sys: { ...auth.sys },
    account: { ...auth.account, jwt, signingSeed: signing.seed, signingPub: signing.publicKey },
  };
}

/**
 * Makes `signingPub` the space's only signing key, a key whose seed this process never sees (a
 * KMS or Vault-transit ed25519 key): the account JWT is re-signed with `signing_keys:
 * [signingPub]`, and the bundle returned holds no signing seed, so users are signed through
 * `keySigner` with that key. As with {@linkcode rotateDataAccountSigningKey}, creds signed by
 * the old key are refused once the broker reloads the re-rendered config.
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const kms = await createAccount(); // stands in for the KMS key's public half
 * const next = await setAccountSigningKey(auth, kms.publicKey);
 * ```
 */
export async function setAccountSigningKey(
  auth: SpaceAuth,
  signingPub: string,
): Promise<SpaceAuth> {
  if (!isPublicKey(signingPub, "account")) {
    refuse("invalid_signing_key", "The signing key is not an account public key (A…).");
  }
  const jwt = await accountJwtWithSigningKey(auth, signingPub);
  return {
    ...auth,
    operator: { ...auth.operator },
    sys: { ...auth.sys },
    account: { ...auth.account, jwt, signingSeed: "", signingPub },
  };
}

/** The account JWT re-signed by the operator with `signing_keys: [signingPub]`. */
async function accountJwtWithSigningKey(auth: SpaceAuth, signingPub: string): Promise<string> {
  if (!auth.account.seed || !auth.account.jwt) {
    refuse(
      "stripped_bundle",
      "Changing the signing key needs the full trust bundle (operator and account seeds); a stripped bundle cannot re-sign the account.",
    );
  }
  const signer = await operatorSigner(auth);
  if (await publicKeyFromSeed(auth.account.seed) !== auth.account.pub) {
    refuse("account_mismatch", "The account seed does not match the account public key.");
  }
  const old = await decodeJwt(auth.account.jwt, { type: "account" }) as AccountClaims;
  if (old.iss !== auth.operator.pub || old.sub !== auth.account.pub) {
    refuse(
      "foreign_account",
      "The account JWT was not issued by this operator for this account; the bundle is corrupt.",
    );
  }
  const { version: _v, ...nats } = old.nats;
  return await encodeJwt({
    sub: old.sub,
    name: old.name,
    nats: { ...nats, signing_keys: [signingPub] },
  }, signer);
}
