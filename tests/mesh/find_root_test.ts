/**
 * Every command finds a running mesh the same way: `--root`, else `./.cotal`, else the one root
 * the machine's registry knows. From another directory, status, space list, doctor and down
 * used to say "nothing is running" / "nothing ran" while ps and send found the mesh.
 */
import assert from "node:assert/strict";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

Deno.test("mesh - from any directory, status, space list, doctor and down find the one running mesh", async () => {
  const home = await tempDir("cotal-home-");
  const root = await tempDir("cotal-findroot-");
  const elsewhere = await tempDir("cotal-elsewhere-");
  const cotal = async (args: string[], cwd = elsewhere) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, ...args],
      cwd,
      env: { COTAL_HOME: home },
      stdout: "piped",
      stderr: "piped",
    }).output();
    return {
      code: out.code,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
    };
  };
  try {
    const up = await cotal(["up", "--detach", "--root", root, "--port", `${freePort()}`]);
    assert.equal(up.code, 0, up.stderr);
    const status = await cotal(["status", "--json"]);
    assert.equal(status.code, 0, status.stderr);
    const comps: { id: string; name: string }[] = JSON.parse(status.stdout).components;
    assert.ok(comps.some((c) => c.id === "nats-server"));
    // Each says its name as the text form and `cotal logs` do, beside the id its files use.
    assert.ok(
      comps.some((c) => /^delivery\.[0-9a-f]+$/.test(c.id) && c.name === "delivery.default"),
    );
    const list = await cotal(["space", "list", "--json"]);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(JSON.parse(list.stdout).map((r: { space: string }) => r.space), ["default"]);
    assert.equal((await cotal(["doctor", "auth", "--json"])).code, 0);
    // From elsewhere, a space no mesh serves is said as such, with the ones that run.
    const nope = await cotal(["ps", "--space", "nope"]);
    assert.equal(nope.code, 1, nope.stderr);
    assert.match(nope.stderr, /No mesh on this machine serves space 'nope' .*serve 'default'/);
    // A misspelt space is no new space: `space add` is how one is added (newcomer pass 9).
    const typo = await cotal(["up", "--detach", "--root", root, "--space", "defualt"]);
    assert.equal(typo.code, 2, typo.stderr);
    assert.match(typo.stderr, /serves 'default', not 'defualt': .*space add defualt/);
    assert.deepEqual(
      JSON.parse((await cotal(["space", "list", "--json"])).stdout).map((r: { space: string }) =>
        r.space
      ),
      ["default"],
    );
    const down = await cotal(["down"]);
    assert.equal(down.code, 0, down.stderr);
    assert.match(down.stdout, /nats-server: stopped/);
    // Stopped, status says how to start this root, by its path.
    const stopped = await cotal(["status", "--root", root]);
    assert.match(stopped.stdout + stopped.stderr, new RegExp(`up --root ${root}'`));
  } finally {
    await cotal(["down", "--root", root]);
    for (const d of [home, root, elsewhere]) await removeTempDir(d);
  }
});
