/**
 * The NATS v2 JWT claim shapes, with the JSON field names nats-server reads
 * (from nats-io/jwt v2). Every `nats.*` field is optional unless the server requires it.
 *
 * @module
 */

/** The claim types lib/nats encodes and decodes. */
export type ClaimType =
  | "operator"
  | "account"
  | "user"
  | "authorization_request"
  | "authorization_response";

/** The registered claims every NATS JWT carries. `iss`, `iat` and `jti` are set by the encoder. */
export interface ClaimsData {
  /** Unique id: base32 of a SHA-256 over the claims without `jti`. */
  jti: string;
  /** Issued at, Unix seconds. */
  iat: number;
  /** The signer's public nkey. */
  iss: string;
  /** The public nkey the JWT describes. */
  sub: string;
  name?: string;
  aud?: string;
  /** Expiry, Unix seconds; absent means no expiry. */
  exp?: number;
  /** Not before, Unix seconds. */
  nbf?: number;
}

/** Fields every `nats` object carries; `version` is always 2 for the JWTs we write. */
export interface GenericFields<T extends ClaimType> {
  type: T;
  version: 2;
  tags?: string[];
}

/** A subject allow/deny list. */
export interface Permission {
  allow?: string[];
  deny?: string[];
}

/** Permission to publish to reply subjects of received requests. `ttl` is in nanoseconds. */
export interface ResponsePermission {
  max: number;
  ttl: number;
}

/** Publish/subscribe permissions of a user (or an account's default permissions). */
export interface Permissions {
  pub?: Permission;
  sub?: Permission;
  resp?: ResponsePermission;
}

/** Connection-level limits; -1 means unlimited (0 means none allowed). */
export interface NatsLimits {
  subs?: number;
  data?: number;
  payload?: number;
}

/** A daily time window, `HH:MM:SS` local to `times_location`. */
export interface TimeRange {
  start?: string;
  end?: string;
}

/** Where and when a user may connect. */
export interface UserLimits {
  /** Allowed source CIDRs. */
  src?: string[];
  times?: TimeRange[];
  times_location?: string;
}

/** How a client may reach the server. */
export type ConnectionType =
  | "STANDARD"
  | "WEBSOCKET"
  | "LEAFNODE"
  | "LEAFNODE_WS"
  | "MQTT"
  | "MQTT_WS"
  | "IN_PROCESS";

/** Everything a user JWT (or a scoped signing key's template) can grant or limit. */
export interface UserPermissionLimits extends Permissions, NatsLimits, UserLimits {
  bearer_token?: boolean;
  proxy_required?: boolean;
  allowed_connection_types?: ConnectionType[];
}

/** The `nats` object of a user JWT. */
export interface User extends UserPermissionLimits, GenericFields<"user"> {
  /** The account a signing key signed for; set whenever `iss` is not the account key. */
  issuer_account?: string;
}

/** Account-level limits; -1 means unlimited. */
export interface AccountLimits {
  imports?: number;
  exports?: number;
  wildcards?: boolean;
  disallow_bearer?: boolean;
  conn?: number;
  leaf?: number;
}

/** JetStream limits; `mem_storage`/`disk_storage` of 0 (or absent) leave JetStream disabled. */
export interface JetStreamLimits {
  mem_storage?: number;
  disk_storage?: number;
  streams?: number;
  consumer?: number;
  max_ack_pending?: number;
  mem_max_stream_bytes?: number;
  disk_max_stream_bytes?: number;
  max_bytes_required?: boolean;
}

/** The limits an operator sets on an account. */
export interface OperatorLimits extends NatsLimits, AccountLimits, JetStreamLimits {
  /** Per-replication-tier JetStream limits (`R1`, `R3`); exclusive with the flat ones. */
  tiered_limits?: Record<string, JetStreamLimits>;
}

/** A signing key whose users get a fixed template instead of their own permissions. */
export interface UserScope {
  kind: "user_scope";
  key: string;
  role?: string;
  template?: UserPermissionLimits;
  description?: string;
}

/** An account signing key: a bare `A…` key, or a scoped one. */
export type SigningKey = string | UserScope;

/** Decentralized auth callout, configured in the account JWT (no server config block). */
export interface ExternalAuthorization {
  /** The callout service users (`U…`); connects as these bypass the callout. */
  auth_users?: string[];
  /** Accounts the callout may place users into (`A…` or `*`). */
  allowed_accounts?: string[];
  /** The curve key (`X…`) the server seals requests to; responses are sealed back. */
  xkey?: string;
}

