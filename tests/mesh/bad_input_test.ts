/**
 * Bad input at the operator's boundary: each case gets one sentence on stderr, a non-zero exit,
 * no stack trace, nothing half-written and no copy of a secret left behind; a daemon whose pid
 * file is lost or corrupt is still found and stopped; a failed `up` leaves no broker running
 * and a failed `space add` leaves no space listed.
 */
import assert from "node:assert/strict";
import { startDaemon } from "../../lib/mesh/daemon.ts";
import { ensureMeshDirs, meshPaths } from "../../lib/mesh/layout.ts";
import { writeFileAtomic } from "../../lib/atomic_file.ts";
import { componentFiles, listComponents, stopComponent } from "../../lib/mesh/stack.ts";
import { spaceAdd } from "../../lib/mesh/space.ts";
import { readSpaceIndex } from "../../lib/mesh/trust_state.ts";
import { isCotalError } from "../../lib/errors.ts";
import { assertProgram } from "../../lib/manager/spawn_request.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function cotal(args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    stdout: "piped",
    stderr: "piped",
    env: { COTAL_HOME: `${await tempDir("cotal-home-")}` },
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

/** One sentence, no stack trace. */
function oneSentence(stderr: string, re: RegExp): void {
  assert.match(stderr, re);
  assert.doesNotMatch(stderr, /\n\s+at |Uncaught/, stderr);
}

function leftovers(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => /\.tmp-/.test(n));
}

function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return false;
  }
}

