/**
 * Shapes of the trust layer: authorities, identities, profiles and mint options.
 *
 * @module
 */

/** A data-account credential profile (each has exact grants and bounded lifetimes). */
export type Profile =
  | "agent"
  | "observer"
  | "admin"
  | "supervisor"
  | "provisioner"
  | "deprovisioner"
  | "delivery"
  | "membership-rw"
  | "purger"
  | "channel-writer"
  | "teardown"
  | "backup"
  | "control-caller"
  | "operator"
  | "probe"
  | "signer";

/** The two system-account (`$SYS`) credential kinds; minted only while the SYS seed is in memory. */
export type SysCredentialKind = "membership-observer" | "connection-evictor";

/** Every credential kind with a lifetime policy. */
export type CredentialKind = Profile | SysCredentialKind;

/** Who a credential speaks for: the two subject tokens that forge-lock its publishes. */
export interface Principal {
  /** The account the agent acts for: `local` (static/dev) or a derived `u_` + 26 base32 chars. */
  readonly owner: string;
  /** The agent's handle under its owner, `[A-Za-z0-9_]{1,64}`. */
  readonly actor: string;
}

/** An nkey user identity: `id` is the public key (`U…`), `seed` its secret (`SU…`). */
export interface Identity {
  /** The user public key (`U…`). */
  readonly id: string;
  /** Its seed (`SU…`): a secret. */
  readonly seed: string;
}

/** An operator: self-signed, one per broker. */
export interface OperatorKeys {
  /** The operator public key (`O…`). */
  pub: string;
  /** Its seed (`SO…`): a secret. */
  seed: string;
  /** Its self-signed operator JWT. */
  jwt: string;
}

/**
 * The system account. `signingSeed` (the SYS account seed, which signs `$SYS` users) exists
 * only in memory during the call that created or rotated it and is never persisted.
 */
export interface SysAccountKeys {
  /** The system account's public key. */
  pub: string;
  /** Its account JWT. */
  jwt: string;
  /** Its signing seed, only while it is in memory (never stored). */
  signingSeed?: string;
}

/** Broker trust: the operator and system account one nats-server trusts. */
export interface BrokerAuth {
  /** The operator. */
  operator: OperatorKeys;
  /** The system account. */
  sys: SysAccountKeys;
  /** Monotonic system-account generation (bumped by a SYS rotation). */
  gen: number;
}

/** A space's data account; `signingSeed` signs every user JWT of the space. */
export interface DataAccountKeys {
  /** The account public key (`A…`). */
  pub: string;
  /** Its seed (`SA…`): a secret. */
  seed: string;
  /** Its account JWT, signed by the operator. */
  jwt: string;
  /** The signing key's seed that signs user JWTs: a secret. */
  signingSeed: string;
  /** The signing key's public key. */
  signingPub: string;
}

/** One space's data account, signed by a broker's operator. */
export interface SpaceAccountAuth {
  /** The space. */
  space: string;
  /** Its data account. */
  account: DataAccountKeys;
}

/**
 * The composed read view of broker trust plus one space account. A stripped bundle
 * ({@linkcode stripSpaceAuth}) keeps only `space`, `account.pub` and `account.signingSeed`,
 * every other secret or JWT is the empty string; it can still mint any profile.
 */
export interface SpaceAuth {
  /** The space. */
  space: string;
  /** The operator. */
  operator: OperatorKeys;
  /** The system account. */
  sys: SysAccountKeys;
  /** The space's data account. */
  account: DataAccountKeys;
  /** The system-account generation (bumped by a SYS rotation). */
  gen: number;
}

/** What a `$SYS` minter needs: broker trust whose SYS seed is still in memory. */
export type SysMintAuth = Pick<BrokerAuth, "sys">;

/** The minimal signer view {@linkcode mintCreds} needs (a full or stripped SpaceAuth). */
export interface MintAuth {
  /** The space. */
  space: string;
  /** The account key and the signing seed that signs user JWTs. */
  account: Pick<DataAccountKeys, "pub" | "signingSeed">;
}

/** Lifetime options shared by every minter; at most one of the two may be given. */
export interface LifetimeOpts {
  /** Seconds from now; a positive integer no larger than the kind's maximum. */
  expiresInSeconds?: number;
  /** Absolute expiry in Unix seconds; in the future and within the kind's maximum. */
  expiresAt?: number;
}

/** Options for {@linkcode mintCreds}. Choose them from server-side constants, never tenant input. */
export interface MintOpts extends LifetimeOpts {
  /** Who the cred speaks for; default `{ owner: "local", actor: <identity public key> }`. */
  principal?: Principal;
  /** Required for `agent`: keys its durables (`dm_`, `dlv_`, `chathist_`). */
  lifecycleUid?: string;
  /** `agent`: channels it may read (live and history). An empty list means none. */
  allowSubscribe?: readonly string[];
  /** `agent`: concrete channels it may post to; default-deny. */
  allowPublish?: readonly string[];
  /** `agent`: the anycast role whose task queue it serves. */
  role?: string;
  /** Required for `deprovisioner`: the one lifecycle whose durables and ACL row it removes. */
  deprovisionTarget?: { owner: string; actor: string; lifecycleUid: string };
  /** The reply-inbox token (`_INBOX_<connId>`); default the identity's public key. */
  connId?: string;
}

/** A NATS permission list. */
export interface PermissionList {
  allow: string[];
  deny: string[];
}

/** The publish and subscribe lists a user JWT carries. */
export interface Permissions {
  pub: PermissionList;
  sub: PermissionList;
}
