/**
 * `serverConfig`: the nats-server config for one operator and N space accounts (MEMORY
 * resolver, every account preloaded, JetStream), optionally TLS-only and clustered.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import { decodeJwtUnverified, isPublicKey } from "../nats/mod.ts";
import { MAX_CONTROL_LINE } from "./mint.ts";
import type { BrokerAuth } from "./types.ts";

/** An account to preload: its public key and operator-signed JWT. */
export interface PreloadAccount {
  /** The account's public key. */
  pub: string;
  /** Its signed account JWT. */
  jwt: string;
}

/** Client TLS: when set, every client connection is TLS (plaintext is never also accepted). */
export interface TlsConfig {
  /** The server certificate (PEM file). */
  certFile: string;
  /** Its private key (PEM file). */
  keyFile: string;
  /** Verify client certificates against this CA (mutual TLS) when `verify` is set. */
  caFile?: string;
  /** Require and verify client (or peer) certificates. */
  verify?: boolean;
}

/** Clustered JetStream: three (or more) nodes each rendered with their own listen and routes. */
export interface ClusterConfig {
  /** The cluster name; every node of one cluster uses the same. */
  name: string;
  /** Unique per node; JetStream's RAFT groups identify servers by it. */
  serverName: string;
  /** `host:port` this node accepts routes on. */
  listen: string;
  /** Route URLs of the other nodes (`nats-route://host:port`, or `tls://` with route TLS). */
  routes: string[];
  /** Route TLS; required when client TLS is on, so no hop falls back to plaintext. */
  tls?: TlsConfig;
}

/** Options for {@linkcode serverConfig}. */
export interface ServerConfigOpts {
  /** The JetStream store directory (required: never a guessed default). */
  storeDir: string;
  /** Accounts beyond the spaces (the auth-callout account), each preloaded once. */
  extraAccounts?: PreloadAccount[];
  /** Client port; default 4222. */
  port?: number;
  /** Client listen host; default 127.0.0.1. */
  host?: string;
  /** Join a cluster of brokers. */
  cluster?: ClusterConfig;
  /** Serve clients over TLS only. */
  tls?: TlsConfig;
  /**
   * The broker writes its own log here, rotated at {@linkcode BROKER_LOG_ROTATE_BYTES} and
   * pruned to {@linkcode BROKER_LOG_FILES} files: every refused publish is a log line, and an
   * agent can make millions of them.
   */
  logFile?: string;
  /**
   * The HTTP monitoring endpoint (`/varz`, `/connz`, `/jsz`: what `nats server report` and
   * Prometheus exporters read), `host:port`; none by default.
   */
  monitor?: string;
  /**
   * A file name beside the config that it includes, before the trust and JetStream lines (which
   * therefore win over anything the include sets): the operator's own listener settings.
   */
  include?: string;
  /**
   * The most client connections the broker holds at once; default (and most)
   * {@linkcode BROKER_MAX_CONNECTIONS}. Rendered before the include, which may lower it.
   */
  maxConnections?: number;
}

/**
 * The most client connections a broker holds at once (frozen): half of the open-file limit
 * Cotal's units give the broker (`LimitNOFILE=16384`), so JetStream always has descriptors for
 * its stores. Without a cap, red team 30's `--net host` agent held 20,000 unauthenticated
 * connections, the broker's whole limit: JetStream could not open its files ("too many open
 * files"), and the restart that followed handed the agent the broker's port.
 */
export const BROKER_MAX_CONNECTIONS = 8192;

/** The size at which the broker rotates its log (frozen). */
export const BROKER_LOG_ROTATE_BYTES = 10 * 1024 * 1024;
/** How many log files the broker keeps, the current one included (frozen). */
export const BROKER_LOG_FILES = 5;

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

const q = (s: string) => JSON.stringify(s);

