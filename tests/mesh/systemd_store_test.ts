/**
 * The store's OS boundary on a systemd host, made for real: systemd-sysusers and
 * systemd-tmpfiles (offline, `--root`) create the users and lay out a store an install as root
 * provisioned; then each daemon's user, through setpriv, tries what a compromised one would.
 * The signer records belong to the signer alone; a space's supervisor and the signer share that
 * space's dir and nothing else; one space's supervisor reaches nothing of another's (store dir,
 * agents' dir, sockets, holder lock); the other units' users cannot even pass the store's root.
 */
import assert from "node:assert/strict";
import {
  defaultSystemdLayout,
  renderSysusers,
  renderTmpfiles,
  superviseUser,
  UNIT_USERS,
} from "../../lib/mesh/systemd.ts";
import { managerInstanceId } from "../../lib/manager/manager_types.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

const TOOLS = ["/usr/bin/systemd-sysusers", "/usr/bin/systemd-tmpfiles", "/usr/bin/setpriv"];
const missing = TOOLS.filter((t) => {
  try {
    return !Deno.statSync(t).isFile;
  } catch {
    return true;
  }
});
const isRoot = Deno.uid() === 0;
const why = !isRoot
  ? " (skipped: switching users needs root)"
  : missing.length
  ? ` (skipped: ${missing.join(", ")} not installed here)`
  : "";

const LIB = new URL("../../lib/", import.meta.url).pathname;

// Run as one of the host's users: a store get or put through FsSecretStore, or a raw read.
const OP = `
import { FsSecretStore } from "./lib/workspace/fs_secret_store.ts";
const [op, root, key, value] = Deno.args;
try {
  if (op === "cat") console.log(JSON.stringify({ ok: true, value: Deno.readTextFileSync(key) }));
  else if (op === "rm") { Deno.removeSync(key); console.log(JSON.stringify({ ok: true })); }
  else if (op === "replace") {
    Deno.writeTextFileSync(key + ".x", "FORGED");
    Deno.renameSync(key + ".x", key);
    console.log(JSON.stringify({ ok: true }));
  } else if (op === "link") { Deno.symlinkSync(value, key); console.log(JSON.stringify({ ok: true })); }
  else if (op === "write") { Deno.writeTextFileSync(key, "LOCK", { mode: 0o600 }); console.log(JSON.stringify({ ok: true })); }
  else if (op === "chmod") { Deno.chmodSync(key, 0o700); console.log(JSON.stringify({ ok: true })); }
  else if (op === "ls") console.log(JSON.stringify({ ok: true, value: [...Deno.readDirSync(key)].length }));
  else {
    const store = new FsSecretStore(root);
    const v = op === "get" ? await store.get(key) : await store.put(key, value);
    console.log(JSON.stringify({ ok: true, value: v ?? null }));
  }
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: String(err?.code ?? err?.name ?? err) }));
}
`;

// The supplementary groups systemd gives a unit's user (initgroups): those listing it.
function memberships(text: string, user: string): number[] {
  return text.split("\n").filter(Boolean).map((l) => l.split(":"))
    .filter((f) => (f[3] ?? "").split(",").includes(user)).map((f) => Number(f[2]));
}

function ids(text: string): Map<string, number> {
  return new Map(
    text.split("\n").filter(Boolean).map((l) => {
      const f = l.split(":");
      return [f[0], Number(f[2])];
    }),
  );
}

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const err = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `${cmd} ${args.join(" ")}: ${err}`);
  return new TextDecoder().decode(out.stdout);
}

