/**
 * Every code a {@linkcode CotalError} carries, one union per area that throws it. A code is
 * stable: tests, `--json` output and programs match on it, so one is listed here before it is
 * thrown (the compiler refuses any other), and `tests/layout/error_codes_test.ts` keeps each
 * area's list to the codes its modules throw.
 *
 * @module
 */

import type { AtomicFileErrorCode } from "./atomic_file.ts";
import type { AuthErrorCode } from "./auth.ts";
import type { BrokerErrorCode } from "./broker.ts";
import type { CliErrorCode } from "./cli.ts";
import type { DaemonErrorCode } from "./daemons.ts";
import type { DebianErrorCode } from "./debian.ts";
import type { DeliveryErrorCode } from "./delivery.ts";
import type { EndpointErrorCode } from "./endpoint.ts";
import type { ManagerErrorCode } from "./manager.ts";
import type { McpErrorCode } from "./mcp.ts";
import type { MeshErrorCode } from "./mesh.ts";
import type { NatsErrorCode } from "./nats.ts";
import type { RegistryErrorCode } from "./registry.ts";
import type { SignerErrorCode } from "./signer.ts";
import type { TrustErrorCode } from "./trust.ts";
import type { WireErrorCode } from "./wire.ts";
import type { WorkspaceErrorCode } from "./workspace.ts";

export type {
  AtomicFileErrorCode,
  AuthErrorCode,
  BrokerErrorCode,
  CliErrorCode,
  DaemonErrorCode,
  DebianErrorCode,
  DeliveryErrorCode,
  EndpointErrorCode,
  ManagerErrorCode,
  McpErrorCode,
  MeshErrorCode,
  NatsErrorCode,
  RegistryErrorCode,
  SignerErrorCode,
  TrustErrorCode,
  WireErrorCode,
  WorkspaceErrorCode,
};

/** Why a bearer or IdP token (or a bearer request) was refused: `bearer_<reason>`, `idp_<reason>`. */
export type TokenRefusalReason =
  | "alg_refused"
  | "bad_actor"
  | "bad_audience"
  | "bad_authorized_party"
  | "bad_claim"
  | "bad_header"
  | "bad_issuer"
  | "bad_signature"
  | "bad_subject"
  | "bad_ttl"
  | "bad_version"
  | "crit_header"
  | "embedded_key"
  | "expired"
  | "lifetime_exceeded"
  | "malformed"
  | "missing_claim"
  | "postdated"
  | "unknown_kid";

/** Every code a Cotal error carries. */
export type CotalErrorCode =
  | AtomicFileErrorCode
  | AuthErrorCode
  | BrokerErrorCode
  | CliErrorCode
  | DaemonErrorCode
  | DebianErrorCode
  | DeliveryErrorCode
  | EndpointErrorCode
  | ManagerErrorCode
  | McpErrorCode
  | MeshErrorCode
  | NatsErrorCode
  | RegistryErrorCode
  | SignerErrorCode
  | TrustErrorCode
  | WireErrorCode
  | WorkspaceErrorCode;
