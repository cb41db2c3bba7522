/**
 * Red team 19b, attack M: root's own cotal commands trust files in the shared run dir
 * (`run/`, 1770 root:cotal), which every Cotal unit's user may add names to.
 *
 * `cotal systemd install|print` takes the broker port from `<state-dir>/run/mesh.json` when
 * `--port` is not given (README: after `cotal space add`, run `cotal systemd install` again), and
 * `cotal up` writes that record as `run/mesh.json.tmp` (plain O_CREAT|O_TRUNC, follows links)
 * then renames it into place.
 */
import assert from "node:assert/strict";
import { fakeHost, run, why } from "./_redteam19b_root.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
const STACK = new URL("../../lib/mesh/stack.ts", import.meta.url).pathname;

async function printUnits(R: string): Promise<string> {
  const r = await run(Deno.execPath(), [
    "run",
    "-A",
    COTAL,
    "systemd",
    "print",
    "--state-dir",
    R,
    "--space",
    "alpha",
    "--space",
    "beta",
  ], {
    PATH: "/usr/bin:/bin",
    HOME: Deno.env.get("HOME") ?? "/root",
    NO_COLOR: "1",
    DENO_DIR: Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`,
  });
  assert.equal(r.code, 0, r.err);
  return r.out;
}

function servers(units: string): string[] {
  return [...units.matchAll(/--server (\S+)/g)].map((m) => m[1]);
}

// M1: on a state dir with no run/mesh.json (filled without `cotal up`, or run/ cleaned), alpha's
// supervisor writes one naming a port it listens on. The next `cotal systemd install` (as root)
// points every space's signer, delivery and supervisor at it: a loopback man in the middle of
// beta's daemons (or at least their denial).
Deno.test({
  name:
    `redteam19b M1 - a supervisor cannot choose the broker port root's 'cotal systemd install' renders for every space${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const plant = await h.sh(
        h.sup("alpha"),
        `echo '{"root":"/var/lib/cotal","host":"127.0.0.1","port":4999,"url":"nats://127.0.0.1:4999"}' > run/mesh.json && echo planted`,
      );
      const got = servers(await printUnits(h.R));
      console.log({ plant: plant.out.trim(), servers: [...new Set(got)] });
      assert.ok(got.length > 0);
      assert.deepEqual([...new Set(got)], ["nats://127.0.0.1:4222"], "units aimed at alpha's port");
    } finally {
      await h.close();
    }
  },
});

// M2 (control): the README's flow (`cotal up --root` once, then `cotal down`) leaves a root-owned
// run/mesh.json; the sticky run dir keeps alpha from replacing it.
Deno.test({
  name:
    `redteam19b M2 - an existing mesh record stays root's; the rendered port is unchanged${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost({ meshRecord: true });
    try {
      for (
        const s of [
          `echo '{"port":4999}' > run/mesh.json`,
          `echo '{"port":4999}' > run/x && mv -f run/x run/mesh.json`,
          `rm -f run/mesh.json`,
        ]
      ) {
        const r = await h.sh(h.sup("alpha"), s);
        assert.notEqual(r.code, 0, `alpha: ${s}`);
      }
      assert.deepEqual([...new Set(servers(await printUnits(h.R)))], ["nats://127.0.0.1:4222"]);
    } finally {
      await h.close();
    }
  },
});

// M3: alpha plants run/mesh.json.tmp as a (relative) link to beta's supervisor cred. When root
// next runs `cotal up --root /var/lib/cotal` (README's way to fill or refresh the state dir),
// writeMeshRecord writes through the link as root (beta's cred clobbered: any file on the host
// could be), then renames alpha's link onto run/mesh.json, which alpha then owns and can rewrite
// (M1 again, even on a host that had a record).
Deno.test({
  name:
    `redteam19b M3 - a link planted at run/mesh.json.tmp does not make root's 'cotal up' write elsewhere${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost({ meshRecord: true });
    try {
      const B = h.spaceDir("beta");
      const plant = await h.sh(
        h.sup("alpha"),
        `ln -s ../${B}/supervisor.creds run/mesh.json.tmp && echo planted`,
      );
      const before = await Deno.readTextFile(`${h.R}/${B}/supervisor.creds`);
      // What `cotal up` runs, as root, with the mesh's record.
      const prog = `${h.fake}/write_mesh.ts`;
      await Deno.writeTextFile(
        prog,
        `import { writeMeshRecord } from "${STACK}";
await writeMeshRecord({ root: Deno.args[0], host: "127.0.0.1", port: 4222, url: "nats://127.0.0.1:4222", detached: true, startedAt: new Date().toISOString() });`,
      );
      const w = await run(Deno.execPath(), ["run", "-A", "--config", CONFIG, prog, h.R]);
      const after = await Deno.readTextFile(`${h.R}/${B}/supervisor.creds`);
      const rec = await Deno.lstat(`${h.R}/run/mesh.json`);
      console.log({
        plant: plant.out.trim(),
        write: w.code,
        beta: after.slice(0, 60),
        meshIsLink: rec.isSymlink,
        meshUid: rec.uid,
      });
      assert.equal(w.code, 0, w.err);
      assert.equal(after, before, "root wrote the mesh record into beta's supervisor cred");
      assert.equal(rec.isSymlink, false, "run/mesh.json is now alpha's link");
    } finally {
      await h.close();
    }
  },
});
