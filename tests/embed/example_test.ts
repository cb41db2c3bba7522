/**
 * `examples/embed/` is an embedder's own project: its own `deno.json` maps `@cotal/deno` and the
 * library's dependencies, and its program composes one space from the specification's snippets
 * (trust into its own get/put/delete store, the broker, the delivery daemon, a Manager, a DM
 * delivered to an agent that was offline). It runs here as an outside project would run it:
 * from its own directory, with its own configuration.
 */
import assert from "node:assert/strict";
import { natsServerPath } from "../_harness/broker.ts";

const EXAMPLE = new URL("../../examples/embed/", import.meta.url).pathname;

Deno.test("embed - the example project imports the library as @cotal/deno only", async () => {
  const source = await Deno.readTextFile(`${EXAMPLE}main.ts`);
  const specifiers = [...source.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]);
  assert.deepEqual([...new Set(specifiers)], ["@cotal/deno"]);
  const config = JSON.parse(await Deno.readTextFile(`${EXAMPLE}deno.json`));
  const ours = JSON.parse(
    await Deno.readTextFile(new URL("../../deno.json", import.meta.url).pathname),
  );
  // The library's dependencies, as pinned in its own deno.json, are what the embedder maps.
  for (const [name, target] of Object.entries(ours.imports)) {
    assert.equal(config.imports[name], target, `the example maps ${name} as the library pins it`);
  }
});

Deno.test("embed - the example project runs the one-space bootstrap, delivery and a Manager on its own store", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "main.ts", await natsServerPath()],
    cwd: EXAMPLE,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(120_000),
  }).output();
  const dec = new TextDecoder();
  assert.equal(out.code, 0, dec.decode(out.stderr));
  assert.equal(dec.decode(out.stdout).trim(), "embed example: ok");
});

Deno.test("embed - the specification's userAuthStateDir(findCotalRoot(), space) is where runAuthService reads its pin and ledger", async () => {
  const { authServicePaths, findCotalRoot, userAuthStateDir } = await import("../../mod.ts");
  assert.equal(findCotalRoot("/srv/app/"), "/srv/app/.cotal");
  assert.equal(findCotalRoot(), `${Deno.cwd()}/.cotal`);
  assert.equal(
    userAuthStateDir(findCotalRoot("/srv/app"), "team"),
    authServicePaths("/srv/app/.cotal", "team").stateDir,
  );
});
