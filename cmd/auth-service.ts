/**
 * cotal-auth-service: the NATS auth callout, the IdP-token-to-bearer exchange and JWKS for one
 * space. A thin composition root: `runAuthService` under the shared daemon main
 * (lib/cli/daemon_main.ts): 0 on SIGTERM/SIGINT, 2 on a refusal of its inputs, 1 when the
 * broker is lost.
 *
 * @module
 */
import { daemonMain } from "../lib/cli/daemon_main.ts";
import { AUTH_SERVICE_COMMAND, runAuthService } from "../lib/auth/service.ts";

Deno.exit(
  await daemonMain({
    program: "cotal-auth-service",
    // Help and usage name the daemon as the CLI verb it is also reachable by.
    helpProgram: "cotal",
    command: AUTH_SERVICE_COMMAND,
    start(args) {
      const stop = new AbortController();
      const served = runAuthService(args, undefined, { signal: stop.signal });
      return Promise.resolve({
        stop() {
          stop.abort();
          return served.catch(() => {});
        },
        ended: served.then(() => 0),
      });
    },
    // Every refusal but a lost broker is of its inputs (flags, the IdP pin, missing material).
    refusesInput: (err) => err.code !== "auth_service_broker_lost",
  }, Deno.args),
);
