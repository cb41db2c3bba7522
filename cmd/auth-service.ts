/**
 * cotal-auth-service: the NATS auth callout, the IdP-token-to-bearer exchange and JWKS for one
 * space. A thin composition root: `runAuthService` under the shared daemon main
 * (lib/cli/daemon_main.ts): 0 on SIGTERM/SIGINT, 2 on a refusal of its inputs, 1 when the
 * broker is lost.
 *
 * @module
 */
import { daemonMain } from "../lib/cli/mod.ts";
import type { CommandSpec } from "../lib/cli/mod.ts";
import { runAuthService } from "../lib/auth/mod.ts";

/** The daemon's flags (`cotal-auth-service --help` is generated from them). */
const AUTH_SERVICE_COMMAND: CommandSpec = Object.freeze({
  name: "auth-service",
  summary: "The NATS auth callout, the IdP token exchange and the JWKS of one space.",
  flags: Object.freeze({
    root: { type: "string", value: "dir", description: "The .cotal state dir (default ./.cotal)." },
    space: { type: "string", required: true, value: "name", description: "The space to serve." },
    server: {
      type: "string",
      required: true,
      value: "url",
      description: "Broker URL(s), comma-separated (nats://host:port).",
    },
    listen: {
      type: "string",
      value: "host:port",
      description: "Loopback address of the HTTP face (default 127.0.0.1:0, a free port).",
    },
    port: { type: "string", description: "Shorthand for --listen 127.0.0.1:<port>." },
    idp: {
      type: "string",
      value: "issuer url",
      description: "Pin this OIDC issuer on first start (discovery picks its JWKS).",
    },
    audience: {
      type: "string",
      description: "The audience IdP tokens must carry when pinning (default the issuer).",
    },
    "state-dir": {
      type: "string",
      value: "dir",
      description: "Where the IdP pin and actor ledger live (default <root>/secrets/auth-service).",
    },
  }),
}) as CommandSpec;

Deno.exit(
  await daemonMain({
    program: "cotal-auth-service",
    // Help and usage name the daemon as the CLI verb it is also reachable by.
    helpProgram: "cotal",
    command: AUTH_SERVICE_COMMAND,
    async start(args) {
      const svc = await runAuthService(args);
      return { stop: () => svc.stop(), ended: svc.closed.then(() => 0) };
    },
    // Every refusal but a lost broker is of its inputs (flags, the IdP pin, missing material).
    refusesInput: (err) => err.code !== "auth_service_broker_lost",
  }, Deno.args),
);
