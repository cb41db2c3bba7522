import assert from "node:assert/strict";
import { helpText, usageLine } from "../../lib/cli/mod.ts";
import type { CommandSpec } from "../../lib/cli/mod.ts";

const MINT: CommandSpec = {
  name: "mint",
  summary: "Mint a scoped credential.",
  flags: {
    space: {
      type: "string",
      short: "s",
      required: true,
      value: "space",
      description: "the space to mint in",
    },
    profile: { type: "string", default: "agent", description: "the credential profile" },
    tag: { type: "string", multiple: true, description: "a tag for the identity" },
    json: { type: "boolean", description: "print JSON" },
  },
  positionals: [
    { name: "name", description: "the identity's name", required: true },
    { name: "out", description: "where to write it" },
  ],
};

Deno.test("cli - usage line is generated from the spec", () => {
  assert.equal(usageLine(MINT), "Usage: cotal mint --space <space> [options] <name> [<out>]");
  assert.equal(
    usageLine({ name: "space add", summary: "s", flags: {} }, "cotal-dev"),
    "Usage: cotal-dev space add [options]",
  );
});

Deno.test("cli - --help text is generated from the spec", () => {
  assert.equal(
    helpText(MINT),
    [
      "cotal mint: Mint a scoped credential.",
      "",
      "Usage: cotal mint --space <space> [options] <name> [<out>]",
      "",
      "Arguments:",
      "  <name>  the identity's name (required)",
      "  <out>   where to write it",
      "",
      "Options:",
      "  -s, --space <space>      the space to mint in (required)",
      "      --profile <profile>  the credential profile (default: agent)",
      "      --tag <tag>...       a tag for the identity (repeatable)",
      "      --json               print JSON",
      "  -h, --help               show this help",
      "",
    ].join("\n"),
  );
});

Deno.test("cli - spawn's --limit help names each limit's bounds (newcomer pass 8 read 256M as a valid memory)", async () => {
  const { spawnCommand } = await import("../../lib/mesh/commands/agents.ts");
  const text = helpText(spawnCommand, "cotal");
  assert.match(text, /--limit <name=value>.*bounds: processes 16-4096, memory 1G-64G,/);
});
