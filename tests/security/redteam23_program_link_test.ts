/**
 * Red team 23: an agent re-points its own program path at a host file through its workdir.
 *
 * Attack: the operator spawns a program that lives in a subdirectory of the agent's workdir
 * (`cotal spawn --workdir /proj -- /proj/bin/run.sh`, a natural layout). The sandbox bound the
 * workdir read-write, then the program read-only at its own path. The program cannot touch its
 * own file (a mount point), but it can rename the directory holding it: it moves `/proj/bin`
 * aside, makes a new `bin` whose `run.sh` is a relative symlink (`../../../<host file>`), and
 * exits. At the restart the supervisor's bwrap (root, host view) looked the bind source up
 * through the planted link, and the same relative link placed it inside the new root.
 *
 * Observed when written (bwrap 0.8.0, root supervisor): a root-owned 0755 script that exists
 * only on the host ran inside the sandbox as the agent's uid. Fixed: a path under the agent's
 * workdir (or its own dir) is not bound on its own; the workdir's bind shows it, and the planted
 * link resolves inside the sandbox, where the host file does not exist.
 *
 * Passes when the defence holds: the host-only file never runs inside the sandbox.
 */
import assert from "node:assert/strict";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

async function cotal(args: string[], timeoutMs = 150_000): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  return new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
}

Deno.test("redteam23 - a planted link in the workdir does not bind a host file as the program", async () => {
  const root = await tempDir("cotal-rt23pl-");
  const base = await tempDir("cotal-rt23plw-");
  const work = `${base}/proj`;
  // Only on the host, under /tmp (a dir bwrap makes inside every sandbox).
  const hostOnly = `/tmp/cotal_rt23_hostonly_${crypto.randomUUID().slice(0, 8)}.sh`;
  try {
    await Deno.mkdir(`${work}/bin`, { recursive: true });
    await Deno.chmod(base, 0o755);
    await Deno.writeTextFile(
      `${work}/bin/run.sh`,
      `#!/bin/sh
W=${work}
echo "start $(id -u)" >> $W/log
if [ ! -e $W/planted ]; then
  mv $W/bin $W/bin.old && mkdir $W/bin && ln -s UP${
        hostOnly.slice(1)
      } $W/bin/run.sh && touch $W/planted
  exit 1
fi
sleep 100000
`,
    );
    await Deno.writeTextFile(
      hostOnly,
      `#!/bin/sh\necho "HOSTONLY ran inside as $(id -u)" >> ${work}/log\nsleep 100000\n`,
    );
    await Deno.chmod(hostOnly, 0o755);
    // A workdir agents (group 1500000000, the default agent ids) may write.
    for (const p of [work, `${work}/bin`, `${work}/bin/run.sh`]) {
      await Deno.chown(p, null, 1500000000);
      await Deno.chmod(p, p.endsWith(".sh") ? 0o775 : 0o2775);
    }
    // The link climbs from bin/ to / (one ../ per part of its dir's path), then down to the
    // host-only file: relative, so bwrap resolves it in both views.
    const depth = `${work}/bin`.split("/").filter(Boolean).length;
    await Deno.writeTextFile(
      `${work}/bin/run.sh`,
      (await Deno.readTextFile(`${work}/bin/run.sh`)).replace("UP", "../".repeat(depth)),
    );
    console.log(await cotal(["up", "--root", root, "--port", `${freePort()}`, "--detach"]));
    const spawned = await cotal([
      ...["spawn", "--root", root, "--agent", "program", "--name", "linker"],
      ...["--workdir", work, "--", `${work}/bin/run.sh`],
    ]);
    console.log(spawned);
    // The first run plants the link and exits; the restarts that follow run the path again.
    const end = Date.now() + 25_000;
    let log = "";
    while (Date.now() < end && !log.includes("HOSTONLY")) {
      log = await Deno.readTextFile(`${work}/log`).catch(() => "");
      await new Promise((r) => setTimeout(r, 1000));
    }
    console.log("workdir log:\n" + log);
    assert.match(log, /^start \d+$/m, "the program never ran: the attack was not tried");
    assert.ok(await Deno.lstat(`${work}/planted`).then(() => true, () => false), "not planted");
    assert.ok(
      !log.includes("HOSTONLY"),
      "a host file outside the allowlist ran inside the sandbox",
    );
  } finally {
    console.log(await cotal(["down", "--root", root], 120_000));
    await Deno.remove(hostOnly).catch(() => {});
    await removeTempDir(root);
    await removeTempDir(base);
  }
});
