import assert from "node:assert/strict";
import { Registry, registry as shared } from "../../lib/registry.ts";
import type { Command, Connector, Extension, Runtime } from "../../lib/registry.ts";
import { isCotalError } from "../../lib/errors.ts";

function command(name: string): Command {
  return { kind: "command", name, summary: `${name}.`, flags: {}, run: () => Promise.resolve() };
}

const connector: Connector = {
  kind: "connector",
  name: "echo",
  requires: ["sh"],
  buildLaunch: (ctx) => ({ command: "sh", args: ["-c", `echo ${ctx.agent}`] }),
};

const runtime: Runtime = {
  kind: "runtime",
  name: "null",
  available: () => Promise.resolve(false),
  spawn: () => Promise.reject(new Error("not available")),
};

Deno.test("registry - register, resolve and list by kind", async () => {
  const r = new Registry();
  r.register([command("up"), command("down"), connector, runtime]);
  assert.equal(r.resolve("command", "up").name, "up");
  assert.deepEqual(r.list("command").map((c) => c.name), ["down", "up"]);
  assert.deepEqual(r.list("connector").map((c) => c.name), ["echo"]);
  const spec = await r.resolve("connector", "echo").buildLaunch({
    space: "s",
    agent: "ada",
    cwd: "/tmp",
    materialPath: "/tmp/m.json",
  });
  assert.deepEqual(spec, { command: "sh", args: ["-c", "echo ada"] });
  assert.equal(r.find("runtime", "pty"), undefined);
  assert.equal(r.unregister("command", "up"), true);
  assert.equal(r.unregister("command", "up"), false);
  // The same name under another kind is a different key.
  r.register([{ ...runtime, name: "up" }]);
  assert.equal(r.resolve("runtime", "up").kind, "runtime");
});

Deno.test("registry - a duplicate refuses the whole batch", () => {
  const r = new Registry();
  r.register([command("up")]);
  assert.throws(
    () => r.register([command("status"), connector, command("up")]),
    (e: unknown) =>
      isCotalError(e, "registry_duplicate") && e.message.includes('"command:up"') &&
      e.message.includes("nothing from this batch was registered"),
  );
  assert.deepEqual(r.list("command").map((c) => c.name), ["up"]);
  assert.deepEqual(r.list("connector"), []);
  // A key repeated inside one batch is refused too, leaving nothing registered.
  assert.throws(
    () => r.register([command("a"), command("a")]),
    (e) => isCotalError(e, "registry_duplicate"),
  );
  assert.equal(r.find("command", "a"), undefined);
});

Deno.test("registry - resolving an unknown key names it", () => {
  const r = new Registry();
  r.register([command("up")]);
  assert.throws(
    () => r.resolve("command", "upp"),
    (e: unknown) =>
      isCotalError(e, "registry_unknown") && e.message.includes('"command:upp"') &&
      e.message.includes("known commands: up"),
  );
  assert.throws(
    () => r.resolve("auth-provider", "oidc"),
    (e: unknown) =>
      isCotalError(e, "registry_unknown") && e.message.includes('"auth-provider:oidc"'),
  );
});

Deno.test("registry - malformed entries are refused with registry_bad_entry", () => {
  const r = new Registry();
  const bad = [
    { ...command("x"), name: "" },
    { ...command("x"), kind: "com:mand" },
    { ...command("x"), kind: "" },
  ] as unknown as Extension[];
  for (const entry of bad) {
    assert.throws(
      () => r.register([command("ok"), entry]),
      (e) => isCotalError(e, "registry_bad_entry"),
    );
  }
  assert.deepEqual(r.list("command"), []);
});

Deno.test("registry - the shared registry is one Registry instance", () => {
  assert.ok(shared instanceof Registry);
});
