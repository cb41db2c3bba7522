/**
 * cotal-auth-service: the NATS auth callout, the IdP-token-to-bearer exchange and JWKS for one space.
 * @module
 */
import { parseArgs } from "node:util";

const USAGE = `usage: cotal-auth-service --space <name> --server <url> [--help]

the NATS auth callout, the IdP-token-to-bearer exchange and JWKS for one space.`;

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
  console.error(`cotal-auth-service: ${(err as Error).message}\n${USAGE}`);
  Deno.exit(2);
}
console.error(`cotal-auth-service: not available in this build yet.\n${USAGE}`);
Deno.exit(2);
