/**
 * cotal-auth-service: the NATS auth callout, the IdP-token-to-bearer exchange and JWKS for one
 * space. A thin composition root: parse the flags, run `runAuthService`, map the outcome to an
 * exit code (0 on SIGTERM/SIGINT, 2 on a refusal of its inputs, 1 when the broker is lost).
 *
 * @module
 */
import { helpText } from "../lib/cli/help.ts";
import { helpRequested, parseCommandArgs } from "../lib/cli/parse.ts";
import { isCotalError } from "../lib/errors.ts";
import { startHeartbeat } from "../lib/heartbeat.ts";
import { AUTH_SERVICE_COMMAND, runAuthService } from "../lib/auth/service.ts";

const PROGRAM = "cotal-auth-service";
// Help and usage name the daemon as the CLI verb it is also reachable by.
const HELP_PROGRAM = "cotal";

async function main(): Promise<number> {
  if (helpRequested(AUTH_SERVICE_COMMAND, Deno.args)) {
    console.log(helpText(AUTH_SERVICE_COMMAND, HELP_PROGRAM));
    return 0;
  }
  // Beats while its event loop turns: the stack's watchdog restarts it when the beat stops.
  startHeartbeat();
  try {
    await runAuthService(
      parseCommandArgs(AUTH_SERVICE_COMMAND, Deno.args, { program: HELP_PROGRAM }),
    );
    return 0;
  } catch (err) {
    if (isCotalError(err)) {
      console.error(`${PROGRAM}: ${err.message} [${err.code}]`);
      return err.code === "auth_service_broker_lost" ? 1 : 2;
    }
    console.error(`${PROGRAM}: the service failed: ${(err as Error)?.stack ?? err}`);
    return 1;
  }
}

Deno.exit(await main());