/** A stream or service the account offers to others. */
export interface Export {
  name?: string;
  subject: string;
  type: "stream" | "service";
  token_req?: boolean;
  revocations?: Record<string, number>;
  response_type?: "Singleton" | "Stream" | "Chunked";
  /** Nanoseconds. */
  response_threshold?: number;
  service_latency?: { sampling: number | "headers"; results: string };
  account_token_position?: number;
  advertise?: boolean;
  allow_trace?: boolean;
  description?: string;
  info_url?: string;
}

/** A stream or service taken from another account. */
export interface Import {
  name?: string;
  subject: string;
  account: string;
  token?: string;
  local_subject?: string;
  type: "stream" | "service";
  share?: boolean;
  allow_trace?: boolean;
}

/** One destination of a subject mapping. */
export interface WeightedMapping {
  subject: string;
  weight?: number;
  cluster?: string;
}

/** The `nats` object of an account JWT. */
export interface Account extends GenericFields<"account"> {
  imports?: Import[];
  exports?: Export[];
  limits?: OperatorLimits;
  signing_keys?: SigningKey[];
  /** User public key (or `*`) to Unix seconds: JWTs issued before it are revoked. */
  revocations?: Record<string, number>;
  default_permissions?: Permissions;
  mappings?: Record<string, WeightedMapping[]>;
  authorization?: ExternalAuthorization;
  trace?: { dest?: string; sampling?: number };
  cluster_traffic?: "system" | "owner";
  description?: string;
  info_url?: string;
}

/** The `nats` object of an operator JWT. */
export interface Operator extends GenericFields<"operator"> {
  signing_keys?: string[];
  account_server_url?: string;
  operator_service_urls?: string[];
  system_account?: string;
  assert_server_version?: string;
  strict_signing_key_usage?: boolean;
}

/** The server that sent an authorization request. */
export interface ServerId {
  name: string;
  host: string;
  /** The server's nkey (`N…`); it signs the request. */
  id: string;
  version?: string;
  cluster?: string;
  tags?: string[];
  /** The server's curve key, which responses are sealed to. */
  xkey?: string;
}

/** What the server knows about the connecting client. */
export interface ClientInformation {
  host?: string;
  id?: number;
  user?: string;
  name?: string;
  tags?: string[];
  name_tag?: string;
  kind?: string;
  type?: string;
  mqtt_id?: string;
  nonce?: string;
}

/** The client's CONNECT options as the server forwards them. */
export interface ConnectOptions {
  jwt?: string;
  nkey?: string;
  sig?: string;
  auth_token?: string;
  user?: string;
  pass?: string;
  name?: string;
  lang?: string;
  version?: string;
  protocol: number;
}

/** The client's TLS state, when it connected over TLS. */
export interface ClientTls {
  version?: string;
  cipher?: string;
  certs?: string[];
  verified_chains?: string[][];
}

/** The `nats` object of an authorization request (server to callout). */
export interface AuthorizationRequest extends GenericFields<"authorization_request"> {
  server_id: ServerId;
  /** The server-minted user key the response's user JWT must have as `sub`. */
  user_nkey: string;
  client_info: ClientInformation;
  connect_opts: ConnectOptions;
  client_tls?: ClientTls;
  request_nonce?: string;
}

/** The `nats` object of an authorization response (callout to server): a user JWT or an error. */
export interface AuthorizationResponse extends GenericFields<"authorization_response"> {
  jwt?: string;
  error?: string;
  issuer_account?: string;
}

/** An operator JWT's claims. */
export interface OperatorClaims extends ClaimsData {
  nats: Operator;
}

/** An account JWT's claims. */
export interface AccountClaims extends ClaimsData {
  nats: Account;
}

/** A user JWT's claims. */
export interface UserClaims extends ClaimsData {
  nats: User;
}

/** An authorization request's claims (`iss` is the server, `sub` the account, `aud` is "nats-authorization-request"). */
export interface AuthorizationRequestClaims extends ClaimsData {
  nats: AuthorizationRequest;
}

/** An authorization response's claims (`sub` is the user nkey, `aud` the server id). */
export interface AuthorizationResponseClaims extends ClaimsData {
  nats: AuthorizationResponse;
}

/** Claims by their `nats.type`. */
export interface ClaimsByType {
  operator: OperatorClaims;
  account: AccountClaims;
  user: UserClaims;
  authorization_request: AuthorizationRequestClaims;
  authorization_response: AuthorizationResponseClaims;
}

/** Any claims lib/nats handles. */
export type NatsClaims = ClaimsByType[ClaimType];

/**
 * What a caller passes to `encodeJwt`: the claims without the fields the encoder owns
 * (`iss` from the signer, `iat`, `jti`, and `nats.version`).
 */
export type ClaimsInput<C extends NatsClaims = NatsClaims> = C extends NatsClaims
  ? Omit<C, "iss" | "iat" | "jti" | "nats"> & { nats: Omit<C["nats"], "version"> }
  : never;
