/**
 * cotal: the operator CLI. A thin composition root: importing a command module registers it;
 * `dispatch` resolves the command through the shared registry.
 * @module
 */
import { dispatch } from "../lib/cli/mod.ts";
import { registry } from "../lib/registry.ts";
import config from "../deno.json" with { type: "json" };

// `cotal mcp` runs for as long as its harness does, beside it: it loads only its own command,
// not the operator's whole wing (that was a quarter of its resident memory).
if (Deno.args[0] === "mcp") {
  await import("../lib/mcp/command.ts");
} else {
  await Promise.all([import("../lib/mesh/commands/mod.ts"), import("../lib/mcp/command.ts")]);
}

Deno.exit(await dispatch(Deno.args, registry, { program: "cotal", version: config.version }));
