/**
 * nats-server discovery, installation into the project cache, and process lifecycle.
 * @module
 */
export { assertSupported, findServer, type FoundServer, probeServerVersion } from "./find.ts";
export { ensureServer } from "./install.ts";
export { type BrokerProcess, startBrokerProcess } from "./process.ts";
export { compareVersions, parseServerVersion } from "./version.ts";
export { isConnectionLine, serverLine, wholeLinesFrom } from "./log_lines.ts";
