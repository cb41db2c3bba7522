/**
 * Auth: the Cotal bearer (issuer, JWKS, strict validation), owner derivation, the IdP bridge
 * for any OIDC IdP, the IdP pin, the actor ledger, the NATS auth callout (account, responder,
 * store kinds), the auth-service daemon and its loopback HTTP face, and the
 * `auth-provider:cotal` extension (registered when this module is imported).
 *
 * @module
 */

export {
  AUTH_POLICY,
  CLOCK_SKEW_SEC,
  MAX_BEARER_TTL_SEC,
  RETIRED_KID_RETENTION_SEC,
} from "./constants.ts";
export { createUserTokenIssuer } from "./issuer.ts";
export type {
  IssuedBearer,
  IssueRequest,
  UserTokenIssuer,
  UserTokenIssuerOptions,
} from "./issuer.ts";
export { bearerIssuer, validateUserToken } from "./validate.ts";
export type { ValidatedBearer, ValidateUserTokenOptions } from "./validate.ts";
export { JWS_ALGORITHMS, pinnedJwksResolver } from "./jwks.ts";
export type {
  JsonWebKeySet,
  JwsAlgorithm,
  KeyResolver,
  PinnedJwksResolverOptions,
  PublicJwk,
} from "./jwks.ts";
export { deriveOwnerForIdpSubject, deriveOwnerToken } from "./owner.ts";
export { createIdpBridge } from "./idp_bridge.ts";
export type {
  ActorAuthorizer,
  IdpBridge,
  IdpBridgeOptions,
  IdpExchangeRequest,
  IdpExchangeResult,
} from "./idp_bridge.ts";
export type { VerifiedIdpToken } from "./idp_token.ts";
export { checkIdpUrl, discoverIdp } from "./idp_fetch.ts";
export type { DiscoveredIdp, IdpFetchOptions } from "./idp_fetch.ts";
export { ensureIdpPin, loadIdpPin } from "./idp_pin.ts";
export type { IdpPin, PinStore } from "./idp_pin.ts";
export { createActorLedger } from "./ledger.ts";
export type { ActorGrant, ActorLedger, ActorLedgerOptions, ActorRow } from "./ledger.ts";
export {
  ensureIssuer,
  ensureOwnerSecret,
  loadIssuer,
  loadOwnerSecret,
  saveIssuer,
} from "./secrets.ts";
export {
  ACTOR_LEDGER_KIND,
  actorLedgerKey,
  IDP_PIN_KIND,
  idpPinKey,
  ISSUER_KIND,
  issuerKey,
  OWNER_SECRET_KIND,
  ownerSecretKey,
} from "./keys.ts";
export { cotalAuthProvider } from "./provider.ts";
export type { CotalAuthSession } from "./provider.ts";
export { AUTH_CALLOUT_SUBJECT, calloutAccountName, createCalloutAuth } from "./callout_auth.ts";
export type { CalloutAuth, CreateCalloutAuthOptions } from "./callout_auth.ts";
export {
  CALLOUT_KIND,
  calloutKey,
  ensureCalloutAuth,
  loadCalloutAuth,
  loadServiceKeys,
  saveServiceKeys,
  SERVICE_KEYS_KIND,
  serviceKeysKey,
} from "./callout_store.ts";
export type { CalloutProvisionAuth, ServiceKeys } from "./callout_store.ts";
export { CALLOUT_MAX_IN_FLIGHT, CALLOUT_QUEUE, startAuthCallout } from "./callout.ts";
export type { AuthCallout, AuthCalloutOptions, CalloutDecision, CalloutGrant } from "./callout.ts";
export { runAuthService } from "./service.ts";
export type { RunAuthServiceOptions } from "./service.ts";
export { AUTH_SERVICE_FILE, authServicePaths, readDiscoveryFile } from "./service_files.ts";
export type { AuthServiceDiscovery, AuthServicePaths } from "./service_files.ts";
export {
  BAD_CAP_PER_MIN,
  createExchangeHandler,
  FAILED_EXCHANGE_PER_MIN,
  JWKS_MAX_AGE_SEC,
  MAX_EXCHANGE_BODY_BYTES,
} from "./service_http.ts";
export type { AuthServiceEvent, ExchangeHandlerOptions } from "./service_http.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export type { CalloutConnection, CalloutMsg } from "./callout.ts";
export { findCotalRoot, userAuthStateDir } from "./service_files.ts";