function tlsBlock(indent: string, tls: TlsConfig, what: string): string[] {
  for (const key of ["certFile", "keyFile"] as const) {
    if (typeof tls[key] !== "string" || tls[key] === "") {
      refuse("invalid_tls", `The ${what} TLS config needs ${key}; pass the PEM file path.`);
    }
  }
  if (tls.verify && !tls.caFile) {
    refuse("invalid_tls", `The ${what} TLS config verifies peers but has no caFile; pass the CA.`);
  }
  return [
    `${indent}tls {`,
    `${indent}  cert_file: ${q(tls.certFile)}`,
    `${indent}  key_file: ${q(tls.keyFile)}`,
    ...(tls.caFile ? [`${indent}  ca_file: ${q(tls.caFile)}`] : []),
    ...(tls.verify ? [`${indent}  verify: true`] : []),
    `${indent}}`,
  ];
}

function checkAccount(
  broker: Pick<BrokerAuth, "operator">,
  acct: PreloadAccount,
  what: string,
): void {
  if (!isPublicKey(acct?.pub, "account") || typeof acct.jwt !== "string") {
    refuse("invalid_account", `The ${what} has no account public key or JWT; pass a full record.`);
  }
  const claims = decodeJwtUnverified(acct.jwt);
  if (claims.nats.type !== "account" || claims.sub !== acct.pub) {
    refuse("invalid_account", `The ${what} JWT is not the account JWT of ${acct.pub}.`);
  }
  if (claims.iss !== broker.operator.pub) {
    refuse(
      "foreign_account",
      `The ${what} (${acct.pub}) was signed by another operator; only accounts of this broker's operator can be preloaded.`,
    );
  }
}

/**
 * Renders the broker config. Refuses a missing `storeDir`, no spaces, an account signed by
 * another operator, any account preloaded twice, and client TLS without route TLS.
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const conf = serverConfig(auth, [auth], { storeDir: "/var/lib/cotal/js" });
 * ```
 */
