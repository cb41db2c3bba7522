/**
 * The operator's broker settings: `up --monitor` serves nats-server's HTTP monitoring, and
 * `<root>/broker/operator.conf` carries listener settings Cotal does not render (here a
 * leafnode port) through every re-render; an include that reaches for the trust model is
 * refused by name, a broken one by nats-server's own check, and either way the running broker
 * keeps its last good configuration.
 */
import assert from "node:assert/strict";
import { checkOperatorInclude, topLevelKeys } from "../../lib/mesh/broker_include.ts";
import { isCotalError } from "../../lib/errors.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function cotal(args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function varz(port: number): Promise<Record<string, unknown>> {
  const r = await fetch(`http://127.0.0.1:${port}/varz`);
  assert.equal(r.status, 200);
  return await r.json();
}

Deno.test("broker settings - the include's top-level keys are read past strings, comments and blocks", () => {
  const text = [
    "# a comment: accounts { }",
    "tls {",
    '  cert_file: "/x{y}.pem"  // no_auth_user: x',
    "}",
    'leafnodes { port: 7422, remotes: [ { url: "nats://h:7422" } ] }',
    "http: 127.0.0.1:8222",
    "  authorization { user: a }",
  ].join("\n");
  assert.deepEqual(topLevelKeys(text), [
    { key: "tls", line: 2 },
    { key: "leafnodes", line: 5 },
    { key: "http", line: 6 },
    { key: "authorization", line: 7 },
  ]);
  for (
    const bad of [
      "authorization { user: a, password: b }",
      "no_auth_user: a",
      "accounts { X: { users: [ { user: a } ] } }",
      'operator: "eyJ..."',
      "jetstream { max_file_store: 1TB }",
      "max_payload: 64MB",
      'include "other.conf"',
      "ALLOW = true",
    ]
  ) {
    assert.throws(
      () => checkOperatorInclude(`http_port: 8222\n${bad}\n`, "/r/broker/operator.conf"),
      (e: unknown) =>
        isCotalError(e, "operator_include_refused") &&
        /^\/r\/broker\/operator\.conf:2 sets '/.test((e as Error).message),
      bad,
    );
  }
  checkOperatorInclude("tls { cert_file: a, key_file: b }\nserver_name: n1\n", "x");
});

