/**
 * cotal-agent: runs one agent from its launch material; started by cotal-supervise inside the
 * agent's sandbox, with the launch file's path in COTAL_LAUNCH and nothing secret in argv.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { isCotalError } from "../lib/errors.ts";
import { launchPathFromEnv, runAgent } from "../lib/manager/mod.ts";

const USAGE = `usage: cotal-agent [--help]

runs one agent from the launch material named by COTAL_LAUNCH; started by cotal-supervise.`;

async function main(): Promise<number> {
  try {
    const { values } = parseArgs({
      args: Deno.args,
      options: { help: { type: "boolean", short: "h" } },
      strict: true,
    });
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
  } catch (err) {
    console.error(`cotal-agent: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  for (const sig of ["SIGTERM", "SIGINT"] as const) Deno.addSignalListener(sig, onSignal);
  try {
    return await runAgent(launchPathFromEnv(), { signal: stop.signal });
  } catch (err) {
    if (isCotalError(err)) {
      console.error(`cotal-agent: ${err.message} [${err.code}]`);
      return 2;
    }
    console.error(`cotal-agent: the agent failed: ${(err as Error)?.stack ?? err}`);
    return 1;
  } finally {
    for (const sig of ["SIGTERM", "SIGINT"] as const) Deno.removeSignalListener(sig, onSignal);
  }
}

Deno.exit(await main());
