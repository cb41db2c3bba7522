/**
 * cotal-agent: runs one agent from its launch material; started by cotal-supervise.
 * @module
 */
import { parseArgs } from "node:util";

const USAGE = `usage: cotal-agent --space <name> --server <url> [--help]

runs one agent from its launch material; started by cotal-supervise.`;

try {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      space: { type: "string" },
      server: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
} catch (err) {
  console.error(`cotal-agent: ${(err as Error).message}\n${USAGE}`);
  Deno.exit(2);
}
console.error(`cotal-agent: not available in this build yet.\n${USAGE}`);
Deno.exit(2);