Deno.test("broker settings - up --monitor serves /varz; operator.conf adds a leafnode port through re-renders; bad includes leave the broker as it was", async () => {
  const root = await tempDir("cotal-brokerset-");
  const port = freePort();
  const monitor = freePort();
  const leaf = freePort();
  try {
    const up = await cotal([
      "up",
      "--detach",
      "--root",
      root,
      "--port",
      `${port}`,
      "--monitor",
      `${monitor}`,
    ]);
    assert.equal(up.code, 0, up.stderr);
    const v = await varz(monitor);
    assert.equal(v.port, port);
    const st = await cotal(["status", "--root", root]);
    assert.match(st.stdout, new RegExp(`monitor: http://127\\.0\\.0\\.1:${monitor}/`));
    // Named by space, not by its hash.
    assert.match(st.stdout, /^delivery\.default +running/m);

    // The operator's include: listeners are start-time settings (nats-server will not add one
    // on a reload), so it is written while the mesh is down and read by the next up.
    assert.equal((await cotal(["down", "--root", root])).code, 0);
    await Deno.writeTextFile(`${root}/broker/operator.conf`, `leafnodes { port: ${leaf} }\n`);
    // No --port: the root's last port is kept (the monitor too).
    const again = await cotal(["up", "--detach", "--root", root]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal((await varz(monitor)).port, port);
    // And over the running stack, an up without --port is no move.
    const over = await cotal(["up", "--detach", "--root", root]);
    assert.equal(over.code, 0, over.stderr);
    assert.match(
      await Deno.readTextFile(`${root}/broker/nats.conf`),
      /^include "operator\.conf"$/m,
    );
    // The monitor port was kept by the mesh record; the leafnode listener came from the include.
    await waitFor(
      async () =>
        (await varz(monitor).catch(() => ({} as Record<string, unknown>))).leaf !== undefined,
      { timeoutMs: 15_000, what: "the leafnode listener in /varz" },
    );
    assert.equal(((await varz(monitor)).leaf as { port: number }).port, leaf);
    // A space added later keeps the include (a re-render carries it).
    const add = await cotal(["space", "add", "second", "--root", root]);
    assert.equal(add.code, 0, add.stderr);
    assert.match(
      await Deno.readTextFile(`${root}/broker/nats.conf`),
      /^include "operator\.conf"$/m,
    );

    // Reaching for the trust model: refused by name, nothing rewritten.
    const good = await Deno.readTextFile(`${root}/broker/nats.conf`);
    await Deno.writeTextFile(`${root}/broker/operator.conf`, "no_auth_user: anyone\n");
    const refused = await cotal(["space", "add", "third", "--root", root]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /operator\.conf:1 sets 'no_auth_user', which Cotal renders itself or does not allow there/,
    );
    assert.equal(await Deno.readTextFile(`${root}/broker/nats.conf`), good);
    // Broken syntax: nats-server's own check refuses it before any reload.
    await Deno.writeTextFile(`${root}/broker/operator.conf`, "leafnodes { port: \n");
    const broken = await cotal(["space", "add", "fourth", "--root", root]);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /nats-server refused the configuration \(.*operator\.conf/);
    assert.equal(await Deno.readTextFile(`${root}/broker/nats.conf`), good);
    assert.deepEqual(
      [...Deno.readDirSync(`${root}/broker`)].map((e) => e.name).filter((n) =>
        n.includes("candidate")
      ),
      [],
    );
    // A start-time setting: the reload refuses it, and the sentence says how to apply it.
    await Deno.writeTextFile(
      `${root}/broker/operator.conf`,
      `leafnodes { port: ${leaf} }\nserver_name: renamed\n`,
    );
    const startOnly = await cotal(["space", "add", "fifth", "--root", root]);
    assert.equal(startOnly.code, 1);
    assert.match(
      startOnly.stderr,
      /takes effect after '.*down --root \S+ --keep-agents && .*up --root \S+' \(add --detach/,
    );
    await Deno.writeTextFile(`${root}/broker/operator.conf`, `leafnodes { port: ${leaf} }\n`);
    // The broker never saw either: it still serves.
    assert.equal((await varz(monitor)).port, port);
    assert.match((await cotal(["status", "--root", root])).stdout, /^nats-server +running/m);

    // --monitor off turns the kept monitor off, and it stays off.
    assert.equal((await cotal(["down", "--root", root])).code, 0);
    const off = await cotal(["up", "--detach", "--root", root, "--monitor", "off"]);
    assert.equal(off.code, 0, off.stderr);
    await assert.rejects(varz(monitor));
    assert.equal((await cotal(["down", "--root", root])).code, 0);
    assert.equal((await cotal(["up", "--detach", "--root", root])).code, 0);
    await assert.rejects(varz(monitor));

    // Asked of the running stack, the monitor waits for a restart: said, not saved, so a later
    // up is not refused for it and status shows only what is served (newcomer pass 10); the
    // restart it names brings it (newcomer pass 8).
    const late = await cotal(["up", "--detach", "--root", root, "--monitor", `${monitor}`]);
    assert.equal(late.code, 0, late.stderr);
    assert.match(
      late.stdout,
      new RegExp(
        `the running broker keeps no monitoring port; --monitor 127\\.0\\.0\\.1:${monitor} ` +
          `takes effect after '.*down --root \\S+ --keep-agents' and '.*up --root \\S+ --monitor ` +
          `127\\.0\\.0\\.1:${monitor} --detach'`,
      ),
    );
    await assert.rejects(varz(monitor));
    assert.doesNotMatch((await cotal(["status", "--root", root])).stdout, /monitor:/);
    // A port asked of the running stack is refused instead (every client dials it); --help says
    // which of the broker's settings wait for its next start and which are refused.
    const moved = await cotal(["up", "--detach", "--root", root, "--port", String(freePort())]);
    assert.equal(moved.code, 1);
    assert.match(
      moved.stderr,
      new RegExp(`already runs on 127\\.0\\.0\\.1:${port}; run 'cotal down'`),
    );
    const help = (await cotal(["up", "--help"])).stdout;
    assert.match(help, /--port .*a running broker's is refused: cotal down first/);
    assert.match(help, /--monitor .*a running broker keeps its own until it starts again/);
    assert.equal((await cotal(["up", "--detach", "--root", root])).code, 0);
    assert.equal((await cotal(["down", "--root", root, "--keep-agents"])).code, 0);
    const restarted = await cotal([
      ...["up", "--detach", "--root", root, "--monitor", `127.0.0.1:${monitor}`],
    ]);
    assert.equal(restarted.code, 0, restarted.stderr);
    assert.match(restarted.stdout, new RegExp(`monitor: http://127\\.0\\.0\\.1:${monitor}/`));
    assert.equal((await varz(monitor)).port, port);
  } finally {
    await cotal(["down", "--root", root]);
    await removeTempDir(root);
  }
});