export function serverConfig(
  broker: Pick<BrokerAuth, "operator" | "sys">,
  spaces: ReadonlyArray<{ space: string; account: PreloadAccount }>,
  opts: ServerConfigOpts,
): string {
  if (typeof opts?.storeDir !== "string" || opts.storeDir.trim() === "") {
    refuse(
      "missing_store_dir",
      "serverConfig needs storeDir, the JetStream store directory; pass an absolute path.",
    );
  }
  if (!broker?.operator?.jwt || !isPublicKey(broker.operator.pub, "operator")) {
    refuse("missing_operator", "serverConfig needs broker trust with the operator JWT.");
  }
  const op = decodeJwtUnverified(broker.operator.jwt);
  if (op.nats.type !== "operator" || op.sub !== broker.operator.pub) {
    refuse("invalid_operator", "The operator JWT does not belong to this broker's operator key.");
  }
  if ((op.nats as { system_account?: string }).system_account !== broker.sys.pub) {
    refuse(
      "invalid_operator",
      "The operator JWT names a different system account than this broker trust; re-render from one broker record.",
    );
  }
  if (!Array.isArray(spaces) || spaces.length === 0) {
    refuse("no_spaces", "serverConfig needs at least one space account to preload.");
  }
  const preload: PreloadAccount[] = [];
  const seen = new Set<string>();
  const add = (acct: PreloadAccount, what: string) => {
    checkAccount(broker, acct, what);
    if (seen.has(acct.pub)) {
      refuse(
        "duplicate_account",
        `Account ${acct.pub} (${what}) is preloaded twice; pass each space and extra account once.`,
      );
    }
    seen.add(acct.pub);
    preload.push({ pub: acct.pub, jwt: acct.jwt });
  };
  add(broker.sys, "system account");
  for (const s of spaces) add(s.account, `account of space ${JSON.stringify(s.space)}`);
  for (const e of opts.extraAccounts ?? []) add(e, "extra account");

  const port = opts.port ?? 4222;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    refuse("invalid_port", `Port ${String(port)} is not a TCP port (0-65535).`);
  }
  const lines = [
    "# Rendered by Cotal serverConfig; do not edit, re-render it instead.",
    `host: ${q(opts.host ?? "127.0.0.1")}`,
    `port: ${port}`,
  ];
  if (opts.monitor !== undefined) {
    if (!/^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$/.test(opts.monitor)) {
      refuse("invalid_monitor", `The monitor address must be host:port, not ${q(opts.monitor)}.`);
    }
    lines.push(`http: ${q(opts.monitor)}`);
  }
  const maxConnections = opts.maxConnections ?? BROKER_MAX_CONNECTIONS;
  if (
    !Number.isInteger(maxConnections) || maxConnections < 1 ||
    maxConnections > BROKER_MAX_CONNECTIONS
  ) {
    refuse(
      "invalid_max_connections",
      `maxConnections must be a whole number from 1 to ${BROKER_MAX_CONNECTIONS}, not ${
        q(String(maxConnections))
      }.`,
    );
  }
  lines.push(`max_connections: ${maxConnections}`);
  if (opts.include !== undefined) {
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*\.conf$/.test(opts.include)) {
      refuse(
        "invalid_include",
        `The include must be a .conf file name beside the config, not ${q(opts.include)}.`,
      );
    }
    lines.push(`include ${q(opts.include)}`);
  }
  if (opts.cluster) lines.push(`server_name: ${q(opts.cluster.serverName)}`);
  // Agent JWTs carry their whole grant list in CONNECT, past the 4 KiB default; the line is
  // parsed before auth, so the cap stays modest.
  lines.push(`max_control_line: ${MAX_CONTROL_LINE}`);
  if (opts.logFile) {
    lines.push(
      `log_file: ${q(opts.logFile)}`,
      `logfile_size_limit: ${BROKER_LOG_ROTATE_BYTES}`,
      `logfile_max_num: ${BROKER_LOG_FILES}`,
    );
  }
  if (opts.tls) lines.push(...tlsBlock("", opts.tls, "client"));
  lines.push(`jetstream {`, `  store_dir: ${q(opts.storeDir)}`, `}`);
  if (opts.cluster) lines.push(...clusterBlock(opts.cluster, opts.tls !== undefined));
  lines.push(
    `operator: ${q(broker.operator.jwt)}`,
    `system_account: ${q(broker.sys.pub)}`,
    "resolver: MEMORY",
    "resolver_preload: {",
    ...preload.map((a) => `  ${a.pub}: ${q(a.jwt)}`),
    "}",
    "",
  );
  return lines.join("\n");
}

function clusterBlock(c: ClusterConfig, clientTls: boolean): string[] {
  for (const key of ["name", "serverName", "listen"] as const) {
    if (typeof c[key] !== "string" || !/^[A-Za-z0-9_.:\-\[\]]+$/.test(c[key])) {
      refuse(
        "invalid_cluster",
        `The cluster config needs a plain ${key}; got ${q(String(c[key]))}.`,
      );
    }
  }
  if (
    !Array.isArray(c.routes) || c.routes.some((r) => !/^(nats-route|nats|tls):\/\/\S+$/.test(r))
  ) {
    refuse("invalid_cluster", "Cluster routes must be URLs such as nats-route://127.0.0.1:6222.");
  }
  if (clientTls && !c.tls) {
    refuse(
      "mixed_tls",
      "Client TLS is on but the cluster routes would be plaintext; pass cluster.tls so no hop is unencrypted.",
    );
  }
  return [
    "cluster {",
    `  name: ${q(c.name)}`,
    `  listen: ${q(c.listen)}`,
    ...(c.tls ? tlsBlock("  ", c.tls, "cluster") : []),
    "  routes: [",
    ...c.routes.map((r) => `    ${q(r)}`),
    "  ]",
    "}",
  ];
}
