/**
 * Auth: the Cotal bearer (issuer, JWKS, strict validation), owner derivation, the IdP bridge
 * for any OIDC IdP, the IdP pin, the actor ledger, the NATS auth callout (account, responder,
 * store kinds), the auth-service daemon and its loopback HTTP face, and the
 * `auth-provider:cotal` extension (registered when this module is imported).
 *
 * @module
 */

export { createUserTokenIssuer } from "./issuer.ts";
export type {
  IssuedBearer,
  IssueRequest,
  UserTokenIssuer,
  UserTokenIssuerOptions,
} from "./issuer.ts";
export { validateUserToken } from "./validate.ts";
export type { ValidatedBearer, ValidateUserTokenOptions } from "./validate.ts";
export { pinnedJwksResolver } from "./jwks.ts";
export type {
  JsonWebKeySet,
  JwsAlgorithm,
  KeyResolver,
  PinnedJwksResolverOptions,
  PublicJwk,
} from "./jwks.ts";
export { deriveOwnerToken } from "./owner.ts";
export { createIdpBridge } from "./idp_bridge.ts";
export type {
  ActorAuthorizer,
  IdpBridge,
  IdpBridgeOptions,
  IdpExchangeRequest,
  IdpExchangeResult,
} from "./idp_bridge.ts";
export type { VerifiedIdpToken } from "./idp_token.ts";
export { ensureIdpPin, loadIdpPin } from "./idp_pin.ts";
export type { IdpPin, PinStore } from "./idp_pin.ts";
export { createActorLedger } from "./ledger.ts";
export type { ActorGrant, ActorLedger, ActorLedgerOptions, ActorRow } from "./ledger.ts";
export { ensureIssuer, ensureOwnerSecret, loadIssuer, loadOwnerSecret } from "./secrets.ts";
export { cotalAuthProvider } from "./provider.ts";
export type { CotalAuthSession } from "./provider.ts";
export { createCalloutAuth } from "./callout_auth.ts";
export type { CalloutAuth, CreateCalloutAuthOptions } from "./callout_auth.ts";
export { ensureCalloutAuth, loadCalloutAuth } from "./callout_store.ts";
export type { CalloutProvisionAuth, ServiceKeys } from "./callout_store.ts";
export { startAuthCallout } from "./callout.ts";
export type { AuthCallout, AuthCalloutOptions, CalloutDecision, CalloutGrant } from "./callout.ts";
export { runAuthService } from "./service.ts";
export type { AuthServiceDaemon, RunAuthServiceOptions } from "./service.ts";
export { AUTH_SERVICE_FILE, authServicePaths, readDiscoveryFile } from "./service_files.ts";
export type { AuthServiceDiscovery, AuthServicePaths } from "./service_files.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export type { CalloutConnection, CalloutMsg } from "./callout.ts";
export { findCotalRoot, userAuthStateDir } from "./service_files.ts";
