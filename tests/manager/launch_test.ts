import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  declaredProgram,
  parseLaunchMaterial,
  readLaunchMaterial,
  writeLaunchMaterial,
} from "../../lib/manager/launch.ts";
import { agentFixture, material } from "./_agent_fixture.ts";

const MODULE = { kind: "module", module: "agent.ts" } as const;

Deno.test("manager - launch material is written 0600, atomically, and reads back equal", async () => {
  const fx = await agentFixture();
  const m = await material(MODULE);
  await writeLaunchMaterial(fx.launchFile, m);
  assert.equal((await Deno.stat(fx.launchFile)).mode! & 0o777, 0o600);
  assert.deepEqual(await readLaunchMaterial(fx.launchFile), JSON.parse(JSON.stringify(m)));
  // Overwriting goes through a rename too, and leaves no temp file behind.
  await writeLaunchMaterial(fx.launchFile, { ...m, card: { name: "renamed" } });
  assert.equal((await readLaunchMaterial(fx.launchFile)).card.name, "renamed");
  assert.deepEqual([...Deno.readDirSync(fx.agentDir)].map((e) => e.name), ["launch.json"]);
});

Deno.test("manager - launch material with a readable-by-others mode is refused", async () => {
  const fx = await agentFixture();
  await writeLaunchMaterial(fx.launchFile, await material(MODULE));
  await Deno.chmod(fx.launchFile, 0o640);
  await assert.rejects(
    readLaunchMaterial(fx.launchFile),
    (e) => isCotalError(e, "launch_mode") && /640.*must be 0600/.test(e.message),
  );
});

Deno.test("manager - a symlinked, missing, oversized or non-JSON launch file is refused", async () => {
  const fx = await agentFixture();
  await writeLaunchMaterial(`${fx.agentDir}/real.json`, await material(MODULE));
  await Deno.symlink(`${fx.agentDir}/real.json`, fx.launchFile);
  await assert.rejects(readLaunchMaterial(fx.launchFile), (e) => isCotalError(e, "launch_symlink"));
  await assert.rejects(
    readLaunchMaterial(`${fx.agentDir}/absent.json`),
    (e) => isCotalError(e, "launch_missing"),
  );
  const big = `${fx.agentDir}/big.json`;
  await Deno.writeTextFile(big, " ".repeat((1 << 20) + 1), { mode: 0o600 });
  await assert.rejects(readLaunchMaterial(big), (e) => isCotalError(e, "launch_too_big"));
  const junk = `${fx.agentDir}/junk.json`;
  await Deno.writeTextFile(junk, "{ not json SECRET-BYTES", { mode: 0o600 });
  await assert.rejects(
    readLaunchMaterial(junk),
    (e) => isCotalError(e, "launch_malformed") && !e.message.includes("SECRET-BYTES"),
  );
});

Deno.test("manager - malformed launch fields are refused, naming the field", async () => {
  const good = await material(MODULE);
  const cases: [string, unknown, RegExp][] = [
    ["format", { ...good, format: "v0" }, /format/],
    ["servers", { ...good, servers: [] }, /servers/],
    ["servers", { ...good, servers: ["nats://a b"] }, /servers/],
    ["principal", { ...good, principal: { owner: "local", actor: "a.b" } }, /.+/],
    ["principal", { ...good, principal: { owner: "nkeyowner", actor: "a" } }, /principal owner/],
    ["lifecycleUid", { ...good, lifecycleUid: "short" }, /.+/],
    ["card", { ...good, card: { name: "x\u001b[2J" } }, /card\.name/],
    ["extra key", { ...good, extra: 1 }, /top-level key "extra"/],
    ["auth", { ...good, auth: { kind: "password", password: "p" } }, /auth\.kind/],
    ["auth.creds", { ...good, auth: { kind: "creds", creds: "" } }, /auth\.creds/],
    ["bearer url", {
      ...good,
      auth: { kind: "bearer", sentinelCreds: "x", tokenUrl: "file:///etc", actorToken: "t" },
    }, /tokenUrl/],
    ["module ..", { ...good, agent: { kind: "module", module: "../other/agent.ts" } }, /module/],
    ["module abs", { ...good, agent: { kind: "module", module: "/etc/passwd" } }, /module/],
    ["program args", { ...good, agent: { kind: "program", command: "sh", args: [1] } }, /args/],
    ["agent kind", { ...good, agent: { kind: "shell" } }, /agent\.kind/],
  ];
  for (const [what, value, msg] of cases) {
    assert.throws(
      () => parseLaunchMaterial(value),
      (e) =>
        isCotalError(e, "launch_invalid") &&
        msg.test(e.message),
      what,
    );
  }
});

Deno.test("manager - creds that do not parse are refused without quoting them", async () => {
  const fx = await agentFixture();
  const m = await material(MODULE, {
    auth: { kind: "creds", creds: "-----BEGIN NATS USER JWT-----\nSECRET-SEED-TEXT\n" },
  });
  await assert.rejects(
    writeLaunchMaterial(fx.launchFile, m),
    (e) => isCotalError(e, "launch_invalid") && !e.message.includes("SECRET-SEED-TEXT"),
  );
  // The same text planted by hand is refused on read.
  await Deno.writeTextFile(fx.launchFile, JSON.stringify(m), { mode: 0o600 });
  await assert.rejects(
    readLaunchMaterial(fx.launchFile),
    (e) =>
      isCotalError(e, "launch_invalid") && /auth\.creds/.test(e.message) &&
      !e.message.includes("SECRET-SEED-TEXT"),
  );
});

Deno.test("manager - the declared program is what --allow-run will grant", () => {
  assert.equal(declaredProgram({ kind: "program", command: "/bin/sh", args: [] }), "/bin/sh");
  assert.equal(declaredProgram({ kind: "module", module: "a.ts" }), undefined);
  assert.equal(declaredProgram({ kind: "builtin", name: "task-runner", program: "make" }), "make");
});