Deno.test({
  name:
    `systemd - on a laid-out store, only the signer's user reads the signer records; a space's supervisor and the signer share its dir, and no space's supervisor reaches another's${why}`,
  ignore: why !== "",
  async fn() {
    const fake = await tempDir("cotal-sysroot-");
    try {
      await Deno.chmod(fake, 0o755);
      const S = "/var/lib/cotal";
      const R = `${fake}${S}`;
      const space = `secrets/space.${spaceKeyHex("alpha")}`;
      const other = `secrets/space.${spaceKeyHex("beta")}`;
      // What an install as root leaves: every file root's, 0600.
      await Deno.mkdir(`${fake}/etc`, { recursive: true });
      await Deno.writeTextFile(`${fake}/etc/passwd`, "");
      await Deno.writeTextFile(`${fake}/etc/group`, "");
      for (const d of ["secrets/auth", space, other]) {
        await Deno.mkdir(`${R}/${d}`, { recursive: true });
      }
      const provisioned: Record<string, string> = {
        "secrets/auth/broker.json": "SIGNER-SEED-MARKER",
        [`${space}/delivery.creds`]: "DELIVERY-MARKER",
        [`${space}/supervisor.creds`]: "SUPERVISOR-MARKER",
        [`${space}/connection-evictor.creds`]: "SYS-MARKER",
        [`${other}/supervisor.creds`]: "BETA-SUPERVISOR-MARKER",
      };
      for (const [f, v] of Object.entries(provisioned)) {
        await Deno.writeTextFile(`${R}/${f}`, v, { mode: 0o600 });
      }
      await Deno.writeTextFile(`${fake}/sysusers.conf`, renderSysusers(["alpha", "beta"]));
      await Deno.writeTextFile(
        `${fake}/tmpfiles.conf`,
        renderTmpfiles(defaultSystemdLayout(["alpha", "beta"])),
      );
      await run("systemd-sysusers", [`--root=${fake}`, `${fake}/sysusers.conf`]);
      await run("systemd-tmpfiles", [`--root=${fake}`, "--create", `${fake}/tmpfiles.conf`]);
      const users = ids(await Deno.readTextFile(`${fake}/etc/passwd`));
      const groupText = await Deno.readTextFile(`${fake}/etc/group`);
      const groups = ids(groupText);
      // The signer's trail, as it writes it (0600, its own).
      await Deno.writeTextFile(`${R}/audit/signer.jsonl`, "AUDIT\n", { mode: 0o600 });
      await Deno.chown(`${R}/audit/signer.jsonl`, users.get(UNIT_USERS.signer)!, null);

      // The program each user runs: a copy of deno and of lib/ they can all read.
      const tools = `${fake}/tools`;
      await Deno.mkdir(tools);
      await Deno.copyFile(Deno.execPath(), `${tools}/deno`);
      await Deno.chmod(`${tools}/deno`, 0o755);
      await run("cp", ["-r", LIB, `${tools}/lib`]);
      await Deno.writeTextFile(`${tools}/op.ts`, OP);
      await run("chmod", ["-R", "a+rX", tools]);

      const as = async (
        user: string,
        op: string,
        key: string,
        value = "",
      ): Promise<{ ok: boolean; value?: unknown; error?: string }> => {
        const uid = users.get(user)!;
        const home = `${fake}/home-${user}`;
        await Deno.mkdir(home, { recursive: true });
        await Deno.chown(home, uid, groups.get("cotal")!);
        const supp = memberships(groupText, user);
        const suppFlag = supp.length ? `--groups=${supp.join(",")}` : "--clear-groups";
        const out = await new Deno.Command("setpriv", {
          args: [
            `--reuid=${uid}`,
            `--regid=${groups.get("cotal")}`,
            suppFlag,
            `${tools}/deno`,
            "run",
            "-A",
            "--no-config",
            `${tools}/op.ts`,
            op,
            `${R}/secrets`,
            ["cat", "ls", "rm", "replace", "link", "chmod", "write"].includes(op)
              ? `${R}/${key}`
              : key,
            value,
          ],
          env: { DENO_DIR: `${home}/deno`, HOME: home, NO_COLOR: "1" },
          clearEnv: true,
          stdout: "piped",
          stderr: "piped",
        }).output();
        const text = new TextDecoder().decode(out.stdout).trim();
        assert.ok(text, `${user} ${op} ${key}: ${new TextDecoder().decode(out.stderr)}`);
        return JSON.parse(text);
      };
      const denied = (r: { ok: boolean; error?: string }, what: string) => {
        assert.equal(r.ok, false, `${what} was allowed`);
        assert.match(r.error!, /EACCES|EPERM|PermissionDenied|NotCapable|store_io/, what);
      };

      // The supervisor: its own cred and agent creds, never the signer records.
      const sup = superviseUser("alpha");
      denied(await as(sup, "cat", "secrets/auth/broker.json"), "supervisor reads the signer");
      denied(await as(sup, "ls", "secrets/auth"), "supervisor lists the signer dir");
      denied(await as(sup, "get", "auth/broker.json"), "supervisor gets the signer record");
      denied(await as(sup, "put", "auth/broker.json", "x"), "supervisor replaces the record");
      denied(await as(sup, "cat", `${space}/delivery.creds`), "supervisor reads delivery's cred");
      // A $SYS cred could kick the signer off the broker (red team 13).
      denied(await as(sup, "cat", `${space}/connection-evictor.creds`), "supervisor reads $SYS");
      // The signer's audit trail is out of its reach: no reading, no rewriting.
      denied(await as(sup, "ls", "audit"), "supervisor lists the audit dir");
      denied(await as(sup, "cat", "audit/signer.jsonl"), "supervisor reads the audit trail");
      // Red team 13's second run: nor may it remove, replace or pre-empt what is not its own.
      for (
        const f of [
          "delivery.creds",
          "membership-rw.creds",
          "connection-evictor.creds",
          "supervisor.creds",
        ]
      ) {
        denied(await as(sup, "rm", `${space}/${f}`), `supervisor removes ${f}`);
        denied(await as(sup, "replace", `${space}/${f}`), `supervisor replaces ${f}`);
      }
      // The name is taken (tmpfiles made the file, the signer's), and not the supervisor's to free.
      const link = await as(
        sup,
        "link",
        `${space}/membership-rw.creds`,
        `${R}/secrets/auth/broker.json`,
      );
      assert.equal(link.ok, false, "supervisor planted a link where the signer's cred goes");
      assert.match(link.error!, /AlreadyExists|EEXIST/);
      denied(await as(sup, "chmod", "secrets"), "supervisor locks the signer out of the store");
      assert.deepEqual(await as(sup, "cat", `${space}/supervisor.creds`), {
        ok: true,
        value: "SUPERVISOR-MARKER",
      });
      const agentKey = `${space.slice("secrets/".length)}/agents/a1.creds`;
      assert.equal((await as(sup, "put", agentKey, "AGENT")).ok, true);

      // Another space's supervisor (and the agents it runs, as its uid) reaches nothing of alpha's.
      const beta = superviseUser("beta");
      const sockets = (sp: string) =>
        `run/sockets/${managerInstanceId("/var/lib/cotal", sp).slice(0, 12)}`;
      assert.deepEqual(await as(beta, "cat", `${other}/supervisor.creds`), {
        ok: true,
        value: "BETA-SUPERVISOR-MARKER",
      });
      const betaAgent = `${other.slice("secrets/".length)}/agents/b1.creds`;
      assert.equal((await as(beta, "put", betaAgent, "BETA-AGENT")).ok, true);
      assert.equal((await as(beta, "ls", `agents/space.${spaceKeyHex("beta")}`)).ok, true);
      assert.equal((await as(beta, "ls", sockets("beta"))).ok, true);
      denied(await as(beta, "cat", `${space}/supervisor.creds`), "beta reads alpha's cred");
      denied(await as(beta, "ls", space), "beta lists alpha's store dir");
      denied(await as(beta, "get", agentKey), "beta reads alpha's agent cred");
      denied(await as(beta, "put", agentKey, "FORGED"), "beta replaces alpha's agent cred");
      denied(
        await as(beta, "put", `${space.slice("secrets/".length)}/agents/x.creds`, "PLANT"),
        "beta plants a cred in alpha's dir",
      );
      denied(
        await as(beta, "ls", `agents/space.${spaceKeyHex("alpha")}`),
        "beta lists alpha's agents",
      );
      denied(await as(beta, "ls", sockets("alpha")), "beta lists alpha's sockets");
      denied(await as(beta, "ls", "agents"), "beta lists every space's agents");
      denied(await as(sup, "cat", `${other}/supervisor.creds`), "alpha reads beta's cred");
      denied(await as(sup, "get", betaAgent), "alpha reads beta's agent cred");
      // The run dir is shared and sticky: beta cannot take alpha's holder lock.
      const lock = `run/manager.${managerInstanceId("/var/lib/cotal", "alpha")}.lock`;
      assert.equal((await as(sup, "write", lock)).ok, true);
      denied(await as(beta, "rm", lock), "beta removes alpha's holder lock");
      denied(await as(beta, "replace", lock), "beta replaces alpha's holder lock");

      // The signer: its records and the daemon creds it re-signs, nothing the supervisor owns.
      const sig = UNIT_USERS.signer;
      assert.deepEqual(await as(sig, "get", "auth/broker.json"), {
        ok: true,
        value: "SIGNER-SEED-MARKER",
      });
      const deliveryKey = `${space.slice("secrets/".length)}/delivery.creds`;
      assert.deepEqual(await as(sig, "get", deliveryKey), { ok: true, value: "DELIVERY-MARKER" });
      assert.equal((await as(sig, "put", deliveryKey, "RE-SIGNED")).ok, true);
      // The supervisor's own cred: the signer re-signs it (a supervisor down past its day has
      // no other way back), and it stays readable by the supervisor.
      assert.deepEqual(await as(sig, "cat", `${space}/supervisor.creds`), {
        ok: true,
        value: "SUPERVISOR-MARKER",
      });
      const supKey = `${space.slice("secrets/".length)}/supervisor.creds`;
      assert.equal((await as(sig, "put", supKey, "SUPERVISOR-RE-SIGNED")).ok, true);
      assert.deepEqual(await as(sup, "get", supKey), { ok: true, value: "SUPERVISOR-RE-SIGNED" });
      denied(await as(sup, "put", supKey, "FORGED"), "supervisor rewrites its cred");
      denied(await as(sig, "cat", `${space}/connection-evictor.creds`), "signer reads $SYS");
      assert.deepEqual(await as(sig, "cat", "audit/signer.jsonl"), { ok: true, value: "AUDIT\n" });
      denied(await as(sig, "get", agentKey), "signer reads an agent cred");

      // Every other unit's user cannot pass the store's root at all.
      for (const u of [UNIT_USERS.delivery, UNIT_USERS.broker, UNIT_USERS.auth]) {
        denied(await as(u, "ls", "secrets"), `${u} lists the store`);
        denied(await as(u, "cat", "secrets/auth/broker.json"), `${u} reads the signer`);
      }

      // The writes left the layout as tmpfiles made it: shared dirs stay shared, files 0600.
      const mode = async (p: string) => ((await Deno.stat(`${R}/${p}`)).mode! & 0o7777);
      assert.equal((await mode("secrets")).toString(8), "2710");
      assert.equal((await Deno.stat(`${R}/secrets`)).uid, 0);
      assert.equal((await mode(space)).toString(8), "3770");
      assert.equal((await mode("run")).toString(8), "1770");
      assert.equal((await Deno.stat(`${R}/${space}`)).uid, 0);
      // A daemon cred the install did not leave is there anyway, the signer's and empty.
      const rw = await Deno.lstat(`${R}/${space}/membership-rw.creds`);
      assert.ok(rw.isFile && rw.size === 0 && rw.uid === users.get(sig));
      assert.equal((await mode("secrets/auth")).toString(8), "700");
      assert.equal((await mode("audit")).toString(8), "700");
      assert.equal((await Deno.stat(`${R}/audit`)).uid, users.get(sig));
      assert.equal((await Deno.stat(`${R}/${space}/connection-evictor.creds`)).uid, 0);
      const re = await Deno.stat(`${R}/${space}/delivery.creds`);
      assert.equal(re.uid, users.get(sig));
      assert.equal((re.mode! & 0o777).toString(8), "600");
      assert.equal(await Deno.readTextFile(`${R}/${space}/delivery.creds`), "RE-SIGNED");
      const supCred = await Deno.stat(`${R}/${space}/supervisor.creds`);
      assert.equal(supCred.uid, users.get(sig));
      assert.equal((supCred.mode! & 0o777).toString(8), "640");
      const agent = await Deno.stat(`${R}/${space}/agents/a1.creds`);
      assert.equal(agent.uid, users.get(sup));
      assert.equal((agent.mode! & 0o777).toString(8), "600");
    } finally {
      await removeTempDir(fake);
    }
  },
});
