/**
 * `cotal mcp` as a program inside an agent's sandbox starts it: this checkout's `cmd/cotal.ts`
 * under this Deno, with the runner's placeholders for the paths the sandbox sees.
 *
 * @module
 */
import { RUNNER_PLACEHOLDERS } from "./launch.ts";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/**
 * V8 flags `cotal mcp` runs with: it lives beside its harness for hours, so a 1 MB young
 * generation keeps it lean, as the daemons' rows do (docs/BENCHMARKS.md, the mcp section).
 */
export const MCP_V8_FLAGS: readonly string[] = Object.freeze(["--max-semi-space-size=1"]);

/** `cotal mcp` as an MCP client starts it inside the agent's sandbox. */
export function cotalMcpServer(): {
  command: string;
  args: string[];
  env: Record<string, string>;
} {
  return {
    command: Deno.execPath(),
    // The sandbox is the boundary here: the harness that starts this is an unconfined program
    // inside it, so Deno's flags on its child would confine nothing the harness cannot do.
    args: [
      "run",
      "-A",
      `--v8-flags=${MCP_V8_FLAGS.join(",")}`,
      `--config=${CHECKOUT}/deno.json`,
      `${CHECKOUT}/cmd/cotal.ts`,
      "mcp",
      "--launch",
      RUNNER_PLACEHOLDERS.launch,
    ],
    env: {
      HOME: RUNNER_PLACEHOLDERS.home,
      DENO_DIR: RUNNER_PLACEHOLDERS.denoDir,
      DENO_NO_UPDATE_CHECK: "1",
    },
  };
}
