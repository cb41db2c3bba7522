/**
 * nats-server discovery, installation into the project cache, and process lifecycle.
 * @module
 */
export {
  assertSupported,
  cachedServerPath,
  findServer,
  type FoundServer,
  probeServerVersion,
} from "./find.ts";
export { ensureServer, type InstallOptions, installServer } from "./install.ts";
export { type BrokerProcess, type StartBrokerOptions, startBrokerProcess } from "./process.ts";
export {
  compareVersions,
  isSupportedVersion,
  MIN_NATS_SERVER_VERSION,
  parseServerVersion,
  type ServerVersion,
} from "./version.ts";
export { isConnectionLine, serverLine, wholeLinesFrom } from "./log_lines.ts";
