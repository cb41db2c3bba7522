import assert from "node:assert/strict";
import { checkCommandSpec, helpRequested, parseCommandArgs } from "../../lib/cli/mod.ts";
import type { CommandSpec } from "../../lib/cli/mod.ts";
import { isCotalError } from "../../lib/errors.ts";

const MINT: CommandSpec = {
  name: "mint",
  summary: "Mint a scoped credential.",
  flags: {
    space: { type: "string", short: "s", required: true, description: "the space to mint in" },
    profile: { type: "string", default: "agent", description: "the credential profile" },
    tag: { type: "string", multiple: true, description: "a tag for the identity" },
    json: { type: "boolean", description: "print JSON" },
  },
  positionals: [
    { name: "name", description: "the identity's name", required: true },
    { name: "out", description: "where to write it" },
  ],
};

function usage(argv: string[], pattern: RegExp, spec: CommandSpec = MINT) {
  assert.throws(() => parseCommandArgs(spec, argv), (err: unknown) => {
    assert.ok(isCotalError(err, "usage"), String(err));
    assert.match(err.message, pattern);
    assert.match(err.message, new RegExp(`run "cotal ${spec.name} --help"`));
    return true;
  });
}

Deno.test("cli - parses flags, defaults, multiples and positionals", () => {
  const args = parseCommandArgs(MINT, ["-s", "team", "--tag", "a", "--tag=b", "alice", "--json"]);
  assert.deepEqual(args.values, { space: "team", profile: "agent", tag: ["a", "b"], json: true });
  assert.deepEqual(args.positionals, ["alice"]);
  assert.deepEqual(args.raw, ["-s", "team", "--tag", "a", "--tag=b", "alice", "--json"]);
  const dashed = parseCommandArgs(MINT, ["--space=team", "--", "--not-a-flag"]);
  assert.deepEqual(dashed.positionals, ["--not-a-flag"]);
  assert.equal(dashed.values.json, undefined);
});

Deno.test("cli - refuses an unknown flag, naming it", () => {
  usage(["--space", "team", "--bogus", "alice"], /Unknown flag --bogus for "mint"/);
  usage(["--space", "team", "-x", "alice"], /Unknown flag -x/);
  usage(["--space", "team", "--no-json", "alice"], /Unknown flag --no-json/);
  // After a positional of a command that takes a program and its arguments, the flag may be
  // that program's own: say where it goes.
  const RUN: CommandSpec = {
    name: "run",
    summary: "Run a program.",
    flags: { space: { type: "string", description: "the space" } },
    positionals: [{ name: "program", description: "what to run", variadic: true }],
  };
  usage(
    ["--space", "team", "sh", "-c"],
    /Unknown flag -c for "run" \(if it is "sh"'s own, put the program after '--': \.\.\. -- sh -c \.\.\.\)/,
    RUN,
  );
  // A command with no such positional is not told to use '--' (newcomer pass 8: `cotal logs
  // watchdog --json` was).
  assert.throws(
    () => parseCommandArgs(MINT, ["--space", "team", "sh", "-c"]),
    (err: unknown) => {
      assert.match(String((err as Error).message), /^Unknown flag -c for "mint"; run/);
      return true;
    },
  );
});

Deno.test("cli - refuses a repeated flag that is not multiple", () => {
  usage(
    ["--space", "a", "--space", "b", "alice"],
    /--space was given 2 times \(--space, --space\)/,
  );
  usage(["-s", "a", "--space=b", "alice"], /--space was given 2 times \(-s, --space\)/);
  usage(["--json", "--json", "-s", "a", "alice"], /--json was given 2 times/);
});

Deno.test("cli - refuses a missing, empty or dash-looking value", () => {
  usage(["alice", "--space"], /The flag --space needs a value/);
  usage(
    ["--space", "--json", "alice"],
    /--space needs a value but is followed by the flag "--json"/,
  );
  usage(["--space=", "alice"], /--space was given an empty value/);
  usage(["--json=yes", "-s", "a", "alice"], /--json takes no value but was given "yes"/);
});

Deno.test("cli - refuses missing required flags and positionals, and surplus positionals", () => {
  usage(["alice"], /The flag --space is required/);
  usage(["--space", "team"], /The argument <name> is missing/);
  usage(
    ["--space", "team", "alice", "out", "extra"],
    /at most 2 argument\(s\) but was also given "extra"/,
  );
  const bare: CommandSpec = { name: "status", summary: "Show status.", flags: {} };
  usage(["now"], /"status" takes no arguments but was given "now"/, bare);
  const variadic: CommandSpec = {
    name: "stop",
    summary: "Stop agents.",
    flags: {},
    positionals: [{ name: "agent", description: "agents", required: true, variadic: true }],
  };
  assert.deepEqual(parseCommandArgs(variadic, ["a", "b", "c"]).positionals, ["a", "b", "c"]);
});

Deno.test("cli - a usage error names the configured program", () => {
  assert.throws(
    () => parseCommandArgs(MINT, ["--bogus"], { program: "cotal-dev" }),
    (err: unknown) => isCotalError(err, "usage") && /cotal-dev mint --help/.test(err.message),
  );
});

Deno.test("cli - helpRequested sees --help and -h even beside bad flags", () => {
  assert.equal(helpRequested(MINT, ["--help"]), true);
  assert.equal(helpRequested(MINT, ["--bogus", "-h"]), true);
  assert.equal(helpRequested(MINT, ["--", "--help"]), false);
  assert.equal(helpRequested(MINT, ["-s", "team", "alice"]), false);
});

Deno.test("cli - malformed specs are refused with cli_bad_spec", () => {
  const bad: CommandSpec[] = [
    { name: "x", summary: "", flags: { help: { type: "boolean", description: "" } } },
    { name: "x", summary: "", flags: { a: { type: "string", short: "h", description: "" } } },
    {
      name: "x",
      summary: "",
      flags: {
        a: { type: "string", short: "a", description: "" },
        b: { type: "string", short: "a", description: "" },
      },
    },
    { name: "x", summary: "", flags: { Bad_Name: { type: "string", description: "" } } },
    { name: "x", summary: "", flags: { a: { type: "string", default: true, description: "" } } },
    {
      name: "x",
      summary: "",
      flags: { a: { type: "string", multiple: true, default: "one", description: "" } },
    },
    {
      name: "x",
      summary: "",
      flags: { a: { type: "string", required: true, default: "d", description: "" } },
    },
    {
      name: "x",
      summary: "",
      flags: {},
      positionals: [{ name: "a", description: "", variadic: true }, { name: "b", description: "" }],
    },
    {
      name: "x",
      summary: "",
      flags: {},
      positionals: [{ name: "a", description: "" }, { name: "b", description: "", required: true }],
    },
    { name: "Bad Name!", summary: "", flags: {} },
  ];
  for (const spec of bad) {
    assert.throws(() => checkCommandSpec(spec), (e) => isCotalError(e, "cli_bad_spec"), spec.name);
  }
});
