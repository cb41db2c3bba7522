/**
 * lib/nats: NATS JWT encode/decode/verify, nkeys, creds files and xkey seal/open.
 * The internal barrel for lib/trust and its siblings; the root mod.ts re-exports only the
 * names the specification lists.
 *
 * @module
 */

export {
  createAccount,
  createCurve,
  createKeyPair,
  createOperator,
  createUser,
  decodePublicKey,
  encodePublicKey,
  encodeSeed,
  isPublicKey,
  type NKeyKind,
  type NKeyPair,
  type ParsedSeed,
  parseSeed,
  publicKeyFromSeed,
  publicKeyKind,
} from "./nkeys.ts";
export { seedSigner, type Signer, verifySignature } from "./signer.ts";
export {
  decodeJwt,
  type DecodeOptions,
  DEFAULT_ACCOUNT_LIMITS,
  encodeJwt,
  type EncodeOptions,
  JWT_ALGORITHM,
  MAX_JWT_BYTES,
  NO_STORAGE_ACCOUNT_LIMITS,
} from "./jwt.ts";
export type {
  Account,
  AccountClaims,
  AccountLimits,
  AuthorizationRequest,
  AuthorizationRequestClaims,
  AuthorizationResponse,
  AuthorizationResponseClaims,
  ClaimsByType,
  ClaimsData,
  ClaimsInput,
  ClaimType,
  ClientInformation,
  ClientTls,
  ConnectionType,
  ConnectOptions,
  Export,
  ExternalAuthorization,
  GenericFields,
  Import,
  JetStreamLimits,
  NatsClaims,
  NatsLimits,
  Operator,
  OperatorClaims,
  OperatorLimits,
  Permission,
  Permissions,
  ResponsePermission,
  ServerId,
  SigningKey,
  TimeRange,
  User,
  UserClaims,
  UserLimits,
  UserPermissionLimits,
  UserScope,
  WeightedMapping,
} from "./types.ts";
export { type Creds, parseCreds, renderCreds } from "./creds.ts";
export { xkeyOpen, XKeyPair, xkeySeal } from "./xkey.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { base32Encode } from "./base32.ts";
export { base64urlDecode, base64urlEncode } from "./base64url.ts";
export { connect, connectWhenUp, flushWithin } from "./connect.ts";
export { isRelayedCreds, notePair, parseRelayedCreds, renderRelayedCreds } from "./creds.ts";
export { headersOf, UNDECODABLE } from "./headers.ts";
export { decodeJwtUnverified } from "./jwt.ts";
