import assert from "node:assert/strict";
import { bufferIo, defineCommand, dispatch, JSON_FLAG, printResult } from "../../lib/cli/mod.ts";
import type { ParsedArgs } from "../../lib/cli/mod.ts";
import { Registry } from "../../lib/registry.ts";
import { CotalError } from "../../lib/errors.ts";

function setup() {
  const calls: ParsedArgs[] = [];
  const registry = new Registry();
  const io = bufferIo();
  registry.register([
    defineCommand({
      kind: "command",
      name: "greet",
      summary: "Say hello.",
      flags: {
        ...JSON_FLAG,
        name: { type: "string", required: true, description: "who to greet" },
      },
      run(args) {
        // Compile-time check: a required string flag is typed `string`, not `string | undefined`.
        const name: string = args.values.name;
        calls.push(args);
        printResult(
          io,
          { json: args.values.json === true },
          { greeting: `hello ${name}` },
          (v) => v.greeting,
        );
        return Promise.resolve();
      },
    }),
    defineCommand({
      kind: "command",
      name: "space add",
      summary: "Add a space.",
      flags: { ...JSON_FLAG },
      positionals: [{ name: "space", description: "the space", required: true }],
      run(args) {
        calls.push(args);
        if (args.positionals[0] === "taken") {
          throw new CotalError("space_exists", 'The space "taken" exists; pick another name.');
        }
        return Promise.resolve(7);
      },
    }),
    defineCommand({
      kind: "command",
      name: "space",
      summary: "Space tools.",
      flags: {},
      positionals: [{ name: "what", description: "subcommand" }],
      run(args) {
        calls.push(args);
        return Promise.resolve();
      },
    }),
  ]);
  return { registry, io, calls };
}

Deno.test("cli - dispatch runs the named command with parsed args", async () => {
  const { registry, io, calls } = setup();
  assert.equal(await dispatch(["greet", "--name", "ada"], registry, { io }), 0);
  assert.equal(io.out, "hello ada\n");
  assert.deepEqual(calls[0], { values: { name: "ada" }, positionals: [], raw: ["--name", "ada"] });
});

Deno.test("cli - dispatch prefers a two-word command and returns its exit code", async () => {
  const { registry, io, calls } = setup();
  assert.equal(await dispatch(["space", "add", "team"], registry, { io }), 7);
  assert.deepEqual(calls[0].positionals, ["team"]);
  assert.equal(await dispatch(["space", "list"], registry, { io }), 0);
  assert.deepEqual(calls[1].positionals, ["list"]);
});

Deno.test("cli - dispatch: usage errors exit 2 with the sentence on stderr", async () => {
  const { registry, io, calls } = setup();
  assert.equal(await dispatch(["greet", "--name", "a", "--name", "b"], registry, { io }), 2);
  assert.match(io.err, /^cotal: The flag --name was given 2 times .*run "cotal greet --help"/);
  assert.equal(calls.length, 0);
  const unknown = bufferIo();
  assert.equal(await dispatch(["nope"], registry, { io: unknown }), 2);
  assert.match(unknown.err, /Unknown command "nope"; run "cotal --help"/);
  const none = bufferIo();
  assert.equal(await dispatch([], registry, { io: none }), 2);
  assert.match(none.err, /No command given/);
  assert.match(none.err, /greet +Say hello\./);
});

Deno.test("cli - dispatch: other CotalErrors exit 1; --json prints them as JSON", async () => {
  const { registry, io } = setup();
  assert.equal(await dispatch(["space", "add", "taken"], registry, { io }), 1);
  assert.equal(io.err, 'cotal: The space "taken" exists; pick another name.\n');
  const json = bufferIo();
  assert.equal(await dispatch(["space", "add", "taken", "--json"], registry, { io: json }), 1);
  assert.deepEqual(JSON.parse(json.out), {
    error: { code: "space_exists", message: 'The space "taken" exists; pick another name.' },
  });
  const usage = bufferIo();
  assert.equal(await dispatch(["greet", "--json"], registry, { io: usage }), 2);
  assert.equal(JSON.parse(usage.out).error.code, "usage");
});

Deno.test("cli - dispatch: --json result is one JSON document on stdout", async () => {
  const { registry, io } = setup();
  assert.equal(await dispatch(["greet", "--name", "ada", "--json"], registry, { io }), 0);
  assert.deepEqual(JSON.parse(io.out), { greeting: "hello ada" });
  assert.equal(io.err, "");
});

Deno.test("cli - dispatch: --help prints generated help and runs nothing", async () => {
  const { registry, io, calls } = setup();
  assert.equal(await dispatch(["greet", "--help"], registry, { io }), 0);
  assert.match(io.out, /^cotal greet: Say hello\.\n\nUsage: cotal greet --name <name> \[options\]/);
  assert.match(io.out, /--name <name> +who to greet \(required\)/);
  const top = bufferIo();
  assert.equal(await dispatch(["--help"], registry, { io: top, program: "cotal-dev" }), 0);
  assert.match(top.out, /^Usage: cotal-dev <command> \[options\]/);
  assert.match(top.out, /space add +Add a space\./);
  // `help <command>` is that command's help.
  const named = bufferIo();
  assert.equal(await dispatch(["help", "greet"], registry, { io: named }), 0);
  assert.equal(named.out, io.out);
  assert.equal(calls.length, 0);
});

Deno.test("cli - dispatch lets non-Cotal errors propagate", async () => {
  const registry = new Registry();
  registry.register([
    defineCommand({
      kind: "command",
      name: "boom",
      summary: "Fails.",
      flags: {},
      run: () => Promise.reject(new TypeError("bug")),
    }),
  ]);
  await assert.rejects(dispatch(["boom"], registry, { io: bufferIo() }), TypeError);
});

Deno.test("cli - --version prints the program and version; a group name alone lists its subcommands", async () => {
  const { registry, io } = setup();
  assert.equal(
    await dispatch(["--version"], registry, { io, program: "cotal", version: "9.9.9" }),
    0,
  );
  assert.equal(io.out, "cotal 9.9.9\n");
  // "space" is itself a command here: it runs. A group with no command of its own lists.
  registry.register([
    defineCommand({
      kind: "command",
      name: "doctor auth",
      summary: "Check creds.",
      flags: {},
      run: () => Promise.resolve(),
    }),
  ]);
  const code = await dispatch(["doctor"], registry, { io, program: "cotal" });
  assert.equal(code, 2);
  assert.match(io.err, /"doctor" needs a subcommand: auth; run "cotal doctor <subcommand> --help"/);
  // Asked for help, a group lists its subcommands as help: exit 0, on stdout.
  const help = bufferIo();
  assert.equal(await dispatch(["doctor", "--help"], registry, { io: help, program: "cotal" }), 0);
  assert.match(help.out, /^cotal doctor: auth; run "cotal doctor <subcommand> --help"/);
  assert.equal(help.err, "");
});