Deno.test("mesh - mint --out refuses a directory, a missing directory and an existing file, leaving no copy", async () => {
  const dir = await tempDir("cotal-badout-");
  const root = `${dir}/root`;
  try {
    assert.equal((await cotal(["space", "add", "default", "--root", root])).code, 0);
    await Deno.mkdir(`${dir}/adir`);
    const asDir = await cotal([
      "mint",
      "--root",
      root,
      "--profile",
      "observer",
      "--out",
      `${dir}/adir`,
    ]);
    assert.equal(asDir.code, 1);
    oneSentence(asDir.stderr, /--out ".*adir" is a directory; name a file/);
    const missing = await cotal([
      "mint",
      "--root",
      root,
      "--profile",
      "observer",
      "--out",
      `${dir}/nope/x.creds`,
    ]);
    assert.equal(missing.code, 1);
    oneSentence(missing.stderr, /does not exist; create it first/);
    await Deno.writeTextFile(`${dir}/kept.creds`, "mine");
    const exists = await cotal([
      "mint",
      "--root",
      root,
      "--profile",
      "observer",
      "--out",
      `${dir}/kept.creds`,
    ]);
    assert.equal(exists.code, 1);
    oneSentence(exists.stderr, /already exists; pass --force to replace it, or name another/);
    assert.equal(await Deno.readTextFile(`${dir}/kept.creds`), "mine");
    assert.deepEqual(leftovers(dir), []);
    const ok = await cotal([
      "mint",
      "--root",
      root,
      "--profile",
      "observer",
      "--out",
      `${dir}/new.creds`,
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal((await Deno.stat(`${dir}/new.creds`)).mode! & 0o777, 0o600);
    // It says when the cred stops working and how a NATS client must connect with it.
    assert.match(
      ok.stderr,
      /observer cred for U[A-Z0-9]+ expires \d{4}-.*Z \(in \d+ s\); a NATS client connects with inboxPrefix "_INBOX_U[A-Z0-9]+"/,
    );
    // The agent profile needs a lifecycle: a new one is made and printed.
    const agent = await cotal(["mint", "--root", root, "--profile", "agent", "--actor", "a1"]);
    assert.equal(agent.code, 0, agent.stderr);
    assert.match(agent.stderr, /lifecycle uid [a-z0-9]{26,32} /);
    // Without --actor an agent cred is local.agent, provisioned or not (newcomer pass 12 got
    // local.operator unless --provision was given).
    const plain = await cotal(["mint", "--root", root, "--profile", "agent", "--json"]);
    assert.equal(plain.code, 0, plain.stderr);
    assert.equal(JSON.parse(plain.stdout).principal, "local.agent");
    // A lifetime refused names the flag, not an internal option.
    const zero = await cotal(["mint", "--root", root, "--profile", "observer", "--ttl", "0"]);
    assert.equal(zero.code, 2, zero.stderr);
    assert.match(zero.stderr, /--ttl: /);
    assert.doesNotMatch(zero.stderr, /expiresInSeconds/);
    // Its help names the profiles, not array indices.
    assert.match(
      (await cotal(["mint", "--help"])).stdout,
      /one of \(default lifetime\): [a-z-]+ \(\d+[dhm], at most \d+[dhm]\), [a-z-]+/,
    );
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mesh - up --root on a file and status --root on nothing: one sentence on stderr, exit 1", async () => {
  const dir = await tempDir("cotal-badroot-");
  try {
    await Deno.writeTextFile(`${dir}/afile`, "");
    const up = await cotal(["up", "--detach", "--root", `${dir}/afile`, "--port", `${freePort()}`]);
    assert.equal(up.code, 1);
    oneSentence(up.stderr, /is a file, not a directory; pass --root a directory/);
    const st = await cotal(["status", "--root", `${dir}/missing`]);
    assert.equal(st.code, 1);
    assert.equal(st.stdout, "");
    oneSentence(st.stderr, /There is no Cotal state directory at .*missing/);
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mesh - writeFileAtomic leaves the old file or the new one, never a temp file", async () => {
  const dir = await tempDir("cotal-atomic-");
  try {
    await writeFileAtomic(`${dir}/a`, "one");
    await writeFileAtomic(`${dir}/a`, "two");
    assert.equal(await Deno.readTextFile(`${dir}/a`), "two");
    assert.equal((await Deno.stat(`${dir}/a`)).mode! & 0o777, 0o600);
    await assert.rejects(
      writeFileAtomic(`${dir}/a`, "three", { noClobber: true }),
      (e: unknown) => isCotalError(e, "file_exists"),
    );
    await assert.rejects(
      writeFileAtomic(`${dir}/a/b`, "x"),
      (e: unknown) => isCotalError(e, "not_directory"),
    );
    assert.deepEqual(leftovers(dir), []);
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mesh - a daemon whose pid file is corrupt or gone is still found and stopped through its lock", async () => {
  const root = await tempDir("cotal-pidlost-");
  try {
    await ensureMeshDirs(meshPaths(root));
    const pids: number[] = [];
    for (const id of ["corrupt", "gone"]) {
      const { record } = await startDaemon({
        name: id,
        command: "/bin/sleep",
        args: ["300"],
        ...componentFiles(root, id),
        detach: true,
      });
      pids.push(record.pid);
    }
    await Deno.writeTextFile(componentFiles(root, "corrupt").pidFile, "{not json");
    await Deno.remove(componentFiles(root, "gone").pidFile);
    const listed = await listComponents(root);
    assert.deepEqual(
      listed.map((c) => [c.id, c.state, c.pid]),
      [["corrupt", "running", pids[0]], ["gone", "running", pids[1]]],
    );
    assert.equal(await stopComponent(root, "corrupt"), "stopped");
    assert.equal(await stopComponent(root, "gone"), "stopped");
    assert.equal(alive(pids[0]) || alive(pids[1]), false);
  } finally {
    await removeTempDir(root);
  }
});

Deno.test("mesh - spawn refuses a program that does not exist or cannot run", async () => {
  await assert.rejects(
    assertProgram("/nonexistent/prog"),
    (e: unknown) =>
      isCotalError(e, "program_not_found") && /does not exist/.test((e as Error).message),
  );
  const dir = await tempDir("cotal-prog-");
  try {
    await Deno.writeTextFile(`${dir}/script.sh`, "#!/bin/sh\n", { mode: 0o644 });
    await assert.rejects(
      assertProgram(`${dir}/script.sh`),
      (e: unknown) => isCotalError(e, "program_not_executable"),
    );
    await assert.rejects(
      assertProgram(dir),
      (e: unknown) => isCotalError(e, "program_not_executable"),
    );
    await assertProgram("/bin/sh");
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mesh - a space add whose daemons cannot start is rolled back whole", async () => {
  const root = await tempDir("cotal-addfail-");
  const port = freePort();
  try {
    const up = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
    assert.equal(up.code, 0, up.stderr);
    // Someone holds the new space's delivery lock: its daemon cannot start.
    const lock = componentFiles(root, `delivery.${spaceKeyHex("team2")}`).lockFile;
    const holder = new Deno.Command("/usr/bin/flock", {
      args: ["-x", lock, "/bin/sleep", "60"],
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      for (let i = 0; i < 100 && !(await Deno.stat(lock).catch(() => undefined)); i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await assert.rejects(spaceAdd(root, "team2"));
      assert.deepEqual((await readSpaceIndex(root)).spaces, ["default"]);
      assert.ok(!(await listComponents(root)).some((c) => c.id.endsWith(spaceKeyHex("team2"))));
    } finally {
      holder.kill("SIGKILL");
      await holder.status;
    }
    // And the next up works.
    const again = await cotal(["up", "--detach", "--root", root, "--port", `${port}`]);
    assert.equal(again.code, 0, again.stderr);
  } finally {
    await cotal(["down", "--root", root]);
    await removeTempDir(root);
  }
});

Deno.test("mesh - doctor auth names loose modes, a corrupt account record and membership config; --fix tightens modes", async () => {
  const dir = await tempDir("cotal-doctor-store-");
  const root = `${dir}/root`;
  try {
    assert.equal((await cotal(["space", "add", "default", "--root", root])).code, 0);
    assert.equal((await cotal(["space", "add", "team2", "--root", root])).code, 0);
    const store = `${root}/secrets`;
    const hex = spaceKeyHex("team2");
    await Deno.chmod(`${store}/auth/broker.json`, 0o644);
    await Deno.chmod(`${store}/auth`, 0o755);
    await Deno.mkdir(`${store}/space.${hex}`, { recursive: true, mode: 0o700 });
    await Deno.writeTextFile(`${store}/space.${hex}/membership.json`, "{oops", { mode: 0o600 });
    const clean = await cotal(["doctor", "auth", "--json", "--root", root]);
    assert.equal(clean.code, 1);
    // A space added while no $SYS seed was at hand runs without its observer cred: said.
    const creds = JSON.parse(clean.stdout).creds as {
      space?: string;
      kind: string;
      status: string;
    }[];
    assert.ok(
      creds.some((c) =>
        c.space === "team2" && c.kind === "membership-observer.creds" && c.status === "missing"
      ),
      JSON.stringify(creds),
    );
    const found = JSON.parse(clean.stdout).store as { path: string; code: string }[];
    assert.deepEqual(
      found.map((p) => [p.path, p.code]).sort(),
      [
        ["auth", "loose_mode"],
        ["auth/broker.json", "loose_mode"],
        [`space.${hex}/membership.json`, "record_unreadable"],
      ],
    );
    // --fix tightens what it can and still exits 1 for what it cannot.
    const fixed = await cotal(["doctor", "auth", "--fix", "--root", root]);
    assert.equal(fixed.code, 1);
    assert.match(fixed.stdout, /loose_mode .* -> fixed/);
    assert.match(fixed.stdout, /record_unreadable .* -> not fixed|record_unreadable/);
    assert.equal((await Deno.stat(`${store}/auth/broker.json`)).mode! & 0o777, 0o600);
    assert.equal((await Deno.stat(`${store}/auth`)).mode! & 0o777, 0o700);
    await Deno.remove(`${store}/space.${hex}/membership.json`);
    // A corrupt account record is named with the signer's own sentence.
    await Deno.writeTextFile(`${store}/auth/account.${hex}.json`, "{}", { mode: 0o600 });
    const acct = await cotal(["doctor", "auth", "--json", "--root", root]);
    assert.equal(acct.code, 1);
    assert.deepEqual(
      (JSON.parse(acct.stdout).store as { path: string; code: string }[]).map((p) => [
        p.path,
        p.code,
      ]),
      [[`auth/account.${hex}.json`, "record_unreadable"]],
    );
  } finally {
    await removeTempDir(dir);
  }
});

const isRoot = Deno.uid() === 0;

Deno.test({
  name: `mesh - up on a disk too small for a space says what is short and leaves no broker running${
    isRoot ? "" : " (skipped: a small tmpfs needs root)"
  }`,
  ignore: !isRoot,
  async fn() {
    const dir = await tempDir("cotal-smalldisk-");
    const mounted = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "size=3m", "tmpfs", dir],
    }).output();
    assert.ok(mounted.success, new TextDecoder().decode(mounted.stderr));
    try {
      const root = `${dir}/root`;
      const up = await cotal(["up", "--detach", "--root", root, "--port", `${freePort()}`]);
      assert.equal(up.code, 1);
      oneSentence(up.stderr, /could not reserve JetStream storage for space 'default'.*4\.5 GiB/);
      const running = await listComponents(root);
      assert.deepEqual(running.filter((c) => c.state === "running"), []);
      assert.deepEqual(leftovers(`${root}/broker`), []);
    } finally {
      await new Deno.Command("umount", { args: ["-l", dir] }).output();
      await removeTempDir(dir);
    }
  },
});

Deno.test("mesh - a daemon's log, lock or stat file planted as a link is refused, and the link's target is untouched", async () => {
  const root = await tempDir("cotal-planted-");
  try {
    await ensureMeshDirs(meshPaths(root));
    const target = `${root}/precious`;
    for (const which of ["logFile", "lockFile", "pidFile"] as const) {
      await Deno.writeTextFile(target, "PRECIOUS");
      const files = componentFiles(root, `d-${which}`);
      // The stat file sits beside the pid file: its name is the one planted for "pidFile".
      const planted = which === "pidFile" ? `${files.pidFile}.stat` : files[which];
      await Deno.symlink(target, planted);
      const err = await startDaemon({
        name: `d-${which}`,
        command: "/bin/sleep",
        args: ["300"],
        ...files,
        detach: true,
      }).then(() => undefined, (e) => e);
      // The stat file is removed before it is made afresh: its link goes, nothing follows it.
      if (which === "pidFile") {
        assert.equal(err, undefined);
        await stopComponent(root, `d-${which}`);
      } else {
        assert.ok(isCotalError(err, "file_not_own"), String(err));
        assert.match(err.message, /is a link, which this user will not open there; remove it/);
      }
      assert.equal(await Deno.readTextFile(target), "PRECIOUS", which);
    }
  } finally {
    await removeTempDir(root);
  }
});
